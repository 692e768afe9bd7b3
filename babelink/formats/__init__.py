"""Annotated-document formats: the readers by file suffix, the writers by format name, and
`read_documents`, which picks the reader from the path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from babelink.errors import BabelinkError
from babelink.formats.bioc import read_bioc_json, read_bioc_xml, write_bioc_json, write_bioc_xml
from babelink.formats.brat import iter_brat
from babelink.formats.document import Document
from babelink.formats.pubtator import iter_pubtator, write_pubtator

#: Single-file readers by suffix; other files are PubTator, directories brat.
READERS_BY_SUFFIX = {".xml": read_bioc_xml, ".json": read_bioc_json}
#: Writers of a whole collection to one text stream, by `--format` name (brat writes a directory per document).
WRITERS = {"pubtator": write_pubtator, "bioc": write_bioc_xml, "bioc-json": write_bioc_json}


def read_documents(path: str | Path) -> Iterator[Document]:
    """A directory is read as brat (`.txt` + `.ann` pairs), a `.xml` or `.json` file as BioC, any other
    file as PubTator."""
    path = Path(path)
    if path.is_dir():
        return iter_brat(path)
    if path.is_file():
        return READERS_BY_SUFFIX.get(path.suffix.lower(), iter_pubtator)(path)
    raise BabelinkError(f"{path}: no such file or directory")
