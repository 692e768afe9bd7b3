"""Corpus-scale `babelink link` runs that survive being killed: rerunning the same command
skips what an earlier run wrote and carries on.

JSONL to a file is appended one flushed line per document, so after a kill its complete lines
are finished documents and a partial last line is the only damage; brat writes each document's
`.txt` then `.ann` atomically, so an `.ann` that exists is a finished document. Both engines
(local, Ray) yield `LinkedDocument`s that the same writers take (`write_linked`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from babelink.errors import InputFormatError
from babelink.eval.linking import BRAT_PROVENANCE, brat_provenance
from babelink.formats import WRITERS
from babelink.formats.document import Document
from babelink.fsutil import atomic_output, is_stream, write_text_atomic
from babelink.link.mentions import LinkedDocument
from babelink.link.settings import SETTINGS_KEY

RESUMABLE_FORMATS = ("jsonl", "brat")


def completed_ids(output: str, output_format: str, overwrite: bool = False, provenance: dict | None = None) -> set[str]:
    """Ids of the documents an earlier run already wrote to `output` (none for stdout, a pipe or
    device, for whole-file formats, or with `overwrite`). Truncates a JSONL output's partial last
    line. With this run's `provenance` (`Linker.provenance`), a JSONL record or brat directory
    linked by another bundle or with other settings is an error: resuming would mix two runs'
    answers in one output."""
    if overwrite or output == "-" or output_format not in RESUMABLE_FORMATS:
        return set()
    if is_stream(output) or not Path(output).exists():
        return set()
    return resume_jsonl(Path(output), provenance) if output_format == "jsonl" else brat_ids(Path(output), provenance)


def resume_jsonl(path: Path, provenance: dict | None = None) -> set[str]:
    """The ids of `path`'s complete lines (linked documents, and those that could not be), after
    cutting off a partial last line (a run killed mid-write: whatever follows the last newline,
    even if it parses, is redone); records another run than `provenance`'s linked are refused
    (`_mixed`). Reads line by line: the output of a corpus need not fit in memory."""
    ids, complete = set(), 0
    with path.open("rb+") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.endswith(b"\n"):
                stream.truncate(complete)
                break
            ids.add(_record_id(line, path, number, provenance))
            complete += len(line)
    return ids


def _record_id(line: bytes, path: Path, number: int, provenance: dict | None) -> str:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        record = None
    linked = isinstance(record, dict) and ("mentions" in record or "error" in record)  # linked, or could not be
    if not linked or not isinstance(record.get("id"), str):
        raise InputFormatError(path, number, "not a line of `babelink link` JSONL output: cannot resume "
                                             "into it (give --overwrite to replace the file)")
    mixed = _mixed(record.get("provenance"), provenance)
    if mixed is not None:
        raise InputFormatError(path, number, mixed)
    return record["id"]


def _mixed(linked_by: object, provenance: dict | None) -> str | None:
    """Why output linked as `linked_by` says cannot take this run's answers (`provenance`), if it
    cannot: another bundle, or other settings (`link.settings`). Output that does not say how it
    was linked (written before babelink recorded it) is taken as it is."""
    if provenance is None or not isinstance(linked_by, dict):
        return None
    settings_differ = (" (--min-probability, --keep-modifiers, --types, --sources, --langs, --ner, --filter or "
                       "--model differ)")
    for key, what, differs in (("bundle", "bundle", ""), (SETTINGS_KEY, "settings", settings_differ)):
        if linked_by.get(key) is not None and linked_by.get(key) != provenance.get(key):
            return (f"linked with {what} {linked_by[key]}, and this run links with {what} {provenance.get(key)}"
                    f"{differs}: resuming would mix the two in one output (give --overwrite to start over, or "
                    "another --output)")
    return None


def brat_ids(directory: Path, provenance: dict | None = None) -> set[str]:
    """Ids of the documents whose `.ann` exists under `directory` (written last, atomically); a
    directory another run than `provenance`'s linked (`BRAT_PROVENANCE`) is refused."""
    ids = {path.relative_to(directory).with_suffix("").as_posix() for path in directory.rglob("*.ann")}
    mixed = _mixed(brat_provenance(directory), provenance) if ids else None
    if mixed is not None:
        raise InputFormatError(directory / BRAT_PROVENANCE, None, mixed)
    return ids


