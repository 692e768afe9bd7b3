"""The one table every reader produces and everything downstream reads.

A `KnowledgeBase` is two Arrow tables: *names* (one row per concept name, with language,
source and term type) and *concepts* (one row per concept: preferred name, semantic types,
cross-references, alternative IDs that resolve to it).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

NAME_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("name", pa.string()),
        ("lang", pa.string()),
        ("source", pa.string()),
        ("term_type", pa.string()),
        ("preferred", pa.bool_()),
    ]
)
CONCEPT_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("preferred_name", pa.string()),
        ("types", pa.list_(pa.string())),
        ("xrefs", pa.list_(pa.string())),
        ("alt_ids", pa.list_(pa.string())),
    ]
)


class KnowledgeBase:
    """Concepts and their names, held as Arrow tables (columnar, memory-mappable)."""

    def __init__(self, names: pa.Table, concepts: pa.Table):
        self.names = names.select(NAME_SCHEMA.names).cast(NAME_SCHEMA)
        self.concepts = concepts.select(CONCEPT_SCHEMA.names).cast(CONCEPT_SCHEMA)

    def __len__(self) -> int:
        return self.concepts.num_rows

    def __repr__(self) -> str:
        return f"KnowledgeBase({len(self):,} concepts, {self.names.num_rows:,} names)"

    @property
    def num_names(self) -> int:
        return self.names.num_rows

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return {concept_id: row for row, concept_id in enumerate(self.concepts.column("concept_id").to_pylist())}

    @cached_property
    def _primary_of_alt(self) -> dict[str, str]:
        primary_of: dict[str, str] = {}
        ids = self.concepts.column("concept_id").to_pylist()
        for concept_id, alt_ids in zip(ids, self.concepts.column("alt_ids").to_pylist()):
            for alt_id in alt_ids or ():
                primary_of.setdefault(alt_id, concept_id)
        return primary_of

    @cached_property
    def _preferred_names(self) -> list[str]:
        return self.concepts.column("preferred_name").to_pylist()

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self._row_of

    def preferred_name(self, concept_id: str) -> str:
        return self._preferred_names[self._row_of[concept_id]]

    def resolve(self, concept_id: str) -> str | None:
        """The KB's primary ID for `concept_id` (itself, or the concept listing it as an alternative)."""
        if concept_id in self._row_of:
            return concept_id
        return self._primary_of_alt.get(concept_id)

    def languages(self) -> dict[str, int]:
        """Names per language code."""
        counts = pc.value_counts(self.names.column("lang")).to_pylist()
        return {item["values"]: item["counts"] for item in sorted(counts, key=lambda item: -item["counts"])}

    def select_languages(self, languages: frozenset[str], preferred_lang: str = "en") -> KnowledgeBase:
        """A KB with only the names in `languages`, and only the concepts that keep a name; a
        concept whose preferred name is gone takes the best it keeps, as `KnowledgeBaseBuilder`
        would have chosen reading those languages only."""
        names = self.names.filter(pc.is_in(self.names.column("lang"), value_set=pa.array(sorted(languages))))
        named = pc.is_in(self.concepts.column("concept_id"), value_set=pc.unique(names.column("concept_id")))
        return KnowledgeBase(names, _preferred_among(self.concepts.filter(named), names, preferred_lang))

    def select_concepts(self, concept_ids: Iterable[str]) -> KnowledgeBase:
        """A KB with only these concepts (and their names)."""
        value_set = pa.array(sorted(set(concept_ids)), pa.string())
        return KnowledgeBase(
            self.names.filter(pc.is_in(self.names.column("concept_id"), value_set=value_set)),
            self.concepts.filter(pc.is_in(self.concepts.column("concept_id"), value_set=value_set)),
        )

    def content_hash(self) -> str:
        """SHA-256 over the tables' contents, independent of how they were stored (computed once:
        the tables never change, and a build asks for it more than once)."""
        return self._content_hash

    @cached_property
    def _content_hash(self) -> str:
        digest = hashlib.sha256()
        for table in (self.names, self.concepts):
            for batch in table.to_batches(max_chunksize=65536):
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, batch.schema) as writer:
                    writer.write_batch(batch)
                digest.update(sink.getvalue())
        return digest.hexdigest()


def _name_rank(preferred: bool, lang: str, preferred_lang: str) -> int:
    """How fit a name is to be its concept's preferred name, lowest best (`KnowledgeBaseBuilder`)."""
    return (0 if preferred else 2) + (0 if lang == preferred_lang else 1) + 1


