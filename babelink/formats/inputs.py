"""What `link` reads: raw text in any of the forms users hold it in, as `Document`s.

A directory: every `.txt` under it is one document (id = path without suffix; brat `.ann`
files beside them are not needed). A file: `.jsonl` lines `{"id": str, "text": str, "lang"?: str}`;
`.xml` / `.json` BioC; a file whose first line is PubTator (`PMID|t|…`) PubTator; anything else
one plain-text document. `-` reads JSONL from stdin. Errors name the file and line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.formats.bioc import read_bioc_json, read_bioc_xml
from babelink.formats.document import Document
from babelink.formats.pubtator import iter_pubtator
from babelink.kb.io import iter_lines, iter_stream_lines

_PUBTATOR_FIRST_LINE = re.compile(rb"[^|\t\r\n]+\|[ta]\|")
_BIOC_READERS = {".xml": read_bioc_xml, ".json": read_bioc_json}


def read_input_documents(path: str | Path) -> Iterator[Document]:
    if str(path) == "-":
        return jsonl_documents(iter_stream_lines(sys.stdin.buffer, "<stdin>"), "<stdin>")
    path = Path(path)
    if path.is_dir():
        return _text_directory(path)
    if not path.is_file():
        raise InputFormatError(path, None, "no such file or directory")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return jsonl_documents(iter_lines(path), path)
    if suffix in _BIOC_READERS:
        return _BIOC_READERS[suffix](path)
    if _PUBTATOR_FIRST_LINE.match(_first_line(path)):
        return iter_pubtator(path)
    return iter([Document(path.stem, read_text_file(path))])


def jsonl_documents(lines: Iterable[tuple[int, str]], name: str | Path) -> Iterator[Document]:
    seen: set[str] = set()
    for number, line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputFormatError(name, number, f"invalid JSON: {error.msg}") from None
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            raise InputFormatError(name, number, 'expected an object with a "text" string (and an "id")')
        doc_id = value.get("id", str(number))
        lang = value.get("lang")
        if not isinstance(doc_id, str | int) or not isinstance(lang, str | None):
            raise InputFormatError(name, number, '"id" must be a string and "lang" a language code')
        if str(doc_id) in seen:
            raise InputFormatError(name, number, f"duplicate document id {doc_id!r}")
        seen.add(str(doc_id))
        yield Document(str(doc_id), value["text"], lang=lang)


def read_text_file(path: Path) -> str:
    """The whole file as UTF-8, line breaks untouched (offsets count `\\r` too)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputFormatError(path, None, f"cannot read: {error.strerror or error}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise InputFormatError(path, line, "invalid UTF-8") from None


def _text_directory(directory: Path) -> Iterator[Document]:
    for path in sorted(directory.rglob("*.txt")):
        yield Document(path.relative_to(directory).with_suffix("").as_posix(), read_text_file(path))


def _first_line(path: Path) -> bytes:
    with path.open("rb") as stream:
        return stream.readline(4096)
