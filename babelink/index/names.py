"""The searchable name list of a KB: unique normalised strings, each pointing to its concepts.

Every index searches strings, not KB rows: the 240k names of open-umls collapse to fewer
distinct normalised strings, and a hit on a string is expanded to all concepts that carry it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from babelink.fsutil import column_array, read_parquet
from babelink.kb.base import KnowledgeBase
from babelink.text import is_short_capitals, normalize_name

STRINGS_FILE = "strings.parquet"
LINKS_FILE = "string_concepts.npz"


class NameTable:
    """`strings[i]` (normalised) was written `surfaces[i]` in the KB and names
    `concept_rows[offsets[i]:offsets[i + 1]]` (rows of the KB concept table). `capitals_only[i]`
    says the KB writes string i only as a short capitals form (`text.is_short_capitals`): it
    matches only mentions written in capitals."""

    def __init__(self, strings: list[str], surfaces: list[str], offsets: np.ndarray, concept_rows: np.ndarray,
                 capitals_only: np.ndarray):
        self.strings = strings
        self.surfaces = surfaces
        self.offsets = offsets
        self.concept_rows = concept_rows
        self.capitals_only = capitals_only
        self._row_of_string: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.strings)

    @classmethod
    def from_kb(cls, kb: KnowledgeBase) -> NameTable:
        names = kb.names.column("name").to_pylist()
        normalized = pa.array([normalize_name(name) for name in names], pa.string())
        keep = pc.not_equal(normalized, "")
        encoded = pc.dictionary_encode(normalized.filter(keep))
        string_ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        concept_rows = pc.index_in(
            kb.names.column("concept_id").filter(keep), value_set=kb.concepts.column("concept_id")
        )
        concept_rows = concept_rows.to_numpy(zero_copy_only=False).astype(np.int64)
        kept_names = np.asarray(names, dtype=object)[keep.to_numpy(zero_copy_only=False)]
        _, first_row = np.unique(string_ids, return_index=True)
        pairs = np.unique(np.stack([string_ids, concept_rows], axis=1), axis=0)  # one per (string, concept)
        # A string shared by several concepts lists first those it is the preferred name of, then
        # the others in KB order: hits on a shared name rank concepts in this order (31% of the
        # best matches on QUAERO dev are shared names).
        preferred = pc.index_in(
            pa.array([normalize_name(name) for name in kb.concepts.column("preferred_name").to_pylist()], pa.string()),
            value_set=encoded.dictionary,
        )
        preferred = preferred.to_numpy(zero_copy_only=False)
        is_preferred = preferred[pairs[:, 1]] == pairs[:, 0]
        pairs = pairs[np.lexsort((pairs[:, 1], ~is_preferred, pairs[:, 0]))]
        offsets = np.searchsorted(pairs[:, 0], np.arange(len(encoded.dictionary) + 1)).astype(np.int64)
        capitals_only = np.ones(len(encoded.dictionary), dtype=bool)
        np.logical_and.at(capitals_only, string_ids, [is_short_capitals(name) for name in kept_names])
        return cls(
            strings=encoded.dictionary.to_pylist(),
            surfaces=kept_names[first_row].tolist(),
            offsets=offsets,
            concept_rows=pairs[:, 1].astype(np.int32),
            capitals_only=capitals_only,
        )

    def concepts_of(self, string_index: int) -> np.ndarray:
        return self.concept_rows[self.offsets[string_index] : self.offsets[string_index + 1]]

    def lookup(self, normalized: str) -> int | None:
        """Index of an exact normalised string, or None."""
        if self._row_of_string is None:
            self._row_of_string = {string: row for row, string in enumerate(self.strings)}
        return self._row_of_string.get(normalized)

    def save(self, directory: Path) -> list[Path]:
        strings_path, links_path = directory / STRINGS_FILE, directory / LINKS_FILE
        table = pa.table({"string": self.strings, "surface": self.surfaces, "capitals_only": self.capitals_only})
        pq.write_table(table, strings_path, compression="zstd")
        with open(links_path, "wb") as stream:
            np.savez(stream, offsets=self.offsets, concept_rows=self.concept_rows)
        return [strings_path, links_path]

    @classmethod
    def load(cls, directory: Path) -> NameTable:
        table = read_parquet(directory / STRINGS_FILE)
        with np.load(directory / LINKS_FILE) as links:
            offsets, concept_rows = links["offsets"], links["concept_rows"]
        capitals_only = column_array(table, "capitals_only")
        return cls(table.column("string").to_pylist(), table.column("surface").to_pylist(), offsets, concept_rows,
                   capitals_only)
