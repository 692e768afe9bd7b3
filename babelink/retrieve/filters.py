"""Filters applied inside retrieval: only concepts of the given semantic types, sources or
languages are searched, so top-k holds k matching concepts.

Ranking first and filtering after (what peers do) returns fewer than k answers, or none, when the
best matches are other concepts. Here a filter selects the concepts that have a name from the
given sources, in the given languages, and one of the given types; all of their names are
searched (a Spanish mention still meets a MeSH concept through its Spanish name). It compiles,
once per bundle, into a mask over the name strings (searched by TF-IDF and FAISS only where
allowed) and one over the (string, concept) pairs (a string two concepts share answers only for
the allowed one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from babelink.errors import InvalidInputError
from babelink.index.names import NameTable
from babelink.kb.base import KnowledgeBase
from babelink.kb.groups import SEMANTIC_GROUPS, expand_groups
from babelink.lang import parse_languages
from babelink.text import comma_list

#: Unknown values an error names before it says how many there are.
MAX_NAMED = 20


@dataclass(frozen=True)
class NameFilter:
    """Semantic types (MRSTY TUIs or names, a concept's `types`; a semantic group such as DISO
    stands for its TUIs where the KB has no such type, `kb.groups`), sources (a name's vocabulary,
    SAB) and languages (ISO 639-1 or UMLS LAT) a concept's names must include; None: no
    restriction on that field."""

    types: frozenset[str] | None = None
    sources: frozenset[str] | None = None
    langs: frozenset[str] | None = None

    @classmethod
    def of(cls, types: Iterable[str] | None = None, sources: Iterable[str] | None = None,
           langs: Iterable[str] | None = None) -> NameFilter:
        """From option values, each a list of codes or comma-separated codes."""
        return cls(frozenset(comma_list(types)) or None, frozenset(comma_list(sources)) or None,
                   parse_languages(list(langs or ()), "langs"))

    def __bool__(self) -> bool:
        return any(field is not None for field in (self.types, self.sources, self.langs))


@dataclass(frozen=True)
class AllowedNames:
    strings: np.ndarray  # per name string: it names an allowed concept
    pairs: np.ndarray  # aligned with `NameTable.concept_rows`: the (string, concept) pair's concept is allowed


def allowed_names(kb: KnowledgeBase, names: NameTable, name_filter: NameFilter) -> AllowedNames:
    """Compile `name_filter` for one bundle; types, sources or languages the KB does not have are
    one `InvalidInputError` that names them all and lists those it has."""
    types = kb.concepts.column("types").to_pylist() if name_filter.types is not None else []
    known_types = {value for concept in types for value in concept or ()}
    wanted_types = expand_groups(name_filter.types, known_types) if name_filter.types is not None else None
    problems = []
    for field, wanted, known in (("types", wanted_types, lambda: known_types),
                                 ("sources", name_filter.sources, lambda: _values(kb.names.column("source"))),
                                 ("langs", name_filter.langs, lambda: _values(kb.names.column("lang")))):
        if wanted is not None and (problem := _unknown(field, wanted, known(), kb)):
            problems.append(problem)
    if problems:
        raise InvalidInputError("; ".join(problems))
    keep = np.ones(kb.num_names, dtype=bool)
    for field, column in (("sources", "source"), ("langs", "lang")):
        wanted = getattr(name_filter, field)
        if wanted is not None:
            keep &= pc.is_in(kb.names.column(column), value_set=_array(wanted)).to_numpy(zero_copy_only=False)
    concept_rows = pc.index_in(kb.names.column("concept_id"), value_set=kb.concepts.column("concept_id"))
    wanted_concepts = np.zeros(len(kb), dtype=bool)
    wanted_concepts[concept_rows.to_numpy(zero_copy_only=False)[keep]] = True
    if wanted_types is not None:
        wanted_concepts &= np.array([bool(wanted_types.intersection(concept or ())) for concept in types])
    return _of_concepts(names, wanted_concepts)


def concepts_only(kb: KnowledgeBase, names: NameTable, concept_ids: frozenset[str]) -> AllowedNames:
    """The names of `concept_ids` only: how a filter carries over to a labeled-span index, whose
    names (training mentions) have no source or type of their own."""
    ids = kb.concepts.column("concept_id").to_pylist()
    return _of_concepts(names, np.array([concept in concept_ids for concept in ids], dtype=bool))


def allowed_concepts(kb: KnowledgeBase, names: NameTable, allowed: AllowedNames) -> frozenset[str]:
    """Ids of the concepts `allowed` lets through."""
    ids = kb.concepts.column("concept_id").to_pylist()
    return frozenset(ids[row] for row in np.unique(names.concept_rows[allowed.pairs]))


def _of_concepts(names: NameTable, wanted_concepts: np.ndarray) -> AllowedNames:
    pairs = wanted_concepts[names.concept_rows] if len(names.concept_rows) else np.zeros(0, dtype=bool)
    strings = np.zeros(len(names), dtype=bool)
    strings[np.repeat(np.arange(len(names)), np.diff(names.offsets))[pairs]] = True
    return AllowedNames(strings, pairs)


def _values(column) -> set[str]:
    return {value for value in pc.unique(column).to_pylist() if value is not None}


def _array(values: frozenset[str]):
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())


def _unknown(field: str, wanted: frozenset[str], known: set[str], kb: KnowledgeBase) -> str | None:
    """What of `wanted` the KB lacks, and what it has (a type that is one of its concepts, such as
    an HPO branch, with that concept's name; a semantic group with the group's)."""
    unknown = sorted(wanted - known)
    if not unknown:
        return None
    known = known - {""}  # names given no source or type: no value to ask for
    shown = [f"{value} ({_title(value, kb)})" if value in kb or value in SEMANTIC_GROUPS else value
             for value in sorted(known)[:40]]
    listed = ", ".join(shown) + (f" … ({len(known):,} in all)" if len(known) > 40 else "")
    named = ", ".join(unknown[:MAX_NAMED]) + (f" … ({len(unknown):,} in all)" if len(unknown) > MAX_NAMED else "")
    return f"{field}: {named} not in this bundle's KB (it has: {listed or 'none'})"


def _title(value: str, kb: KnowledgeBase) -> str:
    return kb.preferred_name(value) if value in kb else SEMANTIC_GROUPS[value][0]
