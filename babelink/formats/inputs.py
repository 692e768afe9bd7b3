"""What `link` and `normalize` read: raw text in any of the forms users hold it in, as `Document`s, and mentions.

A directory: every `.txt` under it is one document (id = path without suffix; brat `.ann`
files beside them are not needed). A file: `.jsonl` (or `.jsonl.gz`) lines `{"id": str, "text": str, "lang"?: str}`;
`.xml` / `.json` BioC; a `.pubtator` file, or one whose first line is PubTator (`PMID|t|…`),
PubTator (errors naming its line where it is not); anything else one plain-text document. `-`
reads JSONL from stdin. Errors name the file and line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from babelink.abbreviations import abbreviation_map, expand_abbreviations
from babelink.errors import InputFormatError
from babelink.formats import READERS_BY_SUFFIX
from babelink.formats.document import Document
from babelink.formats.pubtator import iter_pubtator
from babelink.textio import format_suffix, is_gzipped, iter_lines, iter_stream_lines, json_line, read_text_file

_PUBTATOR_FIRST_LINE = re.compile(rb"[^|\t\r\n]+\|[ta]\|")


def read_input_documents(path: str | Path, lang: str | None = None) -> Iterator[Document]:
    """The documents at `path`; `lang`, when given, is every document's language, whatever the file says."""
    documents = _documents_at(path)
    return (replace(document, lang=lang) for document in documents) if lang else documents


def _documents_at(path: str | Path) -> Iterator[Document]:
    if str(path) == "-":
        return jsonl_documents(iter_stream_lines(sys.stdin.buffer, "<stdin>"), "<stdin>")
    path = Path(path)
    if path.is_dir():
        return _text_directory(path)
    if not path.is_file():
        raise InputFormatError(path, None, "no such file or directory")
    suffix = format_suffix(path)
    if suffix == ".jsonl":
        return jsonl_documents(iter_lines(path), path)
    if is_gzipped(path):
        raise InputFormatError(path, None, "a gzip-compressed input is read as JSONL only (name it .jsonl.gz): "
                                           "decompress it first")
    if suffix in READERS_BY_SUFFIX:
        return READERS_BY_SUFFIX[suffix](path)
    if suffix == ".pubtator" or _PUBTATOR_FIRST_LINE.match(_first_line(path)):  # one named so is read as such
        return iter_pubtator(path)
    return iter([Document(path.stem, read_text_file(path), source=str(path))])


def jsonl_documents(lines: Iterable[tuple[int, str]], name: str | Path) -> Iterator[Document]:
    seen: set[str] = set()
    for number, line in lines:
        if not line.strip():
            continue
        value = json_line(line, name, number)
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            raise InputFormatError(name, number, 'expected an object with a "text" string (and an "id")')
        doc_id, lang = value.get("id", str(number)), value.get("lang")
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
            raise InputFormatError(name, number, f'"id" must be a string (or a number), got {doc_id!r}')
        if not isinstance(lang, str | None):
            raise InputFormatError(name, number, f'"lang" must be a language code such as "es", got {lang!r}')
        if str(doc_id) in seen:
            given = "" if "id" in value else " (a line without an \"id\" takes its line number as id)"
            raise InputFormatError(name, number, f"duplicate document id {str(doc_id)!r}{given}")
        seen.add(str(doc_id))
        yield Document(str(doc_id), value["text"], lang=lang, source=f"{name}:{number}")


def read_mentions(path: str) -> Iterator[tuple[int, str, str]]:
    """What `normalize --input` reads: `(line number, mention, text to search)` per line. `.jsonl`
    lines (the suffix in any case, gzipped as `.jsonl.gz` too) are a JSON string or `{"mention": …,
    "context"?: …}`, where a short form the context defines is searched as its long form; `.tsv`
    uses column 1; other files hold one mention per line; `-` is stdin, one mention per line."""
    name = "<stdin>" if path == "-" else path
    lines = iter_stream_lines(sys.stdin.buffer, name) if path == "-" else iter_lines(path)
    suffix = "" if path == "-" else format_suffix(path)
    for number, line in lines:
        context = None
        if suffix == ".jsonl":
            value = json_line(line, name, number)
            line, context = (value.get("mention"), value.get("context")) if isinstance(value, dict) else (value, None)
            if not isinstance(line, str) or not isinstance(context, str | None):
                raise InputFormatError(name, number, 'expected a JSON string or an object with a "mention" string '
                                                     'and an optional "context" string')
        elif suffix == ".tsv":
            line = line.split("\t", 1)[0]
        yield number, line, expand_abbreviations(line, abbreviation_map(context)) if context else line


def _text_directory(directory: Path) -> Iterator[Document]:
    for path in sorted(directory.rglob("*.txt")):
        yield Document(path.relative_to(directory).with_suffix("").as_posix(), read_text_file(path), source=str(path))


def _first_line(path: Path) -> bytes:
    """The first line that is not blank (PubTator files often open with one), up to 4 KiB."""
    with path.open("rb") as stream:
        while (line := stream.readline(4096)) and not line.strip():
            pass
        return line
