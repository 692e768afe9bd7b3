"""Tokens with exact character offsets into the original text, for any script.

Space-delimited scripts (Latin, Cyrillic, Greek, Hebrew, Arabic, Hangul, …) give word tokens:
runs of letters, marks and digits, joined across an inner hyphen, apostrophe or dot ("COVID-19",
"HbA1c", "i.v."), except where a dot ends a lower-case word before a capitalised one, a sentence
whose space was lost ("mellitus.Asthma"). A slash separates words but is no barrier: each of
"asthma/COPD" can be a mention, and so can "preeclampsia/eclampsia" whole (`joinable`). An elided
clitic is a token of its own: the
article or preposition of French, Italian or Catalan glued by an apostrophe to a word that
starts with a vowel or h ("l'hypertension", "d'épilepsie", "dell'arteria"), so that the word
after it can start a mention (`Token.elided`). Tokenised corpora and extracted text space the
apostrophe out ("maladie d ’ Alzheimer" in QUAERO, "d’ insuline" in Mantra): a one-letter clitic
or "qu" is one then too, so that the mention runs across it; longer words are not (English
"years' experience" is a possessive). Scripts written without spaces give one token
per grapheme cluster (a character with its combining marks): Han and kana, and Thai, Lao,
Khmer and Myanmar, where a cluster is a smaller unit than a CJK character (`Token.weight`).

Offsets index the string as given: nothing is normalised before tokenising, so right-to-left
text, combining sequences and compatibility characters keep their positions. Directional and
zero-width format characters (U+200E, U+200F, U+200B, …) are neither tokens nor barriers.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

_UNSPACED_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\u30FC\u3005"  # ー (prolonged sound) and 々 (iteration mark)
_UNSPACED_SEA = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
#: The characters of scripts written without spaces, as the body of a `regex` character class.
UNSPACED_SCRIPTS = _UNSPACED_CJK + _UNSPACED_SEA
_WORD_CHAR = rf"[[\p{{L}}\p{{M}}\p{{N}}]--[{UNSPACED_SCRIPTS}]]"
#: What an elided clitic is glued to: a word opening with a vowel or h.
_ELISION_HOST = "(?i:[aeiouyhàâäæéèêëîïìíôöœòóùûüú])"
_TOKEN = regex.compile(
    rf"(?P<cjk>[{_UNSPACED_CJK}]\p{{M}}*)"
    rf"|(?P<sea>[{_UNSPACED_SEA}]\p{{M}}*)"
    rf"|(?P<elided>\p{{L}}{{1,5}}['’](?={_ELISION_HOST})"
    rf"|(?<![\p{{L}}\p{{M}}\p{{N}}])(?:\p{{L}}|(?i:qu)) ?['’](?= ?{_ELISION_HOST}))"
    rf"|(?P<word>{_WORD_CHAR}+(?:(?:['’‐\-]|\.(?!(?<=\p{{Ll}}\p{{Ll}}\.)\p{{Lu}}\p{{Ll}})){_WORD_CHAR}+)*)",
    regex.V1,
)
_FORMAT_CHARS = regex.compile(r"\p{Cf}+")
#: Characters that end a line: no mention crosses one (form feeds are page breaks in extracted text).
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")

#: Weight of one token against a span's `max_words` / `max_chars` budget (see `detect.spans`).
UNSPACED_SEA_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class Token:
    start: int
    end: int
    text: str
    unspaced: bool  # one grapheme of a script written without spaces
    weight: float = 1.0

    @property
    def elided(self) -> bool:
        """An elided clitic ("l'", "qu'", "dell'"): a function word, whatever the stop list says."""
        return self.text[-1] in "'’"


def tokenize(text: str) -> list[Token]:
    tokens = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        weight = UNSPACED_SEA_WEIGHT if kind == "sea" else 1.0
        tokens.append(Token(match.start(), match.end(), match.group(), kind in ("cjk", "sea"), weight))
    return tokens


def token_texts(text: str) -> list[str]:
    """The texts of `tokenize(text)`, without building tokens (counting the words of many names)."""
    return [match.group() for match in _TOKEN.finditer(text)]


def joinable(text: str, left: Token, right: Token) -> bool:
    """Whether a mention may run from `left` into `right`: only spaces, nothing, or a slash
    lie between them. Other punctuation, line breaks (a title and its abstract, list items,
    table rows, pages) and sentence ends are barriers no mention crosses."""
    gap = _FORMAT_CHARS.sub("", text[left.end : right.start])
    return gap in ("", "/") or (gap.isspace() and LINE_BREAKS.isdisjoint(gap))
