"""Scoring a `link` output against gold documents (`eval.linking`, `babelink evaluate`)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from babelink.errors import BabelinkError, InputFormatError
from babelink.eval.linking import Predictions, read_predictions, score_linking
from babelink.formats.document import Annotation, Document
from babelink.kb.base import KnowledgeBaseBuilder

TEXT = "Asthma and diabetes mellitus; also gout."


@pytest.fixture(scope="module")
def kb():
    builder = KnowledgeBaseBuilder()
    builder.add_name("MESH:D001249", "Asthma", preferred=True)
    builder.add_name("MESH:D003920", "Diabetes mellitus", preferred=True)
    builder.add_concept("MESH:D003920", alt_ids=["OMIM:125853"])
    return builder.build()


def gold(lang=None, doc_id="1"):
    """Four gold mentions: asthma (bare MeSH id), diabetes mellitus (an alternative id), gout (not
    in the KB), "also" (NIL)."""
    return Document(doc_id, TEXT, (
        Annotation(0, 6, "Asthma", ("D001249",), "Disease"),
        Annotation(11, 28, "diabetes mellitus", ("OMIM:125853",), "Disease"),
        Annotation(35, 39, "gout", ("D006073",), "Disease"),
        Annotation(30, 34, "also", (), "Other"),
    ), lang=lang)


def predicted(*mentions, doc_id="1", infons=()):
    return Document(doc_id, "", tuple(Annotation(s, e, TEXT[s:e], (c,)) for s, e, c in mentions), infons=infons)


def test_linking_counts_in_kb_gold_and_detection_counts_every_span(kb):
    # exact and right; overlapping and right; exact span of the out-of-KB gold, a concept it cannot be
    found = predicted((0, 6, "MESH:D001249"), (20, 28, "MESH:D003920"), (35, 39, "MESH:D001249"))
    scores = score_linking(Predictions((found,)), [gold()], kb)
    strict, partial = scores["linking"]["strict"], scores["linking"]["partial"]
    assert (strict["tp_pred"], strict["predicted"], strict["gold"]) == (1, 3, 2)
    assert (strict["precision"], strict["recall"]) == (pytest.approx(1 / 3), 0.5)
    assert (partial["tp_pred"], partial["recall"]) == (2, 1.0)
    detection = scores["detection"]["strict"]
    assert (detection["tp_gold"], detection["gold"]) == (2, 4)  # asthma and gout, of four spans
    assert scores["mentions"] == {"gold": 4, "gold_in_kb": 2, "predicted": 3}
    assert scores["by_language"] == {}


def test_types_restrict_gold_and_languages_are_scored_apart(kb):
    en, es = gold("en", "en1"), gold("es", "es1")
    found = (predicted((0, 6, "MESH:D001249"), doc_id="en1"), predicted(doc_id="es1"))
    scores = score_linking(Predictions(found), [en, es], kb, types={"Disease"})
    assert scores["mentions"]["gold"] == 6  # "also" (type Other) left out of both documents
    assert scores["by_language"]["en"]["linking"]["strict"]["recall"] == 0.5
    assert scores["by_language"]["es"]["linking"]["strict"]["recall"] == 0.0


def test_gold_documents_without_predictions_are_missed_and_counted(kb):
    scores = score_linking(Predictions((), failed=("2",)), [gold(doc_id="1"), gold(doc_id="2")], kb)
    assert scores["documents"] == {"gold": 2, "predicted": 0, "failed": 1, "missing": 1}
    assert scores["linking"]["strict"]["recall"] == 0.0


@pytest.mark.parametrize(("found", "message"), [
    (predicted(doc_id="9"), "document '9' is not in the gold corpus"),
    (Document("1", "", (Annotation(0, 6, "Asthmx", ("MESH:D001249",)),), source="p.jsonl:3"),
     "p.jsonl:3: document '1': the mention 'Asthmx' at 0-6 is not the gold text there ('Asthma')"),
    (Document("1", "", (Annotation(0, 99, "", ("MESH:D001249",)),)), "at 0-99 is not the gold text"),
    (predicted(infons=(("babelink_bundle", "aaaaaaaaaaaa"),)), "linked with bundle aaaaaaaaaaaa, not with the given"),
])
def test_predictions_that_do_not_fit_the_gold_are_refused(kb, found, message):
    with pytest.raises(InputFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        score_linking(Predictions((found,)), [gold()], kb, bundle_id="bbbbbbbbbbbb")


def test_a_document_predicted_twice_and_gold_without_kb_ids_are_refused(kb):
    with pytest.raises(InputFormatError, match="predicted twice"):
        score_linking(Predictions((predicted(), predicted())), [gold()], kb)
    with pytest.raises(InputFormatError, match="no gold mention has a concept id of this bundle's KB"):
        score_linking(Predictions(()), [Document("1", TEXT, (Annotation(35, 39, "gout", ("D006073",)),))], kb)


def test_link_jsonl_is_read_back_with_failures_and_provenance(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(
        json.dumps({"id": "1", "mentions": [{"start": 0, "end": 6, "text": "Asthma", "concept": "C1", "score": 1.0}],
                    "provenance": {"bundle": "abc"}}) + "\n\n" + json.dumps({"id": "2", "error": "too long"}) + "\n")
    read = read_predictions(path)
    assert read.failed == ("2",)
    [document] = read.documents
    assert (document.id, document.annotations[0].concept_ids, dict(document.infons)) == ("1", ("C1",),
                                                                                         {"babelink_bundle": "abc"})


def test_a_brat_directory_says_which_bundle_linked_it(tmp_path, kb):
    (tmp_path / "1.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "1.ann").write_text("", encoding="utf-8")
    assert dict(read_predictions(tmp_path).documents[0].infons) == {}
    (tmp_path / "babelink-provenance.json").write_text(json.dumps({"bundle": "abc"}), encoding="utf-8")
    predicted = read_predictions(tmp_path)
    assert dict(predicted.documents[0].infons) == {"babelink_bundle": "abc"}
    with pytest.raises(InputFormatError, match="was linked with bundle abc, not with the given one"):
        score_linking(predicted, [gold()], kb, bundle_id="def")
    (tmp_path / "babelink-provenance.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(InputFormatError, match="babelink-provenance.json: expected"):
        read_predictions(tmp_path)


@pytest.mark.parametrize("line", [
    '{"id": "1"}',
    '{"id": "1", "mentions": [{"start": 3, "end": 3, "text": "", "concept": "C1"}]}',
    '{"id": "1", "mentions": [{"start": true, "end": 2}]}',
    "[1]",
])
def test_a_malformed_jsonl_record_is_named_by_file_and_line(tmp_path, line):
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": "0", "mentions": []}\n' + line + "\n")
    with pytest.raises(InputFormatError, match=r"out\.jsonl:2: "):
        read_predictions(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=200))
def test_any_bytes_read_as_predictions_or_a_clear_error(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("predictions") / "out.jsonl"
    path.write_bytes(content)
    try:
        read_predictions(path)
    except BabelinkError as error:
        assert "out.jsonl" in str(error)
