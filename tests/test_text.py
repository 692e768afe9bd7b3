import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babelink.errors import InvalidInputError
from babelink.lang import check_language, parse_languages, to_iso
from babelink.text import MAX_MENTION_CHARS, holds_capitals, normalize_name, normalized_mention


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Heart   Attack ", "heart attack"),
        ("Ｈｅａｒｔ", "heart"),  # NFKC folds full-width forms
        ("Trichter-", "trichter"),
        ("Diabète (type 2)", "diabète type 2"),  # accents are kept: they distinguish words
        ("non-small-cell", "non small cell"),
        ("Straße", "strasse"),  # case folding, not just lower()
        ("İŞİTME İnce", "işitme ince"),  # Turkish dotted capital I: no combining dot left behind
        ("異物堵塞。", "异物堵塞"),  # traditional Han folded to simplified
        ("黃斑部水腫", "黄斑部水肿"),
        ("アルサス型反応", "アルサス型反応"),  # kana and Japanese-only kanji are left alone
        ("שלום, עולם", "שלום עולם"),
        ("a\u200bb\tc", "a b c"),  # the zero-width space and tabs are delimiters
        ("hyper\u00adten\u200dsion\ufeff", "hypertension"),  # soft hyphen, joiner, BOM: the word is one
        ("حُمَّى الكُولِيرا", "حمى الكوليرا"), ("حمـــى", "حمى"),  # Arabic vowel marks and tatweel
        ("שָׁלוֹם", "שלום"),  # Hebrew points
        ("!!!", ""),
    ],
)
def test_normalize_name(raw, expected):
    assert normalize_name(raw) == expected


def test_traditional_and_simplified_chinese_names_match():
    assert normalize_name("後天性免疫不全症候群") == normalize_name("后天性免疫不全症候群")
    assert normalize_name("濕疹") == normalize_name("湿疹")
    assert normalize_name("\ud800濕疹") == "\ud800湿疹"  # a lone surrogate (undecodable input) is kept, not fatal


def test_normalized_mention_rejects_bad_mentions():
    assert normalized_mention("Asthma") == "asthma"
    with pytest.raises(InvalidInputError, match="empty"):
        normalized_mention(" - ")
    with pytest.raises(InvalidInputError, match="limit"):
        normalized_mention("a" * (MAX_MENTION_CHARS + 1))
    with pytest.raises(InvalidInputError, match="string"):
        normalized_mention(None)


def test_language_codes():
    assert to_iso("SPA") == "es" and to_iso("es") == "es" and to_iso("NNA") == "nna"
    assert parse_languages(["es,ENG", "zh"]) == frozenset({"es", "en", "zh"})
    assert parse_languages(None) is None
    with pytest.raises(InvalidInputError, match="--lang: 'english' is not a language code"):
        parse_languages(["english,es"])


@pytest.mark.parametrize(("given", "expected"), [
    ("en", "en"), (" EN ", "en"), ("ENG", "en"), ("eng", "en"), ("en-US", "en"), ("pt_BR", "pt"),
    ("zh-Hans-CN", "zh"), ("FRE", "fr"), ("fra", "fr"), ("deu", "de"), ("yor", "yo"), ("haw", "haw"), (None, None),
    ("iw", "he"), ("in-ID", "id"), ("yo", "yo"),
    ("cmn", "zh"), ("arb", "ar"), ("cat", "ca"), ("glg", "gl"), ("nob", "nb"), ("cmn-Hans", "zh"),  # CLDR
    ("und", None), ("MUL", None), ("zxx", None),  # no one language: guessed
])
def test_language_codes_a_user_types(given, expected):
    assert check_language(given) == expected


@pytest.mark.parametrize("given", ["english", "e", "", "en US", "fr-", "日本語", "12", "zz", "qq-QQ"])
def test_words_that_are_not_language_codes_name_the_field(given):
    with pytest.raises(InvalidInputError, match=f"--lang: {re.escape(repr(given))} is not a language code"):
        check_language(given, "--lang")


@given(st.text(max_size=20))
def test_check_language_gives_a_short_code_or_a_clear_error(text):
    try:
        code = check_language(text)
    except InvalidInputError as error:
        assert str(error).startswith("lang: ")
    else:
        assert code is None or (code.isascii() and code.isalpha() and code.islower() and 2 <= len(code) <= 3)


@pytest.mark.parametrize(("mention", "holds"), [
    ("IS", True), ("RCC cancer", True), ("congenital DM", True), ("COPD-2", True),
    ("is", False), ("The tumor is benign", False), ("type I diabetes", False), ("Ménière", False)])
def test_a_mention_holds_capitals_when_one_of_its_words_is_written_so(mention, holds):
    assert holds_capitals(mention) is holds
