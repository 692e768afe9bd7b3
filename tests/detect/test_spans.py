"""Tokens, stop words, candidate spans and overlap resolution (000 §4.2; 002 §4.4.1)."""

import itertools
import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from babelink.detect.overlaps import resolve_overlaps
from babelink.detect.spans import SpanParams, enumerate_spans
from babelink.detect.stopwords import (
    Boundaries,
    BoundaryStopwords,
    Protected,
    ProtectedByLanguage,
    guess_from_stopwords,
    protected_words,
    stop_words,
)
from babelink.detect.tokenize import joinable, token_texts, tokenize


def _texts(text, stopwords=frozenset(), **params):
    """The spans of `text`: `stopwords` a plain set at both edges, or a language's `Boundaries`."""
    boundaries = stopwords if isinstance(stopwords, Boundaries) else Boundaries.of(stopwords)
    return [span.text for span in enumerate_spans(text, tokenize(text), boundaries, SpanParams(**params))]


@pytest.mark.parametrize("text", [
    "Patients with COVID-19 and HbA1c > 7 %",
    "患者有2型糖尿病和高血压。",
    "החולה סובל מסוכרת ויתר לחץ דם",
    "\u200fمريض السكري\u200e 🙂 mixed 混合 script",  # with right-to-left and left-to-right marks
    "e\u0301te\u0301 cafe\u0301",  # combining accents stay inside their word
])
def test_token_offsets_index_the_original_text(text):
    for token in tokenize(text):
        assert text[token.start : token.end] == token.text


def test_word_and_character_tokens():
    assert [t.text for t in tokenize("COVID-19 and HbA1c, i.v. dosing")] == [
        "COVID-19",
        "and",
        "HbA1c",
        "i.v",
        "dosing",
    ]
    assert [t.text for t in tokenize("2型糖尿病")] == ["2", "型", "糖", "尿", "病"]
    thai = tokenize("โรคเบาหวาน")
    assert all(t.unspaced and t.weight == 0.5 for t in thai) and "".join(t.text for t in thai) == "โรคเบาหวาน"
    assert [t.text for t in tokenize("e\u0301te\u0301")] == ["e\u0301te\u0301"]


def test_elided_clitics_are_tokens_of_their_own():
    text = "l'hypertension d’épilepsie dell'arteria L'Hôpital O'Brien Crohn's aujourd'hui"
    assert [(t.text, t.elided) for t in tokenize(text)] == [
        ("l'", True), ("hypertension", False), ("d’", True), ("épilepsie", False), ("dell'", True),
        ("arteria", False), ("L'", True), ("Hôpital", False), ("O'Brien", False), ("Crohn's", False),
        ("aujourd'hui", False)]
    spans = _texts("traitement de l'hypertension artérielle", frozenset({"de"}))
    assert "hypertension artérielle" in spans
    assert not any(span.startswith("l'") or span.endswith("l'") for span in spans), "a clitic is a stop word"


def test_a_clitic_whose_apostrophe_is_spaced_out_is_still_one():
    # tokenised corpora (QUAERO) and extracted text space the apostrophe out; a possessive stays a word
    text = "syndrome d ’ immunodéficience acquise, maladie d’ Alzheimer, qu ’ il, years' experience"
    assert [(t.text, t.elided) for t in tokenize(text) if "'" in t.text or "’" in t.text] == [
        ("d ’", True), ("d’", True), ("qu ’", True)]
    spans = _texts(text)
    assert "syndrome d ’ immunodéficience acquise" in spans and "maladie d’ Alzheimer" in spans
    assert "immunodéficience acquise" in spans and "years" in spans  # a clitic would edge no span


@given(st.text(st.sampled_from("ldequalDLÉ'’ -hàeiouxy,é\u0301"), max_size=40))
def test_tokens_with_apostrophes_are_ordered_exact_and_spans_never_open_or_close_on_a_clitic(text):
    tokens = tokenize(text)
    assert all(text[t.start : t.end] == t.text for t in tokens)
    assert token_texts(text) == [t.text for t in tokens]
    assert all(left.end <= right.start for left, right in itertools.pairwise(tokens))
    clitics = [t for t in tokens if t.elided]
    for span in enumerate_spans(text, tokens, Boundaries()):
        assert span.start not in {t.start for t in clitics} and span.end not in {t.end for t in clitics}


