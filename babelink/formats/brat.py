"""brat standoff (Mantra GSC, QUAERO): a `.txt` and its `.ann` of `T` (mention) and `#` (note) lines.

The gold CUI is the entity type in Mantra (`T4<TAB>C1533734 28 42<TAB>…`) and an AnnotatorNotes
line in QUAERO (`#1<TAB>AnnotatorNotes T1<TAB>C0559702`); both layouts are read the same way.
`write_brat` puts the ids of any KB (`MESH:D003924`, `HP:0001250`) in such a note.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from babelink.errors import InputFormatError, InvalidInputError
from babelink.formats.document import Annotation, Document
from babelink.fsutil import write_text_atomic
from babelink.textio import iter_lines, read_text_file

_CUI = re.compile(r"C\d{7}")
# A CUI standing alone in a note: `"C1533734", …` or `C0008100 C0008059`, not `C21983864`.
_CUI_TOKEN = re.compile(r"(?<![A-Za-z0-9])C\d{7}(?![A-Za-z0-9])")
# A note made only of these is a list of ids (what `write_brat` writes): prefixed ids of any KB
# (`MESH:D003924`, `HP:0001250`, `ICD10:E11.9`), UMLS CUIs and bare MeSH descriptors (`D003924`,
# `D000069283`). Bare `C` + 6 digits is left out: QUAERO has truncated CUIs of that shape.
_ID_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*:[A-Za-z0-9_.\-]+|C\d{7}|D\d{6}(?:\d{3})?")
_SPAN = re.compile(r"(\d+) (\d+)")
# Relations, events, attributes, normalizations, equivalences, modifiers: no mention of their own.
_SKIPPED_KINDS = frozenset("REANM*")


def read_brat_document(txt_path: str | Path, doc_id: str | None = None) -> Document:
    """Read a `.txt` and the `.ann` beside it; the id defaults to the file name without `.txt`.

    Discontinuous mentions keep their fragments. CUIs come from the type when it is a CUI,
    else from the mention's AnnotatorNotes (see `_ids_in_note`); a mention without either gets
    no concept id.
    """
    txt_path = Path(txt_path)
    text = read_text_file(txt_path)
    ann_path = txt_path.with_suffix(".ann")
    mentions: list[tuple[str, Annotation]] = []
    notes: dict[str, str] = {}
    for number, line in iter_lines(ann_path):
        if not line.strip() or line[0] in _SKIPPED_KINDS:
            continue
        if line[0] == "T":
            mentions.append(_parse_mention(line, text, ann_path, number))
        elif line[0] == "#":
            fields = line.split("\t", 2)
            kind_and_target = fields[1].split() if len(fields) > 1 else []
            if len(kind_and_target) != 2:
                raise InputFormatError(ann_path, number, "expected '#n<TAB>AnnotatorNotes Tn<TAB>note'")
            if kind_and_target[0] == "AnnotatorNotes":
                notes.setdefault(kind_and_target[1], fields[2] if len(fields) > 2 else "")
        else:
            raise InputFormatError(ann_path, number, f"unknown annotation kind {line[0]!r}")
    annotations = tuple(
        annotation if annotation.concept_ids else replace(annotation, concept_ids=_ids_in_note(notes.get(key, "")))
        for key, annotation in mentions
    )
    return Document(doc_id if doc_id is not None else txt_path.stem, text, annotations)


def iter_brat(directory: str | Path, recursive: bool = True) -> Iterator[Document]:
    """Yield the documents of every `.ann` under `directory` in sorted path order.

    Ids are paths relative to `directory` without the suffix (`EMEA/0001_d326.u54`), so
    documents of different subcorpora never share an id; `.txt` files without `.ann` are skipped.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputFormatError(directory, None, "not a directory")
    ann_paths = directory.rglob("*.ann") if recursive else directory.glob("*.ann")
    for ann_path in sorted(ann_paths):
        doc_id = ann_path.relative_to(directory).with_suffix("").as_posix()
        yield read_brat_document(ann_path.with_suffix(".txt"), doc_id)


