"""Columnar on-disk form of a `KnowledgeBase`: two Parquet files, read memory-mapped."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from babelink.errors import InputFormatError
from babelink.fsutil import read_parquet
from babelink.kb.base import CONCEPT_SCHEMA, NAME_SCHEMA, KnowledgeBase

NAMES_FILE = "names.parquet"
CONCEPTS_FILE = "concepts.parquet"


def save_kb(kb: KnowledgeBase, directory: str | Path) -> list[Path]:
    """Write the KB's tables into `directory` (which the caller makes atomic); return the files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, table in ((NAMES_FILE, kb.names), (CONCEPTS_FILE, kb.concepts)):
        path = directory / file_name
        pq.write_table(table, path, compression="zstd", row_group_size=262_144)
        written.append(path)
    return written


def _read_table(path: Path, schema: pa.Schema) -> pa.Table:
    try:
        table = read_parquet(path)
    except FileNotFoundError:
        raise InputFormatError(path, None, "no such file") from None
    except (OSError, pa.ArrowInvalid) as error:
        raise InputFormatError(path, None, f"not a readable Parquet file: {error}") from None
    missing = set(schema.names) - set(table.column_names)
    if missing:
        raise InputFormatError(path, None, f"missing columns {sorted(missing)}")
    return table


def load_kb(directory: str | Path) -> KnowledgeBase:
    directory = Path(directory)
    return KnowledgeBase(
        _read_table(directory / NAMES_FILE, NAME_SCHEMA),
        _read_table(directory / CONCEPTS_FILE, CONCEPT_SCHEMA),
    )
