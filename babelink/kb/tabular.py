"""Generic KB files for custom vocabularies: TSV with a header row, or JSON Lines.

TSV columns (header names, any order): `id`, `name`, and optionally `lang`, `source`,
`term_type`, `preferred` (true/false/1/0/yes/no). JSONL lines: `{"id": …, "name": …}` with the
same optional keys plus `synonyms` (list of strings), `types`, `xrefs`, `alt_ids` (lists).
"""

from __future__ import annotations

from pathlib import Path

from babelink.errors import InputFormatError, InvalidInputError
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.lang import check_language
from babelink.textio import iter_lines, json_line

_ID_ALIASES = ("id", "concept_id", "cui", "code")
_TRUE = frozenset({"1", "true", "yes", "y", "t"})
_FALSE = frozenset({"", "0", "false", "no", "n", "f"})


def _flag(value: object, path: Path, number: int) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise InputFormatError(path, number, f"field 'preferred' must be true or false, got {value!r}")


def read_tsv(path: str | Path, *, languages: frozenset[str] | None = None, default_lang: str = "en") -> KnowledgeBase:
    path = Path(path)
    builder = KnowledgeBaseBuilder(languages=languages)
    header: dict[str, int] | None = None
    for number, line in iter_lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            columns = [cell.strip().lower() for cell in cells]
            repeated = next((column for column in columns if columns.count(column) > 1), None)
            if repeated is not None:
                raise InputFormatError(path, number, f"column {repeated!r} appears more than once in the header")
            header = {column: position for position, column in enumerate(columns)}
            id_column = next((alias for alias in _ID_ALIASES if alias in header), None)
            if id_column is None or "name" not in header:
                raise InputFormatError(path, number, "header must name an 'id' and a 'name' column (a KB in another "
                                                     "format: give --kb-format umls, ctd, obo, jsonl or parquet)")
            continue
        if len(cells) < len(header) or any(cell.strip() for cell in cells[len(header):]):
            raise InputFormatError(path, number, f"expected {len(header)} tab-separated fields, found {len(cells)}")
        row = {column: cells[position].strip() for column, position in header.items()}
        concept_id, name = row[id_column], row["name"]
        if not concept_id or not name:
            raise InputFormatError(path, number, "empty id or name")
        builder.add_name(
            concept_id,
            name,
            lang=_language(row.get("lang") or default_lang, path, number),
            source=row.get("source", ""),
            term_type=row.get("term_type", ""),
            preferred=_flag(row.get("preferred", ""), path, number),
        )
    return builder.build()


def _language(code: str, path: Path, number: int) -> str:
    """A row's language in babelink's form; a word or a code of no language names the row: its
    names could be found by no `--lang` or `--langs`."""
    try:
        return check_language(code)
    except InvalidInputError as error:
        raise InputFormatError(path, number, str(error)) from None


def _string_list(record: dict, key: str, path: Path, number: int) -> list[str]:
    values = record.get(key) or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise InputFormatError(path, number, f"field {key!r} must be a list of strings")
    return values


def read_jsonl(path: str | Path, *, languages: frozenset[str] | None = None, default_lang: str = "en") -> KnowledgeBase:
    path = Path(path)
    builder = KnowledgeBaseBuilder(languages=languages)
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        record = json_line(line, path, number)
        if not isinstance(record, dict):
            raise InputFormatError(path, number, "each line must be a JSON object")
        concept_id = next((record[alias] for alias in _ID_ALIASES if alias in record), None)
        name = record.get("name")
        if not isinstance(concept_id, str) or not concept_id or not isinstance(name, str) or not name:
            raise InputFormatError(path, number, "fields 'id' and 'name' must be non-empty strings")
        lang = _language(str(record.get("lang") or default_lang), path, number)
        source = str(record.get("source", ""))
        builder.add_name(
            concept_id,
            name,
            lang=lang,
            source=source,
            term_type=str(record.get("term_type", "")),
            preferred=_flag(record.get("preferred", False), path, number),
        )
        for synonym in _string_list(record, "synonyms", path, number):
            builder.add_name(concept_id, synonym, lang=lang, source=source, term_type="SY")
        builder.add_concept(
            concept_id,
            types=_string_list(record, "types", path, number),
            xrefs=_string_list(record, "xrefs", path, number),
            alt_ids=_string_list(record, "alt_ids", path, number),
        )
    return builder.build()
