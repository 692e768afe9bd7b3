"""Reading BioC XML or JSON from any tool: passages and sentences with absolute offsets."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.parsers.expat import ErrorString

from babelink.errors import InputFormatError
from babelink.formats.document import Annotation, Document

_ID_KEYS = ("identifier", "mesh", "cui")
_ID_SEPARATOR = re.compile(r"[|;,+]")
_NO_IDS = frozenset({"", "-", "-1", "None"})
#: The infon that holds a document's language, read and written.
LANGUAGE_INFON = "language"
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class _RawAnnotation:
    id: str
    infons: dict[str, str]
    locations: tuple[tuple[int, int], ...]  # (offset, length) pairs
    text: str | None


@dataclass(frozen=True)
class _RawPassage:
    offset: int
    text: str | None
    annotations: tuple[_RawAnnotation, ...]


def covered_text(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """What a mention reads as: its extent, or its fragments joined by a space."""
    return " ".join(text[start:end] for start, end in spans)


def read_bioc_xml(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a BioC XML file one at a time (see `_build_document` for the rules)."""
    path = Path(path)
    _check_file(path)
    root = None
    try:
        for event, element in ET.iterparse(path, events=("start", "end")):
            if root is None:
                if element.tag != "collection":
                    raise InputFormatError(path, None, f"root element is <{element.tag}>, not a BioC <collection>")
                root = element
            elif event == "end" and element.tag == "document":
                yield _build_document(*_xml_document(element, path), path)
                root.clear()
    except ET.ParseError as error:
        line, column = error.position
        message = f"not well-formed XML: {ErrorString(error.code)} at column {column + 1}"
        raise InputFormatError(path, line, message) from None
    except OSError as error:
        raise InputFormatError(path, None, f"cannot read: {error.strerror or error}") from None


