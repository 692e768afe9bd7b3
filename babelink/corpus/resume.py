"""Corpus-scale `babelink link` runs that survive being killed: rerunning the same command
skips what an earlier run wrote and carries on.

JSONL to a file is appended one flushed line per document, so after a kill its complete lines
are finished documents and a partial last line is the only damage; brat writes each document's
`.txt` then `.ann` atomically, so an `.ann` that exists is a finished document. Both engines
(local, Ray) produce `Linked` results that the same writers take.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.formats.document import Annotation, Document
from babelink.link.mentions import LinkedDocument

RESUMABLE_FORMATS = ("jsonl", "brat")


@dataclass(frozen=True)
class Linked:
    """One linked document as writers take it: its JSONL record and the text its offsets index
    (a record is what crosses process boundaries: Ray workers return records, not objects)."""

    record: dict
    text: str

    @classmethod
    def of(cls, document: LinkedDocument, candidates: bool = False) -> Linked:
        return cls(document.to_dict(candidates), document.text)

    @property
    def id(self) -> str:
        return self.record["id"]

    def as_document(self, mention_type: str = "Entity") -> Document:
        """The annotated-document form the PubTator, BioC and brat writers take."""
        return Document(self.id, self.text, tuple(
            Annotation(m["start"], m["end"], m["text"], (m["concept"],), mention_type) for m in self.record["mentions"]))


def completed_ids(output: str, output_format: str, overwrite: bool = False) -> set[str]:
    """Ids of the documents an earlier run already wrote to `output` (none for stdout, for
    whole-file formats, or with `overwrite`). Truncates a JSONL output's partial last line."""
    if overwrite or output == "-" or output_format not in RESUMABLE_FORMATS or not Path(output).exists():
        return set()
    return resume_jsonl(Path(output)) if output_format == "jsonl" else brat_ids(Path(output))


def resume_jsonl(path: Path) -> set[str]:
    """The ids of `path`'s complete lines, after cutting off a partial last line (a run killed
    mid-write: whatever follows the last newline, even if it parses, is redone). Reads line by
    line: the output of a corpus need not fit in memory."""
    ids, complete = set(), 0
    with path.open("rb+") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.endswith(b"\n"):
                stream.truncate(complete)
                break
            ids.add(_record_id(line, path, number))
            complete += len(line)
    return ids


def _record_id(line: bytes, path: Path, number: int) -> str:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "mentions" not in record:
        raise InputFormatError(path, number, "not a line of `babelink link` JSONL output: cannot resume "
                                             "into it (give --overwrite to replace the file)")
    return record["id"]


def brat_ids(directory: Path) -> set[str]:
    """Ids of the documents whose `.ann` exists under `directory` (written last, atomically)."""
    return {path.relative_to(directory).with_suffix("").as_posix() for path in directory.rglob("*.ann")}


def append_jsonl(results: Iterable[Linked], path: Path, overwrite: bool = False) -> None:
    """Append one line per result, flushed at once (`overwrite`: replace the file instead). The
    file is opened at the first result, so input that fails before any document is linked
    leaves no file behind; an input without documents still creates it."""
    mode = "w" if overwrite else "a"
    stream = None
    try:
        for result in results:
            if stream is None:
                stream = path.open(mode, encoding="utf-8")
            stream.write(json.dumps(result.record, ensure_ascii=False) + "\n")
            stream.flush()
        if stream is None:
            path.open(mode, encoding="utf-8").close()
    finally:
        if stream is not None:
            stream.close()


def write_brat_each(results: Iterable[Linked], directory: Path) -> None:
    from babelink.formats.brat import write_brat

    for result in results:
        write_brat(result.as_document(), directory)
