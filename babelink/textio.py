"""Streaming line readers shared by every KB, document and mention reader: gzip, UTF-8 checked per line,
JSON lines parsed with the file and line in the error."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from babelink.errors import InputFormatError


def is_gzipped(path: str | Path) -> bool:
    """Whether `path` is named as a gzip file (`.gz`, any case), which `iter_lines` reads through."""
    return Path(path).suffix.lower() == ".gz"


def format_suffix(path: str | Path) -> str:
    """The suffix that names a file's format, lower-cased, behind a `.gz` (`is_gzipped`): ".jsonl"
    for `m.JSONL` and `m.jsonl.gz`."""
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    if is_gzipped(path):
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its newline); never holds the whole file.

    A missing file, a directory, or bytes that are not UTF-8 raise `InputFormatError`
    naming the file (and the line, for decoding errors).
    """
    path = Path(path)
    if not path.exists():
        raise InputFormatError(path, None, "no such file")
    if path.is_dir():
        raise InputFormatError(path, None, "is a directory, expected a file")
    opener = gzip.open if is_gzipped(path) else open
    try:
        with opener(path, "rb") as stream:
            yield from iter_stream_lines(stream, path)
    except (OSError, EOFError, zlib.error) as error:  # a gzip's header, end or compressed data
        raise InputFormatError(path, None, f"cannot read: {error}") from None


#: Longest line read: KB rows and annotation lines are kilobytes, a whole abstract or article a few
#: hundred; a longer line is a wrong file or a missing line break, and is refused before it fills memory.
MAX_LINE_BYTES = 16 * 1024 * 1024


def iter_stream_lines(stream: BinaryIO, name: str | Path) -> Iterator[tuple[int, str]]:
    """`iter_lines` over an open binary stream (stdin, a member of a zip); `name` goes into errors."""
    number = 0
    while raw := stream.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise InputFormatError(name, number, f"line longer than {MAX_LINE_BYTES // 2**20} MiB: not a text file "
                                                 "of this format, or its line breaks are missing")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputFormatError(name, number, f"invalid UTF-8 at byte {error.start} of the line") from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield number, line.rstrip("\r\n")


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


def json_line(line: str, name: str | Path, number: int) -> object:
    """The JSON value of one line of a JSONL file; invalid JSON names the file and line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise InputFormatError(name, number, f"invalid JSON: {error.msg}") from None
