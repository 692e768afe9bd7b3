"""`babelink link` as users run it: inputs, output formats, errors (a real subprocess)."""

import json
from xml.etree import ElementTree

import pytest
from support import babelink

from babelink.formats.brat import iter_brat
from babelink.formats.pubtator import iter_pubtator

TEXT = "Infarto de miocardio en un paciente con asthma."


def _mentions(record):
    return [(m["text"], m["concept"]) for m in record["mentions"]]


def test_link_arguments_to_jsonl_contract(bundle):
    result = babelink("link", "--bundle", bundle, TEXT, "Diabetes mellitus.")
    assert result.returncode == 0, result.stderr
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert first["id"] == "1" and second["id"] == "2"
    assert _mentions(first) == [("Infarto de miocardio", "C0027051"), ("asthma", "C0004096")]
    mention = first["mentions"][0]
    assert {"start": 0, "end": 20, "text": "Infarto de miocardio", "concept": "C0027051",
            "name": "Myocardial Infarction", "score": 1.0}.items() <= mention.items()


def test_a_language_the_bundle_does_not_read_is_said(bundle):
    result = babelink("link", "--bundle", bundle, "--lang", "ru", "Бронхиальная астма.")
    assert result.returncode == 0 and "the bundle has no names and no lexicon in 'ru' (it reads " in result.stderr
    assert "no lexicon in" not in babelink("link", "--bundle", bundle, "--lang", "es", TEXT).stderr


def test_soft_hyphens_and_slashes_leave_mentions_whole(bundle):
    result = babelink("link", "--bundle", bundle, "History: ast\u00adhma/diabetes mellitus.Asthma")
    assert result.returncode == 0, result.stderr
    assert _mentions(json.loads(result.stdout)) == [("ast\u00adhma", "C0004096"), ("diabetes mellitus", "C0011849"),
                                                    ("Asthma", "C0004096")]


def test_link_jsonl_file_with_candidates(bundle, tmp_path):
    lines = [{"id": "a", "text": TEXT}, {"id": "b", "text": "no concept here", "lang": "en"}]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = babelink("link", "-b", bundle, "-i", tmp_path / "in.jsonl", "-o", tmp_path / "out.jsonl", "--candidates")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b"] and records[1]["mentions"] == []
    assert records[0]["mentions"][0]["candidates"][0]["id"] == "C0027051"


def test_link_pubtator_in_and_out(bundle, tmp_path):
    (tmp_path / "in.txt").write_text("123|t|Asthma in children\n123|a|Diabetes mellitus and asthma.\n\n")
    result = babelink(
        "link", "-b", bundle, "-i", tmp_path / "in.txt", "-o", tmp_path / "out.txt", "--format", "pubtator"
    )
    assert result.returncode == 0, result.stderr
    [document] = iter_pubtator(tmp_path / "out.txt")
    assert [(a.text, a.concept_ids) for a in document.annotations] == [
        ("Asthma", ("C0004096",)), ("Diabetes mellitus", ("C0011849",)), ("asthma", ("C0004096",))]


def test_link_text_directory_to_brat_and_bioc(bundle, tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "one.txt").write_text(TEXT)
    (tmp_path / "docs" / "sub" / "two.txt").write_text("asthma")
    result = babelink("link", "-b", bundle, "-i", tmp_path / "docs", "-o", tmp_path / "brat", "--format", "brat")
    assert result.returncode == 0, result.stderr
    documents = {d.id: d for d in iter_brat(tmp_path / "brat")}
    assert set(documents) == {"one", "sub/two"}
    assert documents["sub/two"].annotations[0].concept_ids == ("C0004096",)
    result = babelink("link", "-b", bundle, "-i", tmp_path / "docs", "-o", tmp_path / "out.xml", "--format", "bioc")
    assert result.returncode == 0, result.stderr
    root = ElementTree.parse(tmp_path / "out.xml").getroot()
    assert [d.findtext("id") for d in root.iter("document")] == ["one", "sub/two"]
    assert root.find(".//annotation/infon[@key='identifier']").text == "C0027051"


