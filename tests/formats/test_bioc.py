"""BioC XML and JSON: round trips through the writers, BioC as other tools write it, and malformed files."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from babelink.errors import InputFormatError
from babelink.formats import read_documents
from babelink.formats.bioc import read_bioc_json, read_bioc_xml, write_bioc_json, write_bioc_xml
from babelink.formats.document import Annotation, Document

TEXT = 'Tom & <Jerry> "say"\r\n糖尿病 and סוכרת\x01 pain in the left knee'
# Offsets: "Tom" 0-3, "Jerry" 7-12, "糖尿病" 21-24, "סוכרת" 29-34, "\x01" 34, "pain" 36-40, "knee" 53-57.
DOCUMENTS = [
    Document(
        "doc<1>&",
        TEXT,
        (
            Annotation(0, 3, "Tom", (), "Person"),
            Annotation(7, 12, "Jerry", ("MESH:D003924", "HP:0001250"), "Disease"),
            Annotation(21, 24, "糖尿病", ("C0011849",), "Disease"),
            Annotation(29, 34, "סוכרת", ("C0011849",), "Disease"),
            Annotation(36, 57, "pain knee", ("C0231749",), "Disease", ((36, 40), (53, 57))),
        ),
        lang="zh",
    ),
    Document("empty", ""),
]


def write_file(path: Path, content: str) -> Path:
    path.write_text(content, encoding="utf-8", newline="")
    return path


def written(writer, documents: list[Document]) -> str:
    stream = io.StringIO()
    writer(documents, stream)
    return stream.getvalue()


def test_xml_round_trip_escapes_markup_and_blanks_characters_xml_cannot_hold(tmp_path):
    content = written(write_bioc_xml, DOCUMENTS)
    root = ET.fromstring(content.encode("utf-8"))
    assert root.tag == "collection"
    assert root.findtext("source") == "babelink"
    assert [document.findtext("id") for document in root.iter("document")] == ["doc<1>&", "empty"]
    # Only the control character changes: a space of the same length, so offsets hold.
    expected = [Document(DOCUMENTS[0].id, TEXT.replace("\x01", " "), DOCUMENTS[0].annotations, "zh"), DOCUMENTS[1]]
    assert list(read_bioc_xml(write_file(tmp_path / "out.xml", content))) == expected


def test_json_round_trip_is_exact(tmp_path):
    content = written(write_bioc_json, DOCUMENTS)
    collection = json.loads(content)
    assert [document["id"] for document in collection["documents"]] == ["doc<1>&", "empty"]
    (pain,) = [a for a in collection["documents"][0]["passages"][0]["annotations"] if a["text"] == "pain knee"]
    assert pain["infons"] == {"type": "Disease", "identifier": "C0231749"}
    assert pain["locations"] == [{"offset": 36, "length": 4}, {"offset": 53, "length": 4}]
    assert list(read_bioc_json(write_file(tmp_path / "out.json", content))) == DOCUMENTS


def test_writers_stream_documents_as_they_come():
    def documents():
        yield DOCUMENTS[1]
        raise RuntimeError("stop")

    for writer in (write_bioc_xml, write_bioc_json):
        stream = io.StringIO()
        with pytest.raises(RuntimeError):
            writer(documents(), stream)
        assert "empty" in stream.getvalue()


def test_an_untyped_annotation_is_written_as_entity(tmp_path):
    document = Document("d", "Copper", (Annotation(0, 6, "Copper", ()),))
    path = write_file(tmp_path / "out.json", written(write_bioc_json, [document]))
    (read_back,) = read_bioc_json(path)
    assert read_back.annotations == (Annotation(0, 6, "Copper", (), "Entity"),)


# Title at 0, abstract at len(title) + 1, as PubTator and BC5CDR write BioC.
TWO_PASSAGES_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE collection SYSTEM "BioC.dtd">
<collection><source>PubTator</source><date>20240101</date><key>BioC.key</key>
<document><id>100</id>
<passage><infon key="type">title</infon><offset>0</offset><text>Copper toxicosis.</text>
<annotation id="0"><infon key="type">Disease</infon><infon key="MESH">D003300|D014117</infon>
<location offset="0" length="16"/><text>Copper toxicosis</text></annotation></passage>
<passage><infon key="type">abstract</infon><offset>18</offset><text>Breast and ovarian cancer.</text>
<annotation id="1"><infon key="type">Disease</infon><infon key="Identifier">MESH:D010051</infon>
<location offset="29" length="14"/><text>ovarian cancer</text></annotation>
<annotation id="2"><infon key="type">Disease</infon><infon key="CUI">-1</infon>
<location offset="18" length="6"/><text>Breast</text></annotation>
<annotation id="3"><infon key="type">Disease</infon><infon key="identifier">D001943</infon>
<location offset="18" length="6"/><location offset="37" length="6"/><text>Breast cancer</text></annotation>
</passage>
<passage><offset>50</offset><text>Gap.</text></passage>
</document>
</collection>
"""
TWO_PASSAGES_DOCUMENT = Document(
    "100",
    "Copper toxicosis.\nBreast and ovarian cancer.\n     Gap.",
    (
        Annotation(0, 16, "Copper toxicosis", ("D003300", "D014117"), "Disease"),
        Annotation(29, 43, "ovarian cancer", ("MESH:D010051",), "Disease"),
        Annotation(18, 24, "Breast", (), "Disease"),
        Annotation(18, 43, "Breast cancer", ("D001943",), "Disease", ((18, 24), (37, 43))),
    ),
)


