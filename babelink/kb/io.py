"""Streaming line readers shared by every KB and benchmark reader: gzip, UTF-8 checked per line."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from babelink.errors import InputFormatError


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
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            yield from iter_stream_lines(stream, path)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise InputFormatError(path, None, f"cannot read: {error}") from None


def iter_stream_lines(stream: BinaryIO, name: str | Path) -> Iterator[tuple[int, str]]:
    """`iter_lines` over an open binary stream (stdin, a member of a zip); `name` goes into errors."""
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputFormatError(name, number, f"invalid UTF-8 at byte {error.start} of the line") from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield number, line.rstrip("\r\n")