def _preferred_among(concepts: pa.Table, names: pa.Table, preferred_lang: str) -> pa.Table:
    """`concepts` with each preferred name that is none of the concept's `names` replaced by the
    best of those (`_name_rank`, the first at equal rank)."""
    ids, preferred = concepts.column("concept_id").to_pylist(), concepts.column("preferred_name").to_pylist()
    rows = list(zip(*(names.column(field).to_pylist() for field in ("concept_id", "name", "lang", "preferred"))))
    kept = {(concept_id, name) for concept_id, name, _, _ in rows}
    stale = {concept_id for concept_id, name in zip(ids, preferred) if (concept_id, name) not in kept}
    if not stale:
        return concepts
    best: dict[str, tuple[int, str]] = {}
    for concept_id, name, lang, flagged in rows:
        if concept_id in stale:
            rank = _name_rank(flagged, lang, preferred_lang)
            if concept_id not in best or rank < best[concept_id][0]:
                best[concept_id] = (rank, name)
    chosen = [best[concept_id][1] if concept_id in stale else name for concept_id, name in zip(ids, preferred)]
    return concepts.set_column(concepts.schema.get_field_index("preferred_name"), "preferred_name",
                               pa.array(chosen, pa.string()))


def clean_name(name: str) -> str:
    """A hand-typed name as a KB keeps it: NFC, every run of whitespace (tabs, line breaks) one space."""
    return unicodedata.normalize("NFC", " ".join(name.split()))


class KnowledgeBaseBuilder:
    """Collects names and concept metadata from a reader and builds a `KnowledgeBase`.

    The preferred name of a concept is, in order: the one given to `add_concept`, the first
    name flagged preferred in `preferred_lang`, the first name flagged preferred, the first
    name in `preferred_lang`, the first name. With `languages` set, names in other languages
    are skipped; concepts left without any name are dropped at `build`.
    """

    _CHUNK_ROWS = 262_144

    def __init__(self, *, languages: frozenset[str] | None = None, preferred_lang: str = "en"):
        self.languages = languages
        self.preferred_lang = preferred_lang
        self._columns: dict[str, list] = {field: [] for field in NAME_SCHEMA.names}
        self._batches: list[pa.RecordBatch] = []
        self._concepts: dict[str, dict] = {}

    def _concept(self, concept_id: str) -> dict:
        concept = self._concepts.get(concept_id)
        if concept is None:
            concept = self._concepts[concept_id] = {
                "rank": 5, "named": False, "preferred_name": "", "types": [], "xrefs": [], "alt_ids": []
            }
        return concept

    def add_name(
        self,
        concept_id: str,
        name: str,
        *,
        lang: str = "en",
        source: str = "",
        term_type: str = "",
        preferred: bool = False,
    ) -> None:
        if self.languages is not None and lang not in self.languages:
            return
        columns = self._columns
        columns["concept_id"].append(concept_id)
        columns["name"].append(name)
        columns["lang"].append(lang)
        columns["source"].append(source)
        columns["term_type"].append(term_type)
        columns["preferred"].append(preferred)
        concept = self._concept(concept_id)
        concept["named"] = True
        rank = _name_rank(preferred, lang, self.preferred_lang)
        if rank < concept["rank"]:
            concept["rank"], concept["preferred_name"] = rank, name
        if len(columns["name"]) >= self._CHUNK_ROWS:
            self._flush()

    def add_names(
        self,
        concept_id: str,
        names: Iterable[tuple[str, str]],
        *,
        lang: str,
        source: str,
        skip: Iterable[str] = (),
    ) -> None:
        """Add (name, term type) pairs, `PT` ones as preferred, cleaned for vocabularies whose
        names are hand-typed: NFC, whitespace collapsed, empty names and case-insensitive repeats
        (also of `skip`, names another source already gave the concept) left out."""
        seen = {name.casefold() for name in skip}
        for name, term_type in names:
            name = clean_name(name)
            if name and name.casefold() not in seen:
                seen.add(name.casefold())
                self.add_name(
                    concept_id, name, lang=lang, source=source, term_type=term_type, preferred=term_type == "PT"
                )

    def add_concept(
        self,
        concept_id: str,
        *,
        preferred_name: str | None = None,
        types: Iterable[str] = (),
        xrefs: Iterable[str] = (),
        alt_ids: Iterable[str] = (),
    ) -> None:
        """Attach metadata to a concept; repeated calls accumulate types, xrefs and alt IDs."""
        concept = self._concept(concept_id)
        if preferred_name:
            concept["rank"], concept["preferred_name"] = 0, preferred_name
        for field, values in (("types", types), ("xrefs", xrefs), ("alt_ids", alt_ids)):
            for value in values:
                if value not in concept[field]:
                    concept[field].append(value)

    def _flush(self) -> None:
        if self._columns["name"]:
            self._batches.append(pa.RecordBatch.from_pydict(self._columns, schema=NAME_SCHEMA))
            self._columns = {field: [] for field in NAME_SCHEMA.names}

    def build(self) -> KnowledgeBase:
        self._flush()
        names = pa.Table.from_batches(self._batches, schema=NAME_SCHEMA)
        named = {concept_id: c for concept_id, c in self._concepts.items() if c["named"]}
        concepts = pa.Table.from_pydict(
            {
                "concept_id": list(named),
                "preferred_name": [c["preferred_name"] for c in named.values()],
                "types": [c["types"] for c in named.values()],
                "xrefs": [c["xrefs"] for c in named.values()],
                "alt_ids": [c["alt_ids"] for c in named.values()],
            },
            schema=CONCEPT_SCHEMA,
        )
        return KnowledgeBase(names, concepts)
