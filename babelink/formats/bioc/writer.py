"""Writing documents and their annotations as BioC XML or JSON: one passage per document."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import date
from typing import Any, TextIO

from babelink.formats.bioc.reader import LANGUAGE_INFON, covered_text
from babelink.formats.document import Annotation, Document

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def write_bioc_xml(documents: Iterable[Document], stream: TextIO, source: str = "babelink") -> None:
    """Write a BioC XML collection one document at a time; `stream` must encode UTF-8.

    Characters XML 1.0 forbids (C0 controls other than tab, line feed and carriage return) are
    written as spaces, so offsets hold but such a text does not read back unchanged.
    """
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE collection SYSTEM "BioC.dtd">\n<collection>\n')
    stream.writelines(f"  {_serialise(_leaf(name, value))}\n" for name, value in _collection_fields(source).items())
    stream.writelines(f"  {_serialise(_document_element(document))}\n" for document in documents)
    stream.write("</collection>\n")


def write_bioc_json(documents: Iterable[Document], stream: TextIO, source: str = "babelink") -> None:
    """Write a BioC JSON collection (the layout of PubTator3 and the `bioc` package), one document at a time."""
    header = json.dumps({**_collection_fields(source), "infons": {}}, ensure_ascii=False)
    stream.write(f'{header[:-1]}, "documents": [')
    stream.writelines(
        f"{',' if number else ''}\n{json.dumps(_document_json(document), ensure_ascii=False)}"
        for number, document in enumerate(documents)
    )
    stream.write("\n]}\n")


def _collection_fields(source: str) -> dict[str, str]:
    return {"source": source, "date": date.today().strftime("%Y%m%d"), "key": ""}


def _document_infons(document: Document) -> dict[str, str]:
    return {**({LANGUAGE_INFON: document.lang} if document.lang is not None else {}), **dict(document.infons)}


def _annotation_infons(annotation: Annotation) -> dict[str, str]:
    infons = {"type": annotation.type or "Entity", **dict(annotation.infons)}
    if annotation.concept_ids:
        infons["identifier"] = "|".join(annotation.concept_ids)
    return infons


def _spans(annotation: Annotation) -> tuple[tuple[int, int], ...]:
    return annotation.fragments or ((annotation.start, annotation.end),)


def _document_json(document: Document) -> dict[str, Any]:
    annotations = [
        {
            "id": str(number),
            "infons": _annotation_infons(annotation),
            "text": covered_text(document.text, _spans(annotation)),
            "locations": [{"offset": start, "length": end - start} for start, end in _spans(annotation)],
        }
        for number, annotation in enumerate(document.annotations, start=1)
    ]
    passage = {"infons": {}, "offset": 0, "text": document.text, "sentences": [], "annotations": annotations,
               "relations": []}
    return {"id": document.id, "infons": _document_infons(document), "passages": [passage], "relations": []}


def _document_element(document: Document) -> ET.Element:
    element = ET.Element("document")
    element.append(_leaf("id", document.id))
    _append_infons(element, _document_infons(document))
    passage = ET.SubElement(element, "passage")
    passage.append(_leaf("offset", "0"))
    passage.append(_leaf("text", document.text))
    for number, annotation in enumerate(document.annotations, start=1):
        child = ET.SubElement(passage, "annotation", id=str(number))
        _append_infons(child, _annotation_infons(annotation))
        for start, end in _spans(annotation):
            ET.SubElement(child, "location", offset=str(start), length=str(end - start))
        child.append(_leaf("text", covered_text(document.text, _spans(annotation))))
    ET.indent(element, space="  ", level=1)
    return element


def _append_infons(element: ET.Element, infons: dict[str, str]) -> None:
    for key, value in infons.items():
        element.append(_leaf("infon", value, key=_xml_safe(key)))


def _leaf(tag: str, text: str, **attributes: str) -> ET.Element:
    element = ET.Element(tag, attributes)
    element.text = _xml_safe(text)
    return element


def _xml_safe(text: str) -> str:
    return _XML_ILLEGAL.sub(" ", text)


def _serialise(element: ET.Element) -> str:
    """ElementTree leaves `\\r` in text raw, and parsers turn raw line ends into `\\n`: escape it."""
    return ET.tostring(element, encoding="unicode").replace("\r", "&#13;")
