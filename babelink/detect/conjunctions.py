"""The words that join two items of a list ("and", "or") in a language, from CLDR's list patterns
(Babel): a span with one between its first and last words is usually two mentions run together
("nausea and vomiting", German "Vorhofflimmern und chronischer Niereninsuffizienz"), unless the
name it matched has one too ("head and neck cancer"; `link.documents`).
"""

from __future__ import annotations

from functools import cache

from babelink.text import normalize_name

#: CLDR's list patterns for two items: "and" (`standard`) and "or".
_PATTERN_STYLES = ("standard", "or")


@cache
def conjunctions(lang: str | None) -> frozenset[str]:
    """The normalised conjunctions of `lang` and English (English's alone for None, or a language
    CLDR lacks). Only whole words count: a pattern that writes its conjunction joined to the next
    item (Hebrew "ו", Arabic "و"), or without spaces (Chinese "和", Thai "และ"), or as punctuation
    (Japanese "、") gives none, since a character inside an unspaced span is no sign of two mentions."""
    return _words("en") | (_words(lang) if lang not in (None, "en") else frozenset())


@cache
def _words(lang: str) -> frozenset[str]:
    from babel import Locale, UnknownLocaleError

    try:
        patterns = Locale.parse(lang).list_patterns
    except (UnknownLocaleError, ValueError):
        return frozenset()
    found = set()
    for style in _PATTERN_STYLES:
        pattern = patterns.get(style, {}).get("2", "")
        between = pattern.partition("{0}")[2].partition("{1}")[0]
        word = normalize_name(between)
        if between[:1].isspace() and between[-1:].isspace() and word and " " not in word:
            found.add(word)
    return frozenset(found)
