import pytest

from babelink.errors import InvalidInputError
from babelink.lang import parse_languages, to_iso
from babelink.text import MAX_MENTION_CHARS, normalize_name, normalized_mention


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Heart   Attack ", "heart attack"),
        ("Ｈｅａｒｔ", "heart"),  # NFKC folds full-width forms
        ("Trichter-", "trichter"),
        ("Diabète (type 2)", "diabète type 2"),  # accents are kept: they distinguish words
        ("non-small-cell", "non small cell"),
        ("Straße", "strasse"),  # case folding, not just lower()
        ("異物堵塞。", "异物堵塞"),  # traditional Han folded to simplified
        ("黃斑部水腫", "黄斑部水肿"),
        ("アルサス型反応", "アルサス型反応"),  # kana and Japanese-only kanji are left alone
        ("שלום, עולם", "שלום עולם"),
        ("a\u200bb\tc", "a b c"),  # format characters and tabs are delimiters
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
