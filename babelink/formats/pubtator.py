"""PubTator files (NCBI-disease, BC5CDR): `PMID|t|title`, `PMID|a|abstract`, tab-separated annotations.

Offsets count into `title + " " + abstract`. A `Document` keeps that text with a line break in
place of the separating space: offsets are unchanged and the title survives a round trip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from babelink.errors import InputFormatError
from babelink.formats.document import Annotation, Document
from babelink.textio import iter_lines

_TEXT_LINE = re.compile(r"([^|\t]+)\|([ta])\|(.*)")
# Second field of a relation line (`PMID<TAB>CID<TAB>…`); an annotation has a start offset there.
_RELATION_TYPE = re.compile(r"[A-Za-z_]\w*")
_OFFSET = re.compile(r"[0-9]+")
_ID_SEPARATOR = re.compile(r"[|+]")
_NO_ID = "-1"


@dataclass
class _PendingDocument:
    pmid: str
    title: str
    abstract: str | None = None
    annotations: list[Annotation] = field(default_factory=list)

    @property
    def offset_text(self) -> str:
        """The text the file's offsets refer to."""
        return self.title if self.abstract is None else f"{self.title} {self.abstract}"

    def build(self) -> Document:
        text = self.title if self.abstract is None else f"{self.title}\n{self.abstract}"
        return Document(self.pmid, text, tuple(self.annotations))


def iter_pubtator(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a PubTator file one at a time; relation lines are skipped.

    Composite ids (`|` or `+`) become several concept ids; `-1` or no id column gives none;
    stray spaces and `MESH:` prefixes are stripped. An annotation whose text differs from the
    document text at its offsets (spaces around it aside) raises `InputFormatError`, as does any
    unreadable line; the annotation keeps the document's text.
    """
    path = Path(path)
    pending: _PendingDocument | None = None
    for number, line in iter_lines(path):
        if not line.strip():
            if pending is not None:
                yield pending.build()
                pending = None
            continue
        text_line = _TEXT_LINE.fullmatch(line)
        if text_line:
            pmid, kind, content = text_line.groups()
            if kind == "t":
                if pending is not None:
                    yield pending.build()
                pending = _PendingDocument(pmid, content)
            elif pending is None or pending.pmid != pmid or pending.abstract is not None or pending.annotations:
                raise InputFormatError(path, number, f"abstract of {pmid} does not follow its title")
            else:
                pending.abstract = content
            continue
        if "\t" not in line:
            raise InputFormatError(path, number, "neither 'PMID|t|…', 'PMID|a|…' nor a tab-separated annotation")
        fields = line.split("\t")
        if pending is None or fields[0] != pending.pmid:
            raise InputFormatError(path, number, f"line for {fields[0]!r} is outside that document's block")
        if _is_relation(fields):
            continue
        pending.annotations.append(_parse_annotation(fields, pending.offset_text, path, number))
    if pending is not None:
        yield pending.build()


def _is_relation(fields: list[str]) -> bool:
    """`PMID<TAB>CID<TAB>D1<TAB>D2[…]`: a word where an annotation has its start offset, and no
    end offset after it (an annotation whose start is malformed still has one)."""
    return (len(fields) > 1 and _RELATION_TYPE.fullmatch(fields[1]) is not None
            and not (len(fields) >= 5 and _OFFSET.fullmatch(fields[2])))


def _parse_annotation(fields: list[str], text: str, path: Path, number: int) -> Annotation:
    if len(fields) < 5:
        raise InputFormatError(path, number, "expected PMID, start, end, mention, type[, ids]")
    start, end, mention, annotation_type = fields[1:5]
    if not (_OFFSET.fullmatch(start) and _OFFSET.fullmatch(end)):
        raise InputFormatError(path, number, f"offsets {start!r}, {end!r} are not non-negative integers")
    start_offset, end_offset = int(start), int(end)
    if not start_offset <= end_offset <= len(text):
        raise InputFormatError(path, number, f"span {start}-{end} is outside the {len(text)}-character text")
    found = text[start_offset:end_offset]
    if found.strip() != mention.strip():
        raise InputFormatError(path, number, f"mention {mention!r} does not match {found!r} at {start}-{end}")
    ids = fields[5] if len(fields) > 5 else ""
    return Annotation(start_offset, end_offset, found, _split_ids(ids), annotation_type)


def _split_ids(field_value: str) -> tuple[str, ...]:
    ids = (part.strip().removeprefix("MESH:") for part in _ID_SEPARATOR.split(field_value))
    return tuple(dict.fromkeys(concept_id for concept_id in ids if concept_id and concept_id != _NO_ID))


def write_pubtator(documents: Iterable[Document], stream: TextIO) -> None:
    """Write documents as PubTator blocks that `iter_pubtator` reads back.

    The text up to the first line break is the title. Other line breaks and tabs cannot be
    represented and are written as spaces (same length, so offsets hold); mention text is
    taken from the document at the offsets, so a discontinuous mention keeps only its extent.
    """
    for document in documents:
        flat = document.text.replace("\r", " ").replace("\t", " ")
        title, has_abstract, abstract = flat.partition("\n")
        abstract = abstract.replace("\n", " ")
        flat = f"{title} {abstract}" if has_abstract else title
        stream.write(f"{document.id}|t|{title}\n")
        if has_abstract:
            stream.write(f"{document.id}|a|{abstract}\n")
        for annotation in document.annotations:
            ids = "|".join(annotation.concept_ids) or _NO_ID
            mention = flat[annotation.start : annotation.end]
            stream.write(f"{document.id}\t{annotation.start}\t{annotation.end}\t{mention}\t{annotation.type}\t{ids}\n")
        stream.write("\n")
