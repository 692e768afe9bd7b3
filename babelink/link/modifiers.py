"""Concepts that qualify a mention rather than name one: "Severe", "Chronic", "Bilateral", "Mild".

HPO files them under Clinical modifier (severity, laterality, spatial and temporal pattern,
onset, course) and Frequency; UMLS under the semantic types Temporal, Qualitative, Quantitative
and Spatial Concept. Annotation guidelines for disease and clinical mentions (NCBI-disease,
BC5CDR, Mantra GSC, QUAERO) do not annotate such a word on its own, yet each is a one-word KB
name found in almost every clinical text: on Mantra GSC they were a third of the English false
positives of `link`. `link` therefore drops a span whose best concept has types and all of them
are modifier types; `normalize` still answers them, and `LinkParams(modifier_types=frozenset())`
links them too. A KB without types (no MRSTY, no ontology) is unaffected: types come from MRSTY,
an OBO ontology's branches (`kb.obo`), or `build --types-from`.
"""

from __future__ import annotations

from collections.abc import Mapping

from babelink.kb.base import KnowledgeBase
from babelink.kb.groups import SEMANTIC_GROUPS

#: UMLS T079 Temporal, T080 Qualitative, T081 Quantitative, T082 Spatial Concept; HPO's Clinical
#: modifier (HP:0012823) and Frequency (HP:0040279) branches.
MODIFIER_TYPES = frozenset({"T079", "T080", "T081", "T082", "HP:0012823", "HP:0040279"})


def concept_types(kb: KnowledgeBase) -> dict[str, frozenset[str]]:
    """The types of every concept that has any, semantic groups aside (`is_modifier`)."""
    ids, types = (kb.concepts.column(name).to_pylist() for name in ("concept_id", "types"))
    typed = ((concept_id, frozenset(found or ()).difference(SEMANTIC_GROUPS)) for concept_id, found in zip(ids, types))
    return {concept_id: found for concept_id, found in typed if found}


def is_modifier(concept_id: str, types: Mapping[str, frozenset[str]], modifier_types: frozenset[str]) -> bool:
    """Whether the concept has types (`concept_types`: semantic groups aside) and all of them are
    modifier types (a concept that is also a disease or phenotype stays a mention). A group is the
    coarser word: the default joins HPO's modifier *Borderline* to ICD-10's Borderline leprosy
    through HPO's own cross-reference, which makes it DISO, and "borderline" in a text is still no
    mention."""
    found = types.get(concept_id)
    return bool(found) and found <= modifier_types
