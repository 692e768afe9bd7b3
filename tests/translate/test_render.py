"""English renderings: segmentation of unspaced scripts, inflection and compound backoff, senses, languages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from babelink.text import normalize_name
from babelink.translate.lexicon import Lexicon
from babelink.translate.render import Renderer, RenderParams

SENSES = {
    "es": {"infarto": ("infarction", "heart attack"), "de": ("of", "from"), "miocardio": ("myocardium",),
           "enfermedad": ("disease",), "crónico": ("chronic",), "diabetes": ("diabetes",), "tipo": ("type",),
           # stems that take both endings of a backoff: "-es"/"" and "-as"/"-o" are inflections here
           "ciudad": ("city",), "ciudades": ("cities",), "verdad": ("truth",), "verdades": ("truths",),
           "blanco": ("white",), "blancas": ("white",), "negro": ("black",), "negras": ("black",)},
    "de": {"herz": ("heart",), "infarkt": ("infarction",), "lunge": ("lung",), "entzündung": ("inflammation",),
           "diabetes": ("diabetes",), "typ": ("type",)},
    "zh": {"糖尿病": ("diabetes",), "糖尿": ("glycosuria",), "型": ("type",), "高血压": ("hypertension",),
           "和": ("and",)},
    "ja": {"関節": ("joint",), "関節炎": ("arthritis",), "炎": ("inflammation",), "リウマチ": ("rheumatism",),
           "ウマ": ("horse",)},
    "th": {"ความดัน": ("pressure",), "ความ": ("matter",), "โลหิต": ("blood",), "สูง": ("high",)},
    "fi": {"sydän": ("heart",), "vajaatoiminta": ("insufficiency",), "avain": ("key",), "avaimen": ("key's",),
           "puhelin": ("phone",), "puhelimen": ("phone's",)},
    "fr": {"reflux": ("reflux",), "flux": ("flux",), "maladie": ("disease",), "maladies": ("diseases",),
           "patient": ("patient",), "patients": ("patients",)},
    # Hangul: a character is a syllable; "-이" (a particle) follows two other stems here
    "ko": {"천식": ("asthma",), "당뇨병": ("diabetes",), "병원": ("hospital",), "병원이": ("hospital",),
           "학생": ("student",), "학생이": ("student",)},
    "he": {"אסתמה": ("asthma",), "סוכרת": ("diabetes",), "לב": ("heart",), "מסוכר": ("candied",)},
    "ar": {"سكري": ("diabetes",), "ربو": ("asthma",)},
}


@pytest.fixture(scope="module")
def renderer():
    return Renderer(Lexicon({lang: dict(entries) for lang, entries in SENSES.items()}),
                    english_words=["mellitus", "diabetes", "heart", "attack"])


@pytest.mark.parametrize(("text", "lang", "words"), [
    ("2型糖尿病", "zh", ["2", "型", "糖尿病"]),          # the longest entry wins over 糖尿 + 病
    ("糖尿病和高血压", "zh", ["糖尿病", "和", "高血压"]),
    ("リウマチ関節炎", "ja", ["リウマチ", "関節炎"]),     # a katakana run is one word, never リ|ウマ|チ
    ("ความดันโลหิตสูง", "th", ["ความดัน", "โลหิต", "สูง"]),
    ("未知糖尿病", "zh", ["未知", "糖尿病"]),              # unknown characters form one word
])
def test_unspaced_scripts_are_segmented_by_the_lexicon(renderer, text, lang, words):
    assert [word.text for word in renderer.words(text, lang)] == words


def test_thai_segments_never_split_a_grapheme(renderer):
    for word in renderer.words("ความดันสูงมากๆ", "th"):
        assert not word.text[0] in "\u0e31\u0e34\u0e35\u0e36\u0e37\u0e38\u0e39\u0e47\u0e48\u0e49\u0e4a\u0e4b"


def test_renderings_try_reversed_order_then_next_senses_one_word_at_a_time(renderer):
    assert renderer.render("infarto de miocardio", "es") == [
        "infarction of myocardium", "myocardium of infarction", "heart attack of myocardium",
        "infarction from myocardium"]


def test_rendering_count_is_capped():
    capped = Renderer(Lexicon({"es": dict(SENSES["es"])}), [], RenderParams(renderings=1))
    assert capped.render("infarto de miocardio", "es") == ["infarction of myocardium"]


@pytest.mark.parametrize(("text", "lang", "rendering"), [
    ("enfermedades crónicas", "es", "disease chronic"),     # inflected forms back off to their stems
    ("sydämen vajaatoiminta", "fi", "heart insufficiency"),
    ("herzinfarkt", "de", "heart infarction"),               # a compound of two entries
    ("lungenentzündung", "de", "lung inflammation"),         # with a linking "n"
    ("diabetes mellitus tipo 2", "es", "diabetes mellitus type 2"),  # English and digits kept
])
def test_inflection_compounds_and_english(renderer, text, lang, rendering):
    assert renderer.render(text, lang)[0] == rendering


@pytest.mark.parametrize(("text", "lang", "rendering"), [
    ("천식이", "ko", "asthma"),       # a particle after a two-syllable stem
    ("ואסתמה", "he", "asthma"),       # "and" + asthma
    ("והסוכרת", "he", "diabetes"),    # "and the" + diabetes
    ("מסוכרת", "he", "diabetes"),     # "from" + diabetes, before any inflection of "מסוכר"
    ("בלב", "he", "heart"),           # "in" + a two-letter word
    ("السكري", "ar", "diabetes"),     # "the" + diabetes
    ("والربو", "ar", "asthma"),       # "and the" + asthma
])
def test_particles_and_proclitics_are_looked_through(renderer, text, lang, rendering):
    assert renderer.render(text, lang)[0] == rendering


def test_proclitics_need_a_known_word_after_them(renderer):
    assert renderer.render("ובית", "he") == []  # "ו" + "בית": not an entry
    assert renderer.render("بالقلب", "ar") == []


def test_a_backoff_needs_endings_the_lexicon_attests(renderer):
    assert renderer.render("maladie", "fr") == ["disease"] and renderer.render("fluxs", "fr") == ["flux"]
    assert renderer.render("refludan", "fr") == []  # a brand name is not "reflux": no stem takes "-dan" and "-x"
    assert renderer.render("enfermedades", "es") == ["disease"]


def test_short_words_do_not_back_off(renderer):
    assert renderer.render("dex", "es") == []


def test_nothing_to_translate_gives_no_rendering(renderer):
    assert renderer.render("heart attack", None) == []          # English words: no language is guessed
    assert renderer.render("diabetes", "es") == []              # the rendering would be the mention itself
    assert renderer.render("infarto", "en") == []               # Latin script in an English text: English


def test_a_language_without_lexicon_or_in_another_script_is_guessed(renderer):
    assert renderer.languages("infarto", "ru") == ["es"]         # no lexicon for the given language
    assert renderer.languages("糖尿病", "en") == ["zh"]           # Han in an English text
    assert renderer.languages("糖尿病", "es") == ["zh"]           # or a Spanish one
    assert renderer.languages("糖尿病", "zh") == ["zh"] and renderer.languages("infarto", "es") == ["es"]
    assert renderer.render("関節炎", "ja") == ["arthritis"]      # Han is also Japanese: the language given holds


def test_language_is_guessed_from_lexicon_coverage(renderer):
    assert renderer.languages("infarto de miocardio") == ["es"]
    assert renderer.languages("diabetes typ 2") == ["de"]
    assert renderer.languages("糖尿病") == ["zh"]
    assert renderer.languages("zzzz") == []
    assert renderer.render("herzinfarkt") == ["heart infarction"]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
       st.sampled_from([None, "es", "de", "zh", "ja", "th", "fi", "ko", "he", "ar"]))
def test_any_text_renders_without_error(renderer, text, lang):
    normalized = normalize_name(text)
    renderings = renderer.render(normalized, lang)
    assert len(renderings) <= renderer.params.renderings
    assert all(rendering and rendering != normalized for rendering in renderings)
    words = renderer.words(normalized, lang or "es")
    assert "".join(word.text for word in words) == normalized.replace(" ", "")  # segmentation loses nothing
