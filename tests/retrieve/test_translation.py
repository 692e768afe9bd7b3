"""Retrieval through English renderings: the fusion rule, and a real bundle that stores lexicons."""

from __future__ import annotations

import json

import pytest
from support import babelink

from babelink.bundle.store import build_bundle, load_bundle
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.documents import LinkParams
from babelink.linker import Linker
from babelink.retrieve.candidate import Candidate
from babelink.retrieve.translation import CONFIDENT_SCORE, TranslatingGenerator, fuse
from babelink.translate import read_lexicons


def candidates(*scored):
    return [Candidate(concept_id, concept_id.lower(), concept_id.lower(), score) for concept_id, score in scored]


def test_fuse_keeps_each_concepts_best_score_and_says_which_rendering_found_it():
    original = candidates(("A", 0.90), ("B", 0.85))
    translated = [("heart disease", candidates(("B", 0.99), ("C", 0.95))), ("cardiac disease", candidates(("B", 0.97)))]
    fused = fuse(original, translated)
    assert [(c.concept_id, c.score, c.translated) for c in fused] == [
        ("B", 0.99, "heart disease"), ("C", 0.95, "heart disease"), ("A", 0.90, None)]


def test_fuse_never_demotes_what_the_mention_matched_better():
    original = candidates(("A", 0.97))
    fused = fuse(original, [("garbled", candidates(("A", 0.40), ("Z", 0.60)))])
    assert [(c.concept_id, c.score, c.translated) for c in fused] == [("A", 0.97, None), ("Z", 0.60, "garbled")]


def test_fuse_without_renderings_is_the_original():
    original = candidates(("A", 0.9))
    assert fuse(original, []) == original