def read_bioc_json(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a BioC JSON file (see `_build_document` for the rules).

    Takes a collection, a document, a list of either, PubTator3's `{"PubTator3": [...]}`, or
    several such values one after another (JSON lines); the file is parsed whole.
    """
    path = Path(path)
    _check_file(path)
    try:
        content = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputFormatError(path, None, f"invalid UTF-8 at byte {error.start}") from None
    except OSError as error:
        raise InputFormatError(path, None, f"cannot read: {error.strerror or error}") from None
    for value in _json_values(content, path):
        for raw_document in _json_documents(value, path):
            yield _build_document(*_json_document(raw_document, path), path)


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise InputFormatError(path, None, "no such file" if not path.exists() else "not a file")


def _build_document(doc_id: str, infons: dict[str, str], passages: list[_RawPassage], path: Path) -> Document:
    """Assemble a `Document` from passages (and sentences) at absolute character offsets.

    The text puts each passage's text at its offset; a gap becomes a line break padded with
    spaces, so a title at 0 and an abstract at `len(title) + 1` read as `title\\nabstract`.
    Identifiers are split at `|`, `;`, `,` and `+`; `-`, `-1` and `None` mean no id. An
    annotation without a location (a document-level label) is skipped; one whose text differs
    from the document's at its locations (whitespace aside) raises `InputFormatError`, and the
    annotation keeps the document's text. The `language` infon becomes `Document.lang`, the
    others `Document.infons` (so a `link` output's `babelink_bundle` names the bundle that linked it).
    """
    pieces: list[str] = []
    length = 0
    for passage in sorted((p for p in passages if p.text is not None), key=lambda p: p.offset):
        if passage.offset < length:
            raise InputFormatError(path, None, f"document {doc_id}: passage at {passage.offset} overlaps the text")
        if passage.offset > length:
            pieces.append("\n" + " " * (passage.offset - length - 1))
        pieces.append(passage.text)
        length = passage.offset + len(passage.text)
    text = "".join(pieces)
    annotations = tuple(
        _build_annotation(raw, text, doc_id, path)
        for passage in passages
        for raw in passage.annotations
        if raw.locations
    )
    others = tuple((key, value) for key, value in infons.items() if key != LANGUAGE_INFON)
    return Document(doc_id, text, annotations, infons.get(LANGUAGE_INFON), others)


def _build_annotation(raw: _RawAnnotation, text: str, doc_id: str, path: Path) -> Annotation:
    where = f"document {doc_id}, annotation {raw.id}"
    spans = tuple(sorted((offset, offset + length) for offset, length in raw.locations))
    if any(end > len(text) for _, end in spans):
        raise InputFormatError(path, None, f"{where}: location outside the {len(text)}-character text")
    covered = covered_text(text, spans)
    if raw.text is not None and raw.text.split() != covered.split():
        raise InputFormatError(path, None, f"{where}: text {raw.text!r} does not match {covered!r} at its location")
    infons = {key.lower(): value for key, value in raw.infons.items()}
    ids = next((infons[key] for key in _ID_KEYS if infons.get(key)), "")
    concept_ids = tuple(dict.fromkeys(part.strip() for part in _ID_SEPARATOR.split(ids) if part.strip() not in _NO_IDS))
    return Annotation(
        start=spans[0][0],
        end=spans[-1][1],
        text=covered,
        concept_ids=concept_ids,
        type=infons.get("type", ""),
        fragments=spans if len(spans) > 1 else (),
    )


def _xml_document(element: ET.Element, path: Path) -> tuple[str, dict[str, str], list[_RawPassage]]:
    doc_id = element.findtext("id")
    if doc_id is None:
        raise InputFormatError(path, None, "a <document> has no <id>")
    passages = []
    for passage in element.findall("passage"):
        for unit in (passage, *passage.findall("sentence")):
            annotations = tuple(_xml_annotation(child, doc_id, path) for child in unit.findall("annotation"))
            offset = _integer(unit.findtext("offset"), f"document {doc_id}: {unit.tag} offset", path)
            passages.append(_RawPassage(offset, unit.findtext("text"), annotations))
    return doc_id, _xml_infons(element), passages


def _xml_annotation(element: ET.Element, doc_id: str, path: Path) -> _RawAnnotation:
    annotation_id = element.get("id", "")
    where = f"document {doc_id}, annotation {annotation_id}"
    locations = tuple(
        (
            _integer(location.get("offset"), f"{where}: location offset", path),
            _integer(location.get("length"), f"{where}: location length", path),
        )
        for location in element.findall("location")
    )
    return _RawAnnotation(annotation_id, _xml_infons(element), locations, element.findtext("text"))


def _xml_infons(element: ET.Element) -> dict[str, str]:
    return {infon.get("key", ""): infon.text or "" for infon in element.findall("infon")}


def _json_values(content: str, path: Path) -> Iterator[Any]:
    """Every JSON value in the file: one for a plain JSON file, one per line for JSON lines."""
    decoder = json.JSONDecoder()
    position = _skip_space(content, 0)
    while position < len(content):
        try:
            value, position = decoder.raw_decode(content, position)
        except json.JSONDecodeError as error:
            raise InputFormatError(path, error.lineno, f"not valid JSON: {error.msg}") from None
        yield value
        position = _skip_space(content, position)


def _skip_space(content: str, position: int) -> int:
    return len(content) - len(content[position:].lstrip())


def _json_documents(value: Any, path: Path) -> Iterator[dict]:
    if isinstance(value, list):
        for item in value:
            yield from _json_documents(item, path)
    elif isinstance(value, dict) and "passages" in value:
        yield value
    elif isinstance(value, dict) and isinstance(documents := value.get("documents", value.get("PubTator3")), list):
        yield from _json_documents(documents, path)
    else:
        raise InputFormatError(path, None, "expected a BioC collection or documents with passages")


def _json_document(raw: dict, path: Path) -> tuple[str, dict[str, str], list[_RawPassage]]:
    doc_id = raw.get("id")
    if not isinstance(doc_id, (str, int)):
        raise InputFormatError(path, None, "a document has no string id")
    doc_id = str(doc_id)
    passages = []
    for passage in _json_list(raw, "passages", f"document {doc_id}", path):
        for unit in (passage, *_json_list(passage, "sentences", f"document {doc_id}", path)):
            text = unit.get("text")
            if text is not None and not isinstance(text, str):
                raise InputFormatError(path, None, f"document {doc_id}: passage text is not a string")
            annotations = tuple(
                _json_annotation(annotation, doc_id, path)
                for annotation in _json_list(unit, "annotations", f"document {doc_id}", path)
            )
            offset = _integer(unit.get("offset"), f"document {doc_id}: passage offset", path)
            passages.append(_RawPassage(offset, text, annotations))
    return doc_id, _json_infons(raw, f"document {doc_id}", path), passages


def _json_annotation(raw: dict, doc_id: str, path: Path) -> _RawAnnotation:
    annotation_id = str(raw.get("id", ""))
    where = f"document {doc_id}, annotation {annotation_id}"
    locations = tuple(
        (
            _integer(location.get("offset"), f"{where}: location offset", path),
            _integer(location.get("length"), f"{where}: location length", path),
        )
        for location in _json_list(raw, "locations", where, path)
    )
    text = raw.get("text")
    infons = _json_infons(raw, where, path)
    return _RawAnnotation(annotation_id, infons, locations, text if isinstance(text, str) else None)


def _json_list(raw: dict, key: str, where: str, path: Path) -> list[dict]:
    """`raw[key]` as a list of objects (empty when absent)."""
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InputFormatError(path, None, f"{where}: {key!r} is not a list of objects")
    return value


def _json_infons(raw: dict, where: str, path: Path) -> dict[str, str]:
    """Infons as strings; a null value (PubTator3 writes some) is dropped."""
    infons = raw.get("infons", {})
    if not isinstance(infons, dict):
        raise InputFormatError(path, None, f"{where}: infons are not an object")
    return {str(key): str(value) for key, value in infons.items() if value is not None}


def _integer(value: object, what: str, path: Path) -> int:
    """A non-negative integer given as a JSON number or as digits (XML)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value)
    raise InputFormatError(path, None, f"{what} {value!r} is not a non-negative integer")