def test_xml_from_other_tools_places_passages_at_their_offsets(tmp_path):
    path = write_file(tmp_path / "corpus.xml", TWO_PASSAGES_XML)
    assert list(read_bioc_xml(path)) == [TWO_PASSAGES_DOCUMENT]
    assert list(read_documents(path)) == [TWO_PASSAGES_DOCUMENT]


def test_json_from_pubtator3_with_null_infons_and_sentences(tmp_path):
    document = {
        "_id": "100|None",
        "id": "100",
        "infons": {},
        "passages": [
            {"infons": {"type": "title"}, "offset": 0, "text": "Copper toxicosis.", "annotations": [
                {"id": "1", "infons": {"identifier": "MESH:D003300", "type": "Disease", "name": None},
                 "text": "Copper toxicosis", "locations": [{"offset": 0, "length": 16}]}]},
            {"infons": {"type": "abstract"}, "offset": 18, "sentences": [
                {"infons": {}, "offset": 18, "text": "Dogs.", "annotations": [
                    {"id": "2", "infons": {"identifier": None, "type": "Species"}, "text": "Dogs",
                     "locations": [{"offset": 18, "length": 4}]}]}]},
        ],
    }
    path = write_file(tmp_path / "corpus.json", json.dumps({"PubTator3": [document]}))
    expected = Document(
        "100",
        "Copper toxicosis.\nDogs.",
        (
            Annotation(0, 16, "Copper toxicosis", ("MESH:D003300",), "Disease"),
            Annotation(18, 22, "Dogs", (), "Species"),
        ),
    )
    assert list(read_bioc_json(path)) == [expected]
    # JSON lines: one document per line.
    lines = write_file(tmp_path / "corpus.jsonl", f"{json.dumps(document)}\n{json.dumps(document)}\n")
    assert list(read_bioc_json(lines)) == [expected, expected]


@pytest.mark.parametrize(
    ("name", "content", "line", "message"),
    [
        ("bad.xml", TWO_PASSAGES_XML.replace("</document>", ""), 18, "not well-formed"),
        ("bad.xml", "<root/>", None, "not a BioC <collection>"),
        ("bad.xml", TWO_PASSAGES_XML.replace("<offset>18</offset>", "<offset>x</offset>"), None, "offset 'x'"),
        ("bad.xml", TWO_PASSAGES_XML.replace('offset="29" length="14"', 'offset="30" length="14"'), None,
         "annotation 1: text 'ovarian cancer' does not match"),
        ("bad.xml", TWO_PASSAGES_XML.replace('offset="29" length="14"', 'offset="29" length="140"'), None,
         "outside"),
        ("bad.xml", TWO_PASSAGES_XML.replace("<offset>50</offset>", "<offset>20</offset>"), None, "overlaps"),
        ("bad.xml", TWO_PASSAGES_XML.replace("<id>100</id>", ""), None, "no <id>"),
        ("bad.json", '{"documents": [{"id": "1", "passages": []}]}\n{"documents": [', 2, "not valid JSON"),
        ("bad.json", '{"documents": [{"id": "1", "passages": {}}]}', None, "'passages' is not a list"),
        ("bad.json", '{"documents": [{"id": "1", "passages": [{"offset": -1, "text": ""}]}]}', None, "offset -1"),
        ("bad.json", '{"source": "x"}', None, "expected a BioC collection"),
    ],
)
def test_malformed_files_raise_input_format_errors_naming_the_file(tmp_path, name, content, line, message):
    path = write_file(tmp_path / name, content)
    reader = read_bioc_xml if name.endswith(".xml") else read_bioc_json
    with pytest.raises(InputFormatError, match=message) as error:
        list(reader(path))
    assert error.value.path == str(path)
    assert error.value.line == line
    assert str(path) in str(error.value)


def test_missing_and_undecodable_files_raise_input_format_errors(tmp_path):
    for reader in (read_bioc_xml, read_bioc_json):
        with pytest.raises(InputFormatError, match="no such file"):
            list(reader(tmp_path / "missing"))
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"documents": [{"id": "caf\xe9"}]}')
    with pytest.raises(InputFormatError, match="invalid UTF-8"):
        list(read_bioc_json(path))
