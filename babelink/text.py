"""String normalisation shared by indexing and querying (000 §4.2: lower case, no delimiters).

Beyond 000's lower-casing, traditional Han characters are folded to simplified ones (OpenCC
`t2s`), as letters are case-folded: Chinese Wikipedia, Taiwanese and Hong Kong text is written
in traditional characters while KBs mostly carry simplified Chinese names (黃斑部水腫 vs
黄斑水肿). Both sides are folded, so Japanese names and mentions stay comparable with each other.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Container, Iterable

import regex

from babelink.errors import InvalidInputError

#: Longest mention `normalize` accepts; longer strings are text, not mentions.
MAX_MENTION_CHARS = 1000
#: Revision of `normalize_name`, recorded by a bundle with the name strings it normalised: 2 removes
#: `_SILENT` characters; 3 folds Turkish "İ" to "i". Raise it with any change that can normalise a
#: string otherwise.
NAME_NORMALIZATION = 3

_SPACE = re.compile(r"\s+")
_WORDS = re.compile(r"[^\W_]+")
# Punctuation (P*), symbols (S*) and control characters become spaces: "Trichter-" == "trichter".
_DELIMITER_CATEGORIES = frozenset({"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Cc"})
#: Characters a word may hold that do not change it: invisible format characters inside a word (a
#: soft hyphen from HTML or a PDF, joiners, directional marks; the zero-width space is a space),
#: Arabic vowel marks and tatweel, Hebrew points, which writers add or leave out at will.
_SILENT = regex.compile(r"[\p{Cf}--\u200b]|[\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4"
                        r"\u06e7\u06e8\u06ea-\u06ed\u0640\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7]",
                        regex.V1)


class _DelimiterTable(dict):
    """`str.translate` table mapping delimiters (and the zero-width space) to spaces and `_SILENT`
    characters to nothing, filled lazily per code point."""

    def __missing__(self, code_point: int) -> int | None:
        char = chr(code_point)
        if _SILENT.match(char):
            value = None
        elif unicodedata.category(char) in _DELIMITER_CATEGORIES or char == "\u200b":
            value = 0x20
        else:
            value = code_point
        self[code_point] = value
        return value


_DELIMITERS = _DelimiterTable()
_HAN_RUN = regex.compile(r"\p{Han}+")


@functools.cache
def _traditional_to_simplified():
    import opencc

    return opencc.OpenCC("t2s")


def fold_case(text: str) -> str:
    """Case folding as names and stop words are compared: `str.casefold`, except that Turkish "İ"
    becomes "i", not "i" and a combining dot above, which no lowercase spelling of the word has
    ("İnce" would not equal "ince"); an "i" carries its dot already."""
    return text.casefold().replace("i\u0307", "i")


def normalize_name(text: str) -> str:
    """NFKC, case-folded, Han folded to simplified, delimiters replaced by spaces, characters that
    leave a word as it is removed ("hyper\u00adtension", "حُمَّى"), whitespace collapsed and stripped."""
    folded = fold_case(unicodedata.normalize("NFKC", text))
    # Only Han runs reach OpenCC: it rejects lone surrogates, and its t2s phrases are all Han.
    folded = _HAN_RUN.sub(lambda run: _traditional_to_simplified().convert(run[0]), folded)
    return _SPACE.sub(" ", folded.translate(_DELIMITERS)).strip()


def normalized_mention(mention: object) -> str:
    """`normalize_name(mention)` of a valid mention; raise `InvalidInputError` naming the problem
    (not a string, over `MAX_MENTION_CHARS`, empty after normalisation, invalid Unicode)."""
    if not isinstance(mention, str):
        raise InvalidInputError(f"mention must be a string, got {type(mention).__name__}")
    if len(mention) > MAX_MENTION_CHARS:
        raise InvalidInputError(
            f"mention of {len(mention):,} characters exceeds the {MAX_MENTION_CHARS:,}-character limit "
            "(use `link` for running text)"
        )
    try:
        mention.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate, e.g. from a JSON "\ud800" escape
        raise InvalidInputError(f"mention {mention!r} is not valid Unicode at character {error.start}") from None
    normalized = normalize_name(mention)
    if not normalized:
        raise InvalidInputError(f"mention {mention!r} is empty after normalisation")
    return normalized


#: Longest word that counts as a short capitals form ("IS", "WAS", "ALL", "AIDS", "COPD").
MAX_CAPITALS_CHARS = 5


def is_short_capitals(name: str) -> bool:
    """A single word of at most `MAX_CAPITALS_CHARS` letters or digits, its letters all capitals.

    Case folding makes such KB names ("IS": immune suppression, "AS": Angelman syndrome) equal to
    function words, so a name string the KB writes only this way matches only mentions that hold
    a word written in capitals (`holds_capitals`)."""
    name = name.strip()
    return len(name) <= MAX_CAPITALS_CHARS and name.isalnum() and name.isupper()


#: Words of letters a text in capitals needs to be read as shouted: a field of one or two ("COPD",
#: "DM II", "CHF") is its abbreviations.
SHOUTED_MIN_WORDS = 3


def written_in_capitals(text: str) -> bool:
    """Whether a text is shouted: its cased letters all capitals, in at least `SHOUTED_MIN_WORDS`
    words ("THE FEVER IS HIGH", a heading), where capitals say nothing of abbreviations."""
    return text.isupper() and sum(1 for word in _WORDS.findall(text) if not word.isdigit()) >= SHOUTED_MIN_WORDS


def holds_capitals(mention: str) -> bool:
    """Whether a mention holds a word of two or more letters or digits written in capitals ("IS",
    "RCC cancer", "congenital DM"): what lets it meet a KB string written only that way
    (`is_short_capitals`), while "is" and "the tumor is benign" do not."""
    return any(len(word) > 1 and word.isupper() for word in _WORDS.findall(mention))


def capitals_in_context(mention: str, context: str, defined: Container[str] = frozenset()) -> bool:
    """`holds_capitals` where capitals say something: in a text itself all capitals (a heading, a
    shouted note: "THE TUMOR IS BENIGN") they do not, unless the text defines the mention as an
    abbreviation (`defined`, its short forms)."""
    return holds_capitals(mention) and (not written_in_capitals(context) or mention in defined)


def comma_list(values: Iterable[str] | None) -> tuple[str, ...]:
    """Option values, each one code or comma-separated codes (`--types T047 --types T191,T048`) →
    the codes, stripped, blank ones left out, in order, each once."""
    return tuple(dict.fromkeys(part.strip() for value in values or () for part in value.split(",") if part.strip()))


def script_of(text: str) -> str:
    """The Unicode script of the first letter (LATIN, CJK, HIRAGANA, CYRILLIC, …), '' without letters."""
    for char in text:
        if char.isalpha():
            return _script_of_letter(char)
    return ""


@functools.cache
def _script_of_letter(char: str) -> str:
    # cached: a build takes the script of each of its name strings (`retrieve.calibration.script_shares`)
    return unicodedata.name(char, "UNKNOWN").split(" ")[0]
