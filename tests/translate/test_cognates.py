"""Cognate respelling: rules learned from a lexicon's own pairs, kept only where they are precise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from babelink.translate.cognates import CognateRules, fold_accents
from babelink.translate.lexicon import Lexicon
from babelink.translate.render import Renderer, RenderParams

#: Three entries show "-ie" → "-ia" (accents folded); "-ite" → "-itis" twice only.
FRENCH = {"anémie": ("anemia",), "ischémie": ("ischemia",), "septicémie": ("septicemia",),
          "arthrite": ("arthritis",), "gastrite": ("gastritis",), "maladie": ("disease",)}
ENGLISH = frozenset({"anemia", "pneumonia", "myopia", "nephritis", "disease"})


def test_a_word_the_lexicon_lacks_is_respelled_by_a_rule_its_pairs_show():
    rules = CognateRules(FRENCH, ENGLISH)
    assert rules.respell("pneumonie") == "pneumonia"
    assert rules.respell("myopie") == "myopia"


def test_a_rule_shown_by_fewer_than_three_pairs_is_not_used():
    assert CognateRules(FRENCH, ENGLISH).respell("néphrite") is None


def test_a_respelling_must_be_an_english_kb_word():
    assert CognateRules(FRENCH, ENGLISH).respell("cardiopathie") is None


def test_a_rule_wrong_on_most_of_the_lexicons_own_words_is_not_used():
    shown = {"aaaax": ("aaaa",), "bbbbx": ("bbbb",), "ccccx": ("cccc",)}
    false_friends = {"ddddx": ("other",), "ffffx": ("other",), "hhhhx": ("other",), "jjjjx": ("other",)}
    english = frozenset({"dddd", "ffff", "hhhh", "jjjj", "zzzz"})
    assert CognateRules(shown, english).respell("zzzzx") == "zzzz"
    assert CognateRules(shown | false_friends, english).respell("zzzzx") is None  # right 3 times in 7


def test_a_script_other_than_englishs_learns_no_rules():
    russian = {"анемия": ("anemia",), "ишемия": ("ischemia",), "миопия": ("myopia",)}
    rules = CognateRules(russian, ENGLISH)
    assert rules.rules == {} and rules.respell("пневмония") is None


@given(st.text(alphabet="абвгдеёжзийклмнопрстуфхцчшщъыьэюя", max_size=12))
def test_folding_accents_keeps_other_scripts_letters(word):
    assert fold_accents(word) == word


def test_folding_accents_drops_latin_marks():
    assert fold_accents("uvéite hipertensión lungenentzündung") == "uveite hipertension lungenentzundung"


def test_the_renderer_respells_only_words_nothing_else_matches():
    lexicon = Lexicon({"fr": FRENCH | {"aiguë": ("acute",)}})
    renderer = Renderer(lexicon, ENGLISH)
    assert renderer.render("pneumonie aiguë", "fr")[0] == "pneumonia acute"
    assert renderer.render("pneumonie", "fr") == ["pneumonia"]
    assert Renderer(lexicon, ENGLISH, RenderParams(cognates=False)).render("pneumonie", "fr") == []
    # a respelling is no evidence of the mention's language: the guess still finds none
    assert renderer.languages("pneumonie") == []
