"""Generic KB files for custom vocabularies: TSV with a header row, or JSON Lines.

TSV columns (header names, any order): `id`, `name`, and optionally `lang`, `source`,
`term_type`, `preferred` (true/false/1/0/yes/no), and `synonyms`, `types`, `xrefs`, `alt_ids`
('|'-separated lists); lines starting with `#` before the header are comments. JSONL lines:
`{"id": …, "name": …}` with the same optional keys, the lists as JSON lists of strings. Names are
kept as hand-typed names are (`clean_name`); an id must be non-empty and hold no control
character (a tab or line break in an id would break every tabular output).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from babelink.errors import InputFormatError, InvalidInputError
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder, clean_name
from babelink.lang import check_language
from babelink.textio import iter_lines, json_line

_ID_ALIASES = ("id", "concept_id", "cui", "code")
_LISTS = ("synonyms", "types", "xrefs", "alt_ids")
_COLUMNS = (*_ID_ALIASES, "name", "lang", "source", "term_type", "preferred", *_LISTS)
#: Unicode categories no id may hold: controls (a tab, a line break) and line or paragraph separators.
_BREAKING = frozenset({"Cc", "Zl", "Zp"})
_TRUE = frozenset({"1", "true", "yes", "y", "t"})
_FALSE = frozenset({"", "0", "false", "no", "n", "f"})


def _flag(value: object, path: Path, number: int) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise InputFormatError(path, number, f"field 'preferred' must be true or false, got {value!r}")


def _concept_id(value: object, path: Path, number: int) -> str:
    concept_id = value.strip() if isinstance(value, str) else ""
    if not concept_id:
        raise InputFormatError(path, number, "the id must be a non-empty string")
    if any(unicodedata.category(char) in _BREAKING for char in concept_id):
        raise InputFormatError(path, number, f"the id {concept_id!r} holds a control character or a line break")
    return concept_id


def _name(value: object, path: Path, number: int) -> str:
    name = clean_name(value) if isinstance(value, str) else ""
    if not name:
        raise InputFormatError(path, number, "the name must be a non-empty string")
    return name


def _add_row(builder: KnowledgeBaseBuilder, row: dict, path: Path, number: int, default_lang: str) -> None:
    """One row of either format, its optional fields already strings (`lang`…) and lists (`_LISTS`)."""
    concept_id, name = _concept_id(row.get("id"), path, number), _name(row.get("name"), path, number)
    lang = _language(row.get("lang") or default_lang, path, number)
    source = row.get("source") or ""
    builder.add_name(concept_id, name, lang=lang, source=source, term_type=row.get("term_type") or "",
                     preferred=_flag(row.get("preferred") or False, path, number))
    builder.add_names(concept_id, [(synonym, "SY") for synonym in row["synonyms"]], lang=lang, source=source,
                      skip=[name])
    builder.add_concept(concept_id, types=row["types"], xrefs=row["xrefs"], alt_ids=row["alt_ids"])


def read_tsv(path: str | Path, *, languages: frozenset[str] | None = None, default_lang: str = "en") -> KnowledgeBase:
    path = Path(path)
    builder = KnowledgeBaseBuilder(languages=languages)
    header: dict[str, int] | None = None
    for number, line in iter_lines(path):
        if not line.strip() or (header is None and line.startswith("#")):
            continue
        cells = line.split("\t")
        if header is None:
            header = _header(cells, path, number)
            continue
        if len(cells) < len(header) or any(cell.strip() for cell in cells[len(header):]):
            raise InputFormatError(path, number, f"expected {len(header)} tab-separated fields, found {len(cells)}")
        row = {column: cells[position].strip() for column, position in header.items()}
        for column in _LISTS:
            row[column] = [part.strip() for part in row.get(column, "").split("|") if part.strip()]
        _add_row(builder, row, path, number, default_lang)
    return builder.build()


def _header(cells: list[str], path: Path, number: int) -> dict[str, int]:
    """Column → position; the id column, under any of its aliases, is `id`."""
    columns = [cell.strip().lower() for cell in cells]
    while columns and not columns[-1]:  # a trailing tab (a spreadsheet's export) names no column
        columns.pop()
    other_format = "(a KB in another format: give --kb-format umls, ctd, obo, jsonl or parquet)"
    repeated = next((column for column in columns if columns.count(column) > 1), None)
    if repeated is not None:
        raise InputFormatError(path, number, f"column {repeated!r} appears more than once in the header {other_format}")
    if "name" not in columns or not any(alias in columns for alias in _ID_ALIASES):
        raise InputFormatError(path, number, f"header must name an 'id' and a 'name' column {other_format}")
    ids = [column for column in columns if column in _ID_ALIASES]
    unknown = [column for column in columns if column not in _COLUMNS]
    if len(ids) > 1 or unknown:
        why = f"two id columns ({', '.join(ids)})" if len(ids) > 1 else f"unknown column {unknown[0]!r}"
        known = ", ".join(("id", *_COLUMNS[len(_ID_ALIASES):]))
        raise InputFormatError(path, number, f"{why}; the columns are {known} (the id also as "
                                             f"{', '.join(_ID_ALIASES[1:])})")
    return {"id" if column in _ID_ALIASES else column: position for position, column in enumerate(columns)}


def _language(code: str, path: Path, number: int) -> str:
    """A row's language in babelink's form; a word or a code of no language names the row: its
    names could be found by no `--lang` or `--langs`."""
    try:
        return check_language(code)
    except InvalidInputError as error:
        raise InputFormatError(path, number, str(error)) from None


def _string(record: dict, key: str, path: Path, number: int) -> str:
    """An optional string field; null is absent."""
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise InputFormatError(path, number, f"field {key!r} must be a string")
    return (value or "").strip()


def _string_list(record: dict, key: str, path: Path, number: int) -> list[str]:
    values = record.get(key) or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise InputFormatError(path, number, f"field {key!r} must be a list of strings")
    return [value.strip() for value in values if value.strip()]


def read_jsonl(path: str | Path, *, languages: frozenset[str] | None = None, default_lang: str = "en") -> KnowledgeBase:
    path = Path(path)
    builder = KnowledgeBaseBuilder(languages=languages)
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        record = json_line(line, path, number)
        if not isinstance(record, dict):
            raise InputFormatError(path, number, "each line must be a JSON object")
        ids = [alias for alias in _ID_ALIASES if record.get(alias) is not None]
        if len(ids) > 1:
            raise InputFormatError(path, number, f"two ids ({', '.join(ids)}): give one")
        row = {"id": record[ids[0]] if ids else None,
               "name": record.get("name"), "preferred": record.get("preferred"),
               **{key: _string(record, key, path, number) for key in ("lang", "source", "term_type")},
               **{key: _string_list(record, key, path, number) for key in _LISTS}}
        _add_row(builder, row, path, number, default_lang)
    return builder.build()