class _Recording:
    """A base generator with fixed answers that records the queries it is asked."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def generate(self, normalized, top_k, capitals=None, langs=None):
        self.asked.append(list(normalized))
        return [self.answers.get(text, []) for text in normalized]


class _Renderer:
    def render(self, text, lang=None):
        return [f"{text} in english"]


class _NoNames:
    def lookup(self, text):
        return None


def test_only_mentions_not_answered_confidently_are_rendered():
    base = _Recording({"sure": candidates(("A", 0.99)), "unsure": candidates(("B", 0.90)),
                       "unsure in english": candidates(("C", 0.95))})
    fused = TranslatingGenerator(base, _Renderer(), _NoNames(), confident=0.975).generate(
        ["sure", "unsure", "unknown"], top_k=2)
    assert base.asked == [["sure", "unsure", "unknown"], ["unsure in english", "unknown in english"]]
    assert [[c.concept_id for c in found] for found in fused] == [["A"], ["C", "B"], []]


def test_link_renders_every_span_below_its_own_threshold(bundle):
    linker = Linker.open(bundle)
    assert linker.documents.ranker.confident == CONFIDENT_SCORE == linker.link_params.link_threshold
    stricter = linker.with_options(link_params=LinkParams(link_threshold=0.995))
    assert stricter.documents.ranker.confident == 0.995  # a span at 0.99 may still be lifted over it
    assert stricter.generator.confident == CONFIDENT_SCORE  # `normalize` is not slowed down
    looser = Linker.open(bundle, link_threshold=0.9)
    assert looser.documents.ranker.confident == CONFIDENT_SCORE


KB = {"C1": ["Heart disease", "Cardiopathy"], "C2": ["Lung disease"], "C3": ["Diabetes mellitus"],
      "C4": ["Asthma", "Bronchial asthma"], "C5": ["Heart"]}


@pytest.fixture(scope="module")
def lexicon_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lexicons")
    (folder / "en-es.tsv").write_text("heart\tcorazón\ndisease\tenfermedad\nof\tdel\nlung\tpulmón\n"
                                      # stems taking "-es" and "": what lets "enfermedades" back off
                                      "city\tciudad\ncities\tciudades\ntruth\tverdad\ntruths\tverdades\n",
                                      encoding="utf-8")
    (folder / "en-ru.tsv").write_text("diabetes mellitus\tсахарный диабет\nsugar\tсахар\nasthma\tастма\n"
                                      "bronchial\tбронхиальная\npatient\tпациент\nand\tи\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, lexicon_dir):
    builder = KnowledgeBaseBuilder()
    for concept_id, names in KB.items():
        for position, name in enumerate(names):
            builder.add_name(concept_id, name, lang="en", preferred=position == 0)
    out = tmp_path_factory.mktemp("bundle") / "b"
    return build_bundle(builder.build(), out, retriever="sparse", translations=read_lexicons([lexicon_dir]))


def test_bundle_records_and_loads_its_lexicons(bundle):
    loaded = load_bundle(bundle)
    translations = loaded.manifest["translations"]
    assert translations["languages"] == {"es": 8, "ru": 6}
    assert {source["file"] for source in translations["sources"]} == {"en-es.tsv", "en-ru.tsv"}
    assert "translations/lexicon.parquet" in loaded.manifest["files"]
    assert loaded.lexicon.entries("ru")["сахарный диабет"] == ("diabetes mellitus",)
    assert isinstance(Linker(loaded).generator, TranslatingGenerator)


def test_the_english_words_are_stored_at_build_and_refreshed_by_an_update(bundle, tmp_path):
    from babelink.bundle.update import update_bundle
    from babelink.translate import english_words

    loaded = load_bundle(bundle)
    assert "translations/english_words.txt" in loaded.manifest["files"]
    assert loaded.renderer.english_words == english_words(loaded.kb) >= {"heart", "bronchial", "mellitus"}
    builder = KnowledgeBaseBuilder()
    builder.add_name("C6", "Gout", lang="en")
    updated = load_bundle(update_bundle(bundle, builder.build(), tmp_path / "u"), verify=True)
    assert updated.renderer.english_words == loaded.renderer.english_words | {"gout"}


def test_normalize_searches_through_the_rendering(bundle):
    linker = Linker.open(bundle)
    best = linker.normalize("enfermedades del corazón", top_k=3, lang="es")[0]
    assert best.concept_id == "C1" and best.translated == "disease of heart"
    guessed = linker.normalize("сахарный диабет", top_k=1)[0]  # language guessed from the lexicons
    assert guessed.concept_id == "C3" and guessed.translated == "diabetes mellitus"
    assert linker.normalize("Heart disease", top_k=1)[0].translated is None  # a KB name: not rendered


@pytest.mark.parametrize("lang", ["ru", None])  # None: its stop words are Bulgarian's as much as Russian's
def test_link_finds_mentions_in_a_script_without_kb_names(bundle, lang):
    linker = Linker.open(bundle, link_threshold=0.9)
    linked = linker.link("У пациента сахарный диабет и бронхиальная астма.", lang=lang)
    found = {(m.text, m.concept.concept_id) for m in linked.mentions}
    assert ("сахарный диабет", "C3") in found and ("бронхиальная астма", "C4") in found
    for mention in linked.mentions:
        assert linked.text[mention.start : mention.end] == mention.text
        assert mention.to_dict().get("translated") == mention.concept.translated  # the rendering that found it
    assert all(mention.concept.translated for mention in linked.mentions)  # no Russian KB names


def test_cli_build_and_normalize_with_translations(tmp_path, lexicon_dir):
    kb = tmp_path / "kb.tsv"
    kb.write_text("id\tname\tlang\n" + "".join(f"{cid}\t{name}\ten\n" for cid, names in KB.items() for name in names),
                  encoding="utf-8")
    out = tmp_path / "bundle"
    built = babelink("build", "--kb", kb, "--out", out, "--retriever", "sparse", "--translations", lexicon_dir)
    assert built.returncode == 0, built.stderr
    assert "lexicons for es, ru" in built.stderr
    result = babelink("normalize", "--bundle", out, "--lang", "es", "--top-k", "1", "enfermedad del pulmón")
    record = json.loads(result.stdout)
    assert record["candidates"][0]["id"] == "C2" and record["candidates"][0]["translated"] == "disease of lung"


def test_cli_bad_lexicon_is_one_clear_line(tmp_path):
    kb = tmp_path / "kb.tsv"
    kb.write_text("id\tname\nC1\tHeart\n", encoding="utf-8")
    bad = tmp_path / "en-es.tsv"
    bad.write_text("heart\tcorazón\nbroken line\n", encoding="utf-8")
    result = babelink("build", "--kb", kb, "--out", tmp_path / "b", "--retriever", "sparse", "--translations", bad)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "en-es.tsv:2: expected 'english<TAB>foreign'" in result.stderr
    assert not (tmp_path / "b").exists()


RUSSIAN_TEXT = "У пациента сахарный диабет и бронхиальная астма."


@pytest.fixture
def english_only_kb(tmp_path):
    kb = tmp_path / "kb.tsv"
    kb.write_text("id\tname\tlang\n" + "".join(f"{cid}\t{name}\ten\n" for cid, names in KB.items() for name in names),
                  encoding="utf-8")
    return kb


def test_a_lexicon_added_to_a_built_bundle_lets_it_read_the_language(tmp_path, english_only_kb, lexicon_dir):
    from babelink.bundle.update import add_translations

    built = babelink("build", "--kb", english_only_kb, "--out", tmp_path / "b", "--retriever", "sparse")
    assert built.returncode == 0, built.stderr
    before = Linker.open(tmp_path / "b", link_threshold=0.9).link(RUSSIAN_TEXT)
    assert before.mentions == () and before.lang == "ru"
    updated = add_translations(tmp_path / "b", read_lexicons([lexicon_dir / "en-ru.tsv"]), tmp_path / "u")
    loaded = load_bundle(updated, verify=True)
    assert loaded.manifest["translations"]["languages"] == {"ru": 6}
    assert [added["files"] for added in loaded.manifest["translations_added"]] == [["en-ru.tsv"]]
    assert loaded.renderer.english_words >= {"heart", "mellitus"}  # stored for a bundle that had no lexicon
    linked = Linker.open(updated, link_threshold=0.9).link(RUSSIAN_TEXT)
    assert {(m.text, m.concept.concept_id) for m in linked.mentions} == {("сахарный диабет", "C3"),
                                                                          ("бронхиальная астма", "C4")}
    assert "translations" not in load_bundle(tmp_path / "b").manifest  # --out leaves the original as it was
    again = add_translations(updated, read_lexicons([lexicon_dir / "en-ru.tsv"]))
    assert load_bundle(again).manifest["build_id"] == loaded.manifest["build_id"]  # nothing new: untouched


def test_an_added_lexicon_leads_the_bundles_own_senses(bundle, tmp_path, lexicon_dir):
    from babelink.bundle.update import add_translations

    glossary = tmp_path / "cardio.tsv"
    glossary.write_text("cardiac\tcorazón\nkidney\triñón\n", encoding="utf-8")
    updated = load_bundle(add_translations(bundle, read_lexicons([f"es={glossary}"]), tmp_path / "u"), verify=True)
    assert updated.lexicon.entries("es")["corazón"] == ("cardiac", "heart")
    assert updated.lexicon.entries("es")["riñón"] == ("kidney",)
    assert updated.lexicon.entries("ru") == load_bundle(bundle).lexicon.entries("ru")
    assert [source["file"] for source in updated.manifest["translations"]["sources"]] == [
        "cardio.tsv", "en-es.tsv", "en-ru.tsv"]
    with_known = add_translations(bundle, read_lexicons([lexicon_dir / "en-ru.tsv", f"es={glossary}"]), tmp_path / "k")
    assert [source["file"] for source in load_bundle(with_known).manifest["translations"]["sources"]] == [
        "en-ru.tsv", "cardio.tsv", "en-es.tsv"]  # the file the bundle had is listed once


def test_cli_link_says_which_documents_it_read_in_a_language_the_bundle_cannot_read(tmp_path, english_only_kb,
                                                                                   lexicon_dir):
    out = tmp_path / "b"
    assert babelink("build", "--kb", english_only_kb, "--out", out, "--retriever", "sparse").returncode == 0
    linked_anyway = "У пациента давно Asthma, и он принимает лекарства каждый день."  # an English KB word in it
    unread = babelink("link", "--bundle", out, RUSSIAN_TEXT, "Bronchial asthma and heart disease.", linked_anyway)
    assert unread.returncode == 0, unread.stderr
    assert [json.loads(line)["lang"] for line in unread.stdout.splitlines()] == ["ru", "en", "ru"]
    assert "babelink: no mention in documents read as ru (1 document): the bundle has no names and no lexicon" in (
        unread.stderr)
    assert "babelink update --translations en-XX.tsv" in unread.stderr

    bad = tmp_path / "en-ru.tsv"
    bad.write_text("asthma\tастма\nbroken line\n", encoding="utf-8")
    refused = babelink("update", "--bundle", out, "--translations", bad)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "en-ru.tsv:2: expected 'english<TAB>foreign'" in refused.stderr
    assert "translations" not in load_bundle(out).manifest  # the bundle untouched

    added = babelink("update", "--bundle", out, "--translations", lexicon_dir / "en-ru.tsv")
    assert added.returncode == 0 and "lexicons for ru (6 words)" in added.stderr, added.stderr
    read = babelink("link", "--bundle", out, "--link-threshold", "0.9", RUSSIAN_TEXT)
    assert read.returncode == 0 and "read as" not in read.stderr, read.stderr
    assert {m["text"] for m in json.loads(read.stdout)["mentions"]} == {"сахарный диабет", "бронхиальная астма"}
