"""Exceptions raised by babelink: each names the file, line or field at fault."""

from __future__ import annotations

from pathlib import Path


class BabelinkError(Exception):
    """Base class; the CLI prints its message on one line and exits non-zero."""


class InputFormatError(BabelinkError):
    """A row of an input file (KB, benchmark, mentions) cannot be read."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class BundleError(BabelinkError):
    """A bundle directory is missing, incomplete, or does not match its manifest."""


class InvalidInputError(BabelinkError, ValueError):
    """An argument given to the API is unusable (empty mention, oversize text, …)."""
