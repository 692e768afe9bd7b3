"""Semantic groups for the default KB's concepts, so that `--types DISO` asks for disorders only.

The default's sources carry no semantic types (HPO's branches aside): MeSH headings name diseases,
drugs, organs, organisms, procedures and "Patients" or "Risk" alike, and `link` on an abstract
linked them all. Each concept is given the UMLS Semantic Group (McCray, Burgun and Bodenreider
2001: DISO Disorders, CHEM Chemicals & Drugs, ANAT Anatomy, LIVB Living Beings, PROC Procedures,
PHYS Physiology, DEVI Devices; `kb.groups`) that its source implies, as one more of its `types`:

- HPO: Phenotypic abnormality (HP:0000118) is DISO; the other branches (Clinical modifier,
  Frequency, Mode of inheritance, …) get no group.
- ICD-10: codes A00–U85 (diseases, symptoms, injuries and poisonings, and chapter XXII's SARS,
  COVID-19 and drug resistances) are DISO; external causes (V–Y) and the factors influencing
  health status (Z) get no group.
- Drugs of the drug list: CHEM.
- MeSH: the package carries no tree numbers, but it lists each descriptor's allowable qualifiers
  (its `D…Q…` rows), and NLM allows a qualifier only with descriptors of certain tree categories:
  *etiology* with diseases (C, F03), *pharmacology* and *administration & dosage* with chemicals
  and drugs (D), *classification* with *growth & development* with organisms (B), … `mesh_group`
  reads the category back from them. Descriptors whose qualifiers say nothing clear (check tags
  such as *Humans*, persons, concepts, geographicals) get no group. Measured against Mantra GSC's
  annotated groups, CTD MEDIC and BC5CDR's chemicals: BENCHMARKS.md, *Embedded default: link with
  a semantic-group filter*.
"""

from __future__ import annotations

from babelink.kb.groups import SEMANTIC_GROUPS

#: The groups the default assigns, by code.
GROUPS = {code: SEMANTIC_GROUPS[code][0] for code in ("DISO", "CHEM", "ANAT", "LIVB", "PROC", "PHYS", "DEVI")}

#: HPO branch → group.
HPO_BRANCH_GROUPS = {"HP:0000118": "DISO"}  # Phenotypic abnormality

#: Tried in order, first match wins: (group, qualifiers all allowed, qualifiers none allowed).
#: Qualifier ids: Q000209 etiology, Q000494 pharmacology, Q000008 administration & dosage,
#: Q000145 classification, Q000254 growth & development, Q000033 anatomy & histology, Q000166
#: cytology, Q000098 blood supply, Q000294 innervation, Q000009 adverse effects, Q000600 supply &
#: distribution, Q000382 microbiology, Q000379 methods, Q000458 organization & administration,
#: Q000502 physiology, Q000187 drug effects.
MESH_QUALIFIER_RULES: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = tuple(
    (group, frozenset(required), frozenset(excluded))
    for group, required, excluded in (
        ("DISO", {"Q000209"}, ()),  # diseases (C) and mental disorders (F03)
        ("CHEM", {"Q000494"}, ()),  # chemicals and drugs (D)
        ("CHEM", {"Q000008"}, ()),  # receptors and other D descriptors without pharmacology
        ("LIVB", {"Q000145", "Q000254"}, ()),  # organisms (B): anatomy has no classification
        ("ANAT", {"Q000033"}, ()),  # organs, regions and tissues (A)
        ("ANAT", {"Q000166"}, ()),  # cells and body fluids (A11, A12)
        ("ANAT", {"Q000098"}, ()),
        ("ANAT", {"Q000294"}, ()),
        ("DEVI", {"Q000009", "Q000600", "Q000382"}, ()),  # equipment and supplies (E07)
        ("PROC", {"Q000379"}, {"Q000458"}),  # techniques (E), not services and disciplines (N, H)
        ("PHYS", {"Q000502", "Q000187"}, ()),  # phenomena and processes (G)
    )
)


def mesh_group(qualifiers: frozenset[str]) -> str | None:
    """The group a MeSH descriptor's allowable qualifiers (`Q…` ids) imply, if any."""
    for group, required, excluded in MESH_QUALIFIER_RULES:
        if required <= qualifiers and not excluded & qualifiers:
            return group
    return None


def icd10_group(code: str) -> str | None:
    """DISO for codes A00–U85, no group for external causes and health factors (V–Z)."""
    return "DISO" if "A" <= code[:1] <= "U" else None