def test_a_slash_separates_words_a_span_may_cross_and_a_lost_space_ends_a_sentence():
    text = "PMH: asthma/COPD, preeclampsia/eclampsia and diabetes mellitus.Asthma, E.coli, Dr.Smith, 2.5 mg"
    assert token_texts(text) == ["PMH", "asthma", "COPD", "preeclampsia", "eclampsia", "and", "diabetes",
                                 "mellitus", "Asthma", "E.coli", "Dr.Smith", "2.5", "mg"]
    spans = _texts(text, frozenset({"and"}))
    assert {"asthma", "COPD", "asthma/COPD", "preeclampsia/eclampsia", "eclampsia"} <= set(spans)
    assert "mellitus.Asthma" not in spans and "diabetes mellitus" in spans and "Asthma" in spans


@pytest.mark.parametrize("separator", ["\n", "\r", "\v", "\f", "\x85", "\u2028", "\u2029"])
def test_every_line_break_is_a_barrier(separator):
    text = f"heart{separator}failure"
    assert _texts(text) == ["heart", "failure"]


def test_punctuation_and_paragraphs_are_barriers():
    text = "fever, cough\nsore throat\n\nhead  ache"
    tokens = tokenize(text)
    assert not joinable(text, tokens[0], tokens[1])  # comma
    assert not joinable(text, tokens[1], tokens[2])  # line break
    assert joinable(text, tokens[2], tokens[3])
    assert not joinable(text, tokens[3], tokens[4])  # paragraph break
    assert joinable(text, tokens[4], tokens[5])  # spaces
    assert "fever cough" not in _texts(text)


def test_spans_respect_word_and_character_budgets():
    assert _texts("acute renal failure syndrome", max_words=2) == [
        "acute", "acute renal", "renal", "renal failure", "failure", "failure syndrome", "syndrome"]
    spans = _texts("慢性阻塞性肺疾病", max_chars=3)
    assert max(len(span) for span in spans) == 3 and "肺疾病" in spans
    assert "x" not in _texts("x ray"), "single Latin letters are not spans"
    assert "痛" in _texts("痛"), "a single Han character can be a mention"


def test_spans_neither_start_nor_end_with_a_stop_word():
    spans = _texts("the patient has type ii diabetes", frozenset({"the", "has", "ii"}))
    assert "patient" in spans and "type ii diabetes" in spans
    assert not any(s.split()[0] in {"the", "has", "ii"} or s.split()[-1] in {"the", "has", "ii"} for s in spans)


def test_numerals_are_never_stop_words():
    boundaries = BoundaryStopwords().for_language("es")  # stopwords-iso's Spanish list has the digits
    assert "diabetes mellitus tipo 2" in _texts("El paciente tiene diabetes mellitus tipo 2.", boundaries)
    assert not any(word.isnumeric() for lang in ("es", "zh", "en") for word in stop_words(lang))


def test_a_turkish_stop_word_opening_with_a_dotted_capital_i_is_still_one():
    boundaries = BoundaryStopwords().for_language("tr")  # "için" (for) is in stopwords-iso's Turkish list
    spans = _texts("İçin hipertansiyon tedavisi", boundaries)
    assert "hipertansiyon tedavisi" in spans
    assert not any(span.startswith("İçin") for span in spans)


def test_acronyms_are_never_stop_words():
    spans = _texts("children with ALL and all others", frozenset({"all", "and", "with"}))
    assert "ALL" in spans and "all" not in spans


def test_kb_boundary_words_are_protected():
    names = ["High blood pressure", "High fever", "Small cell carcinoma", "Small intestine", "Type II diabetes"] + [
        "Carcinoma of the lung", "Disease of the heart", "ALL", "Fracture of femur", "Tumor of the skin"] * 3
    protected = protected_words(names, frozenset({"high", "small", "of", "the", "all", "ii", "and"}))
    assert protected.opening == {"high", "small"} and not protected.closing  # "II" is an acronym
    boundaries = BoundaryStopwords({"en": protected}).for_language("en")
    assert "high" not in boundaries.no_start and "high" in boundaries.no_end  # it opens names, never closes one
    assert {"the", "of"} <= boundaries.no_start & boundaries.no_end
    assert boundaries.never_alone == {"high", "small"} & stop_words("en")


def test_a_letter_that_closes_names_is_no_article_at_their_start():
    names = ["Hepatitis A", "Vitamin A deficiency", "Vitamin A", "Influenza A", "Blood group A", "B cell lymphoma",
             "Hepatitis B", "B cell leukemia", "Fever", "Headache"]
    boundaries = BoundaryStopwords({"en": protected_words(names, stop_words("en"))}).for_language("en")
    spans = _texts("She has a fever, hepatitis A and a B cell lymphoma. Asthma is a disease.", boundaries)
    assert "hepatitis A" in spans and "fever" in spans and "B cell lymphoma" in spans
    assert not [span for span in spans if span.startswith("a ") or span.endswith(" a")]  # the article edges nothing
    assert "ASTHMA IS A" not in _texts("ASTHMA IS A DISEASE", boundaries)  # in capitals, "A" may be the article


