"""Language guessing: the n-gram classifier where it is sure, stop words where it is not."""

from __future__ import annotations

import pytest
import stopwordsiso
from hypothesis import given, settings
from hypothesis import strategies as st

from babelink.detect.language import MIN_CONFIDENCE, _identifier, guess_language
from babelink.detect.stopwords import guess_from_stopwords
from babelink.detect.tokenize import tokenize


def _guess(text: str, prefer=()) -> str | None:
    return guess_language(text, tokenize(text), prefer)


@pytest.mark.parametrize("text, lang", [
    ("El paciente tiene diabetes mellitus tipo 2 e hipertensión arterial.", "es"),
    ("The patient has diabetes and it was treated with insulin.", "en"),
    ("Etude electromyographique d'un cas de toxoplasmose.", "fr"),  # stop words alone said English
    ("Der Patient hat eine Lungenentzündung und Asthma.", "de"),
    ("Paciente com pneumonia e hipertensão arterial.", "pt"),
    ("Paziente con polmonite e ipertensione arteriale.", "it"),
    ("У пациента сахарный диабет и бронхиальная астма.", "ru"),  # Bulgarian shares its stop words
    ("החולה סובל מסוכרת ואסתמה.", "he"),
    ("患者有2型糖尿病和高血压。", "zh"),
    ("高血圧症と心筋梗塞の患者", "ja"),
    ("ผู้ป่วยเป็นโรคเบาหวานและความดันโลหิตสูง", "th"),
    ("환자는 당뇨병과 천식이 있다.", "ko"),
])
def test_the_classifier_reads_sentences_in_many_scripts(text, lang):
    assert _guess(text) == lang


@pytest.mark.parametrize("text", ["Severe chronic asthma.", "BRCA1 p53 HbA1c", "Bovins, ovins", ""])
def test_a_text_the_classifier_is_unsure_of_is_left_to_its_stop_words(text):
    assert _identifier().classify(text)[1] < MIN_CONFIDENCE
    assert _guess(text, {"en"}) == guess_from_stopwords(tokenize(text), {"en"})


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_a_guess_is_a_language_with_stop_words_or_none(text):
    assert _guess(text) in {None, *stopwordsiso.langs()}