@pytest.mark.parametrize(("content", "message"), [
    (b'{"id": "a", "text": "asthma"}\n{"id": "b"}\n', 'in.jsonl:2: expected an object with a "text" string'),
    (b'{"id": "a", "text": "asthma"}\nnot json\n', "in.jsonl:2: invalid JSON"),
    (b'{"id": "a", "text": "asthma \\ud800"}\n', "not valid Unicode"),
    (b'{"id": "a", "text": "ok"}\n{"id": "a", "text": "again"}\n', "in.jsonl:2: duplicate document id 'a'"),
    (b'{"id": "a", "text": "\xff\xfe"}\n', "in.jsonl:1: invalid UTF-8"),
    (b'{"id": "2", "text": "ok"}\n{"text": "again"}\n', "in.jsonl:2: duplicate document id '2' (a line without"),
    (b'{"id": "a", "text": "ok", "lang": 5}\n', 'in.jsonl:1: "lang" must be a language code'),
    (b'{"id": true, "text": "ok"}\n', 'in.jsonl:1: "id" must be a string'),
])
def test_link_bad_input_is_one_clear_line(bundle, tmp_path, content, message):
    (tmp_path / "in.jsonl").write_bytes(content)
    result = babelink("link", "-b", bundle, "-i", tmp_path / "in.jsonl", "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists(), "no partial output file"


def test_a_file_named_pubtator_is_read_as_pubtator(bundle, tmp_path):
    (tmp_path / "in.pubtator").write_text("Asthma in children, not PubTator.\n")
    result = babelink("link", "-b", bundle, "-i", tmp_path / "in.pubtator", "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1 and "in.pubtator:1: neither 'PMID|t|" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_one_bad_document_is_named_by_file_and_line_and_can_be_skipped(bundle, tmp_path):
    lines = [b'{"id": "a", "text": "asthma"}', b'{"id": "b", "text": "asthma \\ud800"}',
             b'{"id": "c", "text": "asthma"}']
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    stopped = babelink("link", "-b", bundle, "-i", tmp_path / "in.jsonl", "-o", tmp_path / "out.jsonl")
    assert stopped.returncode == 1 and "in.jsonl:2: document 'b'" in stopped.stderr
    going_on = babelink("link", "-b", bundle, "-i", tmp_path / "in.jsonl", "-o", tmp_path / "all.jsonl",
                        "--skip-invalid")
    assert going_on.returncode == 0, going_on.stderr
    assert "skipped " in going_on.stderr and "1 documents skipped" in going_on.stderr
    records = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b", "c"] and "in.jsonl:2: document 'b'" in records[1]["error"]
    assert _mentions(records[2]) == [("asthma", "C0004096")]
    pubtator = babelink("link", "-b", bundle, "-i", tmp_path / "in.jsonl", "-o", tmp_path / "out.txt",
                        "--format", "pubtator", "--skip-invalid")
    assert pubtator.returncode == 0 and [d.id for d in iter_pubtator(tmp_path / "out.txt")] == ["a", "c"]


def test_link_usage_errors(bundle, tmp_path):
    assert "not both or neither" in babelink("link", "-b", bundle).stderr
    assert "give --output DIR" in babelink("link", "-b", bundle, "asthma", "--format", "brat").stderr
    assert "not a babelink context filter" in babelink("link", "-b", bundle, "asthma", "--filter", tmp_path).stderr
    wrong_language = babelink("link", "-b", bundle, "asthma", "--lang", "english")
    assert wrong_language.returncode == 2 and "'english' is not a language code" in wrong_language.stderr


def test_build_types_from_an_ontology_and_link_leaves_modifiers_out(tmp_path):
    (tmp_path / "hp.obo").write_text("[Term]\nid: HP:0000001\nname: All\n\n[Term]\nid: HP:0012823\nname: Clinical "
                                     "modifier\nis_a: HP:0000001\n\n[Term]\nid: HP:0012828\nname: Severe\n"
                                     "is_a: HP:0012823\n")
    (tmp_path / "MRCONSO.RRF").write_text(
        "C0205082|ENG|P|L1|PF|S1|Y|A1||||HPO|PT|HP:0012828|Severe|0|N||\n"
        "C0004096|ENG|P|L4|PF|S4|Y|A4||||MSH|MH|D001249|Asthma|0|N||\n")
    built = babelink("build", "--kb", tmp_path / "MRCONSO.RRF", "--types-from", tmp_path / "hp.obo",
                     "--out", tmp_path / "bundle", "--retriever", "sparse")
    assert built.returncode == 0, built.stderr
    assert "1 concepts typed by hp.obo" in built.stderr
    text = "Severe asthma; the cough was severe."
    linked = babelink("link", "-b", tmp_path / "bundle", text)
    assert _mentions(json.loads(linked.stdout)) == [("asthma", "C0004096")]
    kept = babelink("link", "-b", tmp_path / "bundle", "--keep-modifiers", text)
    assert _mentions(json.loads(kept.stdout)) == [("Severe", "C0205082"), ("asthma", "C0004096"),
                                                  ("severe", "C0205082")]
    typed = babelink("normalize", "-b", tmp_path / "bundle", "--types", "HP:0012823", "severely")
    assert [c["id"] for c in json.loads(typed.stdout)["candidates"]] == ["C0205082"]
    assert json.loads(babelink("info", "-b", tmp_path / "bundle").stdout)["types"] == {"HP:0012823": 1}


def test_a_malformed_ontology_is_named_by_file_and_line(tmp_path):
    (tmp_path / "bad.obo").write_text("[Term]\nid: HP:1\nis_a:\n")
    (tmp_path / "MRCONSO.RRF").write_text("C0004096|ENG|P|L4|PF|S4|Y|A4||||MSH|MH|D001249|Asthma|0|N||\n")
    result = babelink("build", "--kb", tmp_path / "MRCONSO.RRF", "--types-from", tmp_path / "bad.obo",
                      "--out", tmp_path / "bundle", "--retriever", "sparse")
    assert result.returncode != 0 and "bad.obo:3" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "bundle").exists()


def test_a_bundle_built_with_a_link_threshold_links_at_it_and_the_command_line_overrides_it(tmp_path):
    from support import MRCONSO

    (tmp_path / "MRCONSO.RRF").write_text(MRCONSO)
    built = babelink("build", "--kb", tmp_path / "MRCONSO.RRF", "--out", tmp_path / "b", "--retriever", "sparse",
                     "--link-threshold", "0.7")
    assert built.returncode == 0, built.stderr
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["link"] == {"link_threshold": 0.7}
    loose = babelink("link", "--bundle", tmp_path / "b", "Diabetes melitus.")
    strict = babelink("link", "--bundle", tmp_path / "b", "--link-threshold", "0.98", "Diabetes melitus.")
    assert loose.returncode == strict.returncode == 0, loose.stderr + strict.stderr
    assert _mentions(json.loads(loose.stdout)) == [("Diabetes melitus", "C0011849")]
    assert _mentions(json.loads(strict.stdout)) == []
    refused = babelink("link", "--bundle", tmp_path / "b", "--link-threshold", "1.5", "Asthma.")
    assert refused.returncode == 2 and "--link-threshold" in refused.stderr