def test_only_names_in_the_texts_language_protect_its_stop_words():
    turkish = [("El anomalisi", "tr"), ("El tremoru", "tr"), ("Kısa el", "tr"), ("Geniş el", "tr")]
    spanish = [("Cáncer de colon", "es"), ("Hipertensión arterial", "es")]
    protected = ProtectedByLanguage(turkish + spanish)
    assert sorted(protected) == ["es", "tr"] and protected.get("de") is None
    assert protected["es"] == Protected()  # the Turkish names do not protect the Spanish article
    assert protected["tr"].opening | protected["tr"].closing <= stop_words("tr")  # only stop words are counted
    boundaries = BoundaryStopwords(protected)
    assert "el" in boundaries.for_language("es").no_start and "el" not in boundaries.for_language("tr").no_start
    assert "el cáncer de colon" not in _texts("el cáncer de colon", boundaries.for_language("es"))
    assert "el" in BoundaryStopwords().for_language("es").no_start, "no KB: the plain list"


def test_protected_stop_words_never_make_a_span_alone():
    text = "the risk is high blood pressure"
    spans = {span.text for span in enumerate_spans(text, tokenize(text),
                                                    Boundaries(frozenset({"the"}), frozenset({"the"}),
                                                               frozenset({"is", "high"})))}
    assert "high blood pressure" in spans and "is high" in spans
    assert "high" not in spans and "is" not in spans


@pytest.mark.parametrize("text, lang", [
    ("El paciente tiene diabetes mellitus tipo 2 y una hipertensión arterial.", "es"),
    ("The patient has diabetes and it was treated with insulin.", "en"),
    ("Le patient a un diabète de type 2 et une hypertension.", "fr"),
    ("Der Patient hat Diabetes und wird mit Insulin behandelt.", "de"),
    ("患者有2型糖尿病和高血压。", "zh"),
    ("高血圧症と心筋梗塞の患者", "ja"),
])
def test_language_guess_from_stop_words_and_script(text, lang):
    assert guess_from_stopwords(tokenize(text)) == lang


def test_language_guess_breaks_a_tie_between_related_languages_toward_a_preferred_one():
    text = "У пациента сахарный диабет и бронхиальная астма."  # "у" and "и": Russian and Bulgarian
    assert guess_from_stopwords(tokenize(text), prefer={"ru"}) == "ru"
    assert guess_from_stopwords(tokenize(text), prefer={"bg"}) == "bg"
    assert guess_from_stopwords(tokenize("El paciente tiene diabetes."), prefer={"ru"}) == "es"  # no tie: evidence wins


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["и", "у", "на", "el", "la", "de", "the", "and", "der", "xyz", "диабет"]), max_size=12),
       st.sets(st.sampled_from(["ru", "bg", "uk", "es", "pt", "en", "de"])))
def test_a_preference_only_ever_breaks_ties(words, prefer):
    tokens = tokenize(" ".join(words))
    unbiased, preferred = guess_from_stopwords(tokens), guess_from_stopwords(tokens, prefer=prefer)
    assert (unbiased is None) == (preferred is None)
    if preferred is not None and preferred != unbiased:  # both cover the same number of words
        assert preferred in prefer
        assert sum(w in stop_words(preferred) for w in words) == sum(w in stop_words(unbiased) for w in words)


def test_language_guess_abstains_without_evidence():
    assert guess_from_stopwords(tokenize("BRCA1 p53 HbA1c")) is None
    assert guess_from_stopwords([]) is None


@dataclass
class _Item:
    start: int
    end: int
    score: float


def test_overlaps_best_and_longest():
    items = [_Item(0, 17, 0.91), _Item(0, 8, 0.99), _Item(9, 17, 0.95), _Item(20, 25, 0.5)]
    assert [(i.start, i.end) for i in resolve_overlaps(items, "best")] == [(0, 8), (9, 17), (20, 25)]
    assert [(i.start, i.end) for i in resolve_overlaps(items, "longest")] == [(0, 17), (20, 25)]
    assert resolve_overlaps([], "best") == []
    with pytest.raises(ValueError, match="overlap policy"):
        resolve_overlaps(items, "first")


def test_overlap_resolution_never_returns_overlapping_items():
    generator = random.Random(0)
    items = [
        _Item(s, s + generator.randint(1, 9), generator.random())
        for s in (generator.randint(0, 80) for _ in range(300))
    ]
    chosen = resolve_overlaps(items, "best")
    assert all(a.end <= b.start for a, b in itertools.pairwise(chosen))
    assert max(items, key=lambda i: i.score) in chosen
