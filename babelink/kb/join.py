"""One concept per real-world concept: joining the concepts of several vocabularies in one KB.

A KB assembled from several sources (the embedded default: HPO, ICD-10, MeSH, drugs) lists one
disease once per source, so top-k shows *Hypertension* twice. `join_concepts` merges concepts
linked by evidence the vocabularies themselves carry:

- **cross-references** (`crosswalk_links`): a concept's xref names another concept of the KB
  (HPO's `ICD-10:Q21.1` → `ICD10:Q21.1`), or two concepts share a foreign code (`UMLS:C…`);
- **one-to-one names** (`one_to_one_name_links`): a concept's label equals, once normalised
  (`text.normalize_name`: case, Unicode forms, punctuation), the label or
  an exact synonym of exactly one concept of another vocabulary, and nothing else of either
  vocabulary carries that string (HPO's EXACT synonym "Cardiomyopathy, Hypertrophic" is MeSH's heading).

A join never puts two concepts of one vocabulary together: the vocabulary keeps them apart, so
a link that would (HP:0001631 and HP:0001655 both cite ICD-10 Q21.1) is refused and counted as a
conflict. Links apply in the order given, so the strongest evidence is applied first; cycles
are harmless. The joined concept keeps the ID of its first member in the KB's concept order;
the others become its alternative IDs (so they still resolve) and cross-references (so they
show in `codes`), and every name keeps its row, source and language (so `--sources` filters
still see them).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name

#: Spellings of one vocabulary in IDs and xrefs, after upper-casing and dropping `-`, `_` and spaces.
VOCABULARY_ALIASES = {"MSH": "MESH", "HPO": "HP"}


@dataclass(frozen=True)
class Link:
    """Evidence that two concept IDs denote one concept, and what kind (`crosswalk`, `name`)."""

    first: str
    second: str
    evidence: str


@dataclass(frozen=True)
class JoinReport:
    concepts_before: int
    concepts_after: int
    joined_by: dict[str, int]  # evidence → links that merged two groups
    conflicts: dict[str, int]  # evidence → links refused: they would join two concepts of one vocabulary
    largest_group: int

    @property
    def concepts_joined(self) -> int:
        return self.concepts_before - self.concepts_after


def vocabulary_of(code: str) -> str:
    """The canonical vocabulary of a prefixed code (`ICD-10:Q21.1` → ICD10, `MSH:D006973` → MESH;
    an unprefixed id → ID)."""
    prefix, separator, _ = code.partition(":")
    if not separator:
        return "ID"
    canonical = re.sub(r"[-_ ]", "", prefix).upper()
    return VOCABULARY_ALIASES.get(canonical, canonical)


def _code_key(code: str) -> tuple[str, str]:
    return vocabulary_of(code), code.partition(":")[2].strip()


def crosswalk_links(kb: KnowledgeBase) -> list[Link]:
    """Links from cross-references: an xref that is another concept's ID, first (direct), then two
    concepts sharing a foreign code. Sorted, so a join does not depend on reading order."""
    ids = kb.concepts.column("concept_id").to_pylist()
    concept_of_key = {_code_key(concept_id): concept_id for concept_id in ids if ":" in concept_id}
    direct: set[tuple[str, str]] = set()
    sharing: dict[tuple[str, str], list[str]] = defaultdict(list)
    for concept_id, xrefs in zip(ids, kb.concepts.column("xrefs").to_pylist()):
        for xref in xrefs or ():
            key = _code_key(xref)
            target = concept_of_key.get(key)
            if target is not None and target != concept_id:
                direct.add((concept_id, target))
            elif target is None and key[1]:
                sharing[key].append(concept_id)
    links = [Link(first, second, "crosswalk") for first, second in sorted(direct)]
    for _, holders in sorted(sharing.items()):
        links.extend(Link(holders[0], other, "crosswalk") for other in holders[1:])
    return links


def one_to_one_name_links(
    kb: KnowledgeBase, vocabularies: Iterable[str], exact_term_types: Iterable[str] = ("PT", "SY")
) -> list[Link]:
    """Links between a concept's preferred name and the one concept of another vocabulary carrying
    that string as a name of a term type in `exact_term_types`, among concepts of `vocabularies`
    only (a drug list's names are too loose to join on); a string that two concepts of one
    vocabulary carry links nothing."""
    wanted = {vocabulary_of(f"{vocabulary}:") for vocabulary in vocabularies}
    carriers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    names = kb.names.filter(pc.is_in(kb.names.column("term_type"), value_set=pa.array(list(exact_term_types))))
    for concept_id, name in zip(names.column("concept_id").to_pylist(), names.column("name").to_pylist()):
        if (vocabulary := vocabulary_of(concept_id)) in wanted and (key := normalize_name(name)):
            carriers[key][vocabulary].add(concept_id)
    links: set[tuple[str, str]] = set()
    for concept_id, preferred in zip(kb.concepts.column("concept_id").to_pylist(),
                                     kb.concepts.column("preferred_name").to_pylist()):
        by_vocabulary = carriers.get(normalize_name(preferred), {})
        own = vocabulary_of(concept_id)
        if by_vocabulary.get(own) != {concept_id}:
            continue
        for vocabulary, holders in by_vocabulary.items():
            if vocabulary != own and len(holders) == 1:
                links.add(tuple(sorted((concept_id, next(iter(holders))))))
    return [Link(first, second, "name") for first, second in sorted(links)]


class _Groups:
    """Union-find over concept IDs that keeps at most one concept per vocabulary in a group."""

    def __init__(self, ids: Sequence[str]):
        self.order = {concept_id: row for row, concept_id in enumerate(ids)}
        self.parent = {concept_id: concept_id for concept_id in ids}
        self.vocabularies = {concept_id: {vocabulary_of(concept_id)} for concept_id in ids}

    def root(self, concept_id: str) -> str:
        while self.parent[concept_id] != concept_id:
            self.parent[concept_id] = self.parent[self.parent[concept_id]]
            concept_id = self.parent[concept_id]
        return concept_id

    def join(self, first: str, second: str) -> bool | None:
        """True when two groups merged, None when already one, False when refused (a conflict)."""
        a, b = self.root(first), self.root(second)
        if a == b:
            return None
        if self.vocabularies[a] & self.vocabularies[b]:
            return False
        keep, absorbed = (a, b) if self.order[a] < self.order[b] else (b, a)
        self.parent[absorbed] = keep
        self.vocabularies[keep] |= self.vocabularies.pop(absorbed)
        return True


def join_concepts(kb: KnowledgeBase, links: Iterable[Link]) -> tuple[KnowledgeBase, JoinReport]:
    """`kb` with the concepts `links` connect merged (see the module docstring), and what was done."""
    ids = kb.concepts.column("concept_id").to_pylist()
    groups = _Groups(ids)
    joined_by: dict[str, int] = defaultdict(int)
    conflicts: dict[str, int] = defaultdict(int)
    for link in links:
        if link.first not in groups.parent or link.second not in groups.parent:
            continue
        outcome = groups.join(link.first, link.second)
        if outcome is not None:
            (joined_by if outcome else conflicts)[link.evidence] += 1
    root_of = {concept_id: groups.root(concept_id) for concept_id in ids}
    members: dict[str, list[int]] = defaultdict(list)
    for row, concept_id in enumerate(ids):
        members[root_of[concept_id]].append(row)
    columns = kb.concepts.to_pydict()
    merged: dict[str, list] = {field: [] for field in columns}
    for root, rows in members.items():
        first = rows[0]
        merged["concept_id"].append(root)
        merged["preferred_name"].append(columns["preferred_name"][first])
        others = [columns["concept_id"][row] for row in rows[1:]]
        member_codes = {_code_key(member) for member in others}
        xrefs = [xref for row in rows for xref in columns["xrefs"][row] or () if _code_key(xref) not in member_codes]
        merged["types"].append(list(dict.fromkeys(value for row in rows for value in columns["types"][row] or ())))
        merged["xrefs"].append(list(dict.fromkeys(xrefs + others)))
        merged["alt_ids"].append(list(dict.fromkeys(
            [value for row in rows for value in columns["alt_ids"][row] or ()] + others)))
    names = kb.names.set_column(
        kb.names.schema.get_field_index("concept_id"), "concept_id",
        pa.array([root_of[concept_id] for concept_id in kb.names.column("concept_id").to_pylist()], pa.string()),
    )
    joined = KnowledgeBase(names, pa.table(merged, schema=kb.concepts.schema))
    report = JoinReport(len(ids), len(members), dict(joined_by), dict(conflicts),
                        max((len(rows) for rows in members.values()), default=0))
    return joined, report