def append_jsonl(results: Iterable[LinkedDocument], path: Path, overwrite: bool = False,
                 candidates: bool = False) -> None:
    """Append one line per result, flushed at once (`overwrite`: replace the file instead). The
    file is opened at the first result, so input that fails before any document is linked
    leaves no file behind; an input without documents still creates it."""
    mode = "w" if overwrite else "a"
    stream = None
    try:
        for result in results:
            if stream is None:
                stream = path.open(mode, encoding="utf-8")
            write_jsonl_line(result, stream, candidates)
        if stream is None:
            path.open(mode, encoding="utf-8").close()
    finally:
        if stream is not None:
            stream.close()


def write_jsonl_line(result: LinkedDocument, stream: TextIO, candidates: bool) -> None:
    """One document's `babelink link` JSONL line, flushed: a kill loses at most this line."""
    stream.write(json.dumps(result.to_dict(candidates), ensure_ascii=False) + "\n")
    stream.flush()


def write_brat_each(results: Iterable[LinkedDocument], directory: Path) -> None:
    """Each document's `.txt` and `.ann`; with the first, `BRAT_PROVENANCE`, the bundle that links
    them, unless the directory holds documents linked without one (which bundle linked those is
    unknown: naming this one would vouch for them)."""
    from babelink.formats.brat import write_brat

    record = None
    for result in results:
        if record is None:
            record = result.provenance is not None and (
                (directory / BRAT_PROVENANCE).is_file() or not any(directory.rglob("*.ann")))
            if record:
                directory.mkdir(parents=True, exist_ok=True)
                write_text_atomic(directory / BRAT_PROVENANCE, json.dumps(result.provenance, indent=2) + "\n")
        write_brat(result.as_document(), directory)


def write_linked(results: Iterable[LinkedDocument], output: str, output_format: str, *, candidates: bool = False,
                 overwrite: bool = False) -> None:
    """Write linked documents in `output_format` (a `LINKED_WRITERS` name: `jsonl`, `brat` or a
    `formats.WRITERS` one) to `output` (`-`: stdout); a document that carries an error is a JSONL
    record, left out of the others. A JSONL file is appended to and brat written per document, so
    both resume (`completed_ids`); the other formats are one file, replaced atomically when complete."""
    if output_format != "jsonl":  # only JSONL has a record for a document that could not be linked
        results = (result for result in results if result.error is None)
    LINKED_WRITERS[output_format](results, output, overwrite=overwrite, candidates=candidates)


def _write_jsonl(results: Iterable[LinkedDocument], output: str, *, overwrite: bool, candidates: bool) -> None:
    if output != "-":
        append_jsonl(results, Path(output), overwrite, candidates)
        return
    with atomic_output(output) as stream:
        for result in results:
            write_jsonl_line(result, stream, candidates)


def _write_brat(results: Iterable[LinkedDocument], output: str, *, overwrite: bool, candidates: bool) -> None:
    write_brat_each(results, Path(output))


def _whole_file(write_documents: Callable[[Iterable[Document], TextIO], None]):
    """A `formats.WRITERS` writer, its file replaced when complete."""
    def write(results: Iterable[LinkedDocument], output: str, *, overwrite: bool, candidates: bool) -> None:
        with atomic_output(output) as stream:
            write_documents((result.as_document() for result in results), stream)
    return write


#: `link --format` → how linked documents are written.
LINKED_WRITERS = {"jsonl": _write_jsonl, "brat": _write_brat,
                  **{name: _whole_file(writer) for name, writer in WRITERS.items()}}