#: Characters that would end an `.ann` line's text field (tabs, and what `str.splitlines` breaks at).
_ANN_BREAKING = re.compile(r"[\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def write_brat(document: Document, directory: str | Path) -> Path:
    """Write `<id>.txt`, then `<id>.ann`, each atomically, under `directory`; return the `.txt` path.
    An `.ann` that exists is complete and so is its `.txt` (what `babelink link` resumes on).

    A mention whose type is not its CUI gets its concept ids, space separated, in an
    AnnotatorNotes line. The reader recovers ids of the shapes `_ID_TOKEN` accepts; others (a bare
    `C123456` MeSH supplementary id, a bare number) are written but read back as free text.
    """
    txt_path = Path(directory) / f"{_file_stem(document.id)}.txt"
    ann_lines = []
    for number, annotation in enumerate(document.annotations, start=1):
        spans = annotation.fragments or ((annotation.start, annotation.end),)
        span_text = ";".join(f"{start} {end}" for start, end in spans)
        mention = _ANN_BREAKING.sub(" ", annotation.text)  # one for one: the text stays its slice's length
        ann_lines.append(f"T{number}\t{annotation.type or 'Entity'} {span_text}\t{mention}\n")
        if annotation.concept_ids and annotation.concept_ids != (annotation.type,):
            ann_lines.append(f"#{number}\tAnnotatorNotes T{number}\t{' '.join(annotation.concept_ids)}\n")
    txt_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(txt_path, document.text)
    write_text_atomic(txt_path.with_suffix(".ann"), "".join(ann_lines))
    return txt_path


def _file_stem(doc_id: str) -> str:
    """`doc_id` as a path under the output directory (`sub/doc` as the reader gives nested files);
    an id that would name a file elsewhere, or no file, is refused rather than followed."""
    parts = doc_id.split("/")
    if not doc_id or "\0" in doc_id or any(part in ("", ".", "..") for part in parts):
        raise InvalidInputError(f"document id {doc_id!r} cannot be a file name under the brat output directory "
                                f"(empty, absolute, '.' or '..' parts, or a NUL): give the documents other ids")
    return doc_id


def _parse_mention(line: str, text: str, path: Path, number: int) -> tuple[str, Annotation]:
    fields = line.split("\t", 2)
    if len(fields) != 3 or " " not in fields[1]:
        raise InputFormatError(path, number, "expected 'Tn<TAB>TYPE start end[;start end…]<TAB>text'")
    mention_id, (annotation_type, span_text), mention = fields[0], fields[1].split(" ", 1), fields[2]
    spans = [_SPAN.fullmatch(span.strip()) for span in span_text.split(";")]
    if not all(spans):
        raise InputFormatError(path, number, f"bad span list {span_text!r}")
    fragments = tuple((int(span.group(1)), int(span.group(2))) for span in spans)
    if any(not start <= end <= len(text) for start, end in fragments):
        raise InputFormatError(path, number, f"span {span_text!r} is outside the {len(text)}-character text")
    covered = " ".join(text[start:end] for start, end in fragments)
    if " ".join(covered.split()) != " ".join(mention.split()):
        raise InputFormatError(path, number, f"mention {mention!r} does not match {covered!r} at {span_text}")
    concept_ids = (annotation_type,) if _CUI.fullmatch(annotation_type) else ()
    annotation = Annotation(
        start=fragments[0][0],
        end=fragments[-1][1],
        text=mention,
        concept_ids=concept_ids,
        type=annotation_type,
        fragments=fragments if len(fragments) > 1 else (),
    )
    return mention_id, annotation


def _ids_in_note(note: str) -> tuple[str, ...]:
    """The note's tokens when each is an id (written by `write_brat`, QUAERO), else the CUIs in its text."""
    tokens = note.split()
    if tokens and all(_ID_TOKEN.fullmatch(token) for token in tokens):
        return tuple(dict.fromkeys(tokens))
    return _cuis_in_note(note)


def _cuis_in_note(note: str) -> tuple[str, ...]:
    """CUIs of the first comma-separated field that has any: Mantra's first field, QUAERO's list."""
    for note_field in note.split(","):
        cuis = _CUI_TOKEN.findall(note_field)
        if cuis:
            return tuple(dict.fromkeys(cuis))
    return ()

