"""Cognates: a word its lexicon lacks, respelled as an English KB word by rules the lexicon teaches.

Medical words are largely shared Greek and Latin, respelled by each language in regular ways:
French "pneumonie" is "pneumonia", "uvéite" is "uveitis", Spanish "-ción" is "-tion". A lexicon
holds many such pairs, so each language's respelling rules are learned from its own entries, not
written by hand: a single-word entry and its first English sense that share a stem (accents
folded, at least `min_stem` letters) give the rule "this ending → that ending" ("anémie" →
"anemia": "e" → "a"). A rule is used when at least `MIN_PAIRS` entries show it and it is right
on the lexicon's own words at least `MIN_PRECISION` of the time: of the entries with that ending
whose respelling is an English KB word, the share whose respelling is one of their senses. That
test is what keeps false friends out; a respelling must also be a word of the KB's English names.
A language whose script differs from English learns no rules (no entry shares a stem with its
sense), so rules only ever fire in Latin-script languages.
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

#: Longest ending a rule rewrites, on either side.
MAX_ENDING = 4
#: Entries that must show a rule, and how often it must be right on the lexicon's own words.
MIN_PAIRS = 3
MIN_PRECISION = 0.5
#: Words whose respelling a long-running process keeps (a service meets new words forever).
REMEMBERED_WORDS = 100_000


def fold_accents(word: str) -> str:
    """`word` without combining marks ("uvéite" → "uveite"); other scripts' letters are left alone
    (a Cyrillic "й" keeps its breve: it is a letter of its own, not an accented "и")."""
    decomposed = unicodedata.normalize("NFD", word)
    return unicodedata.normalize("NFC", "".join(
        char for position, char in enumerate(decomposed)
        if not (unicodedata.combining(char) and position and decomposed[position - 1].isascii())))


class CognateRules:
    """The respelling rules of one language's lexicon (`entries`: word → English senses, best first)."""

    def __init__(self, entries: Mapping[str, tuple[str, ...]], english_words: frozenset[str], min_stem: int = 4):
        self.english_words = english_words
        self.min_stem = min_stem
        senses: dict[str, set[str]] = defaultdict(set)
        for word, found in entries.items():
            if " " not in word:
                senses[fold_accents(word)].update(found)
        self.senses = dict(senses)
        # the folded words spelled backwards, sorted: the words with one ending are one range of it
        self._reversed = sorted(word[::-1] for word in self.senses if len(word) > min_stem)
        counts = Counter(rule for word, found in entries.items() if " " not in word and found
                         for rule in [self._rule(fold_accents(word), found[0])] if rule is not None)
        rules: dict[str, tuple[str, ...]] = defaultdict(tuple)
        for (ending, english), count in counts.most_common():
            if count >= MIN_PAIRS:
                rules[ending] += (english,)
        self.rules = dict(rules)  # ending → English endings, most attested first
        self._precision = functools.lru_cache(maxsize=None)(self._measured_precision)
        self.respell = functools.lru_cache(maxsize=REMEMBERED_WORDS)(self._respell)

    def _rule(self, word: str, english: str) -> tuple[str, str] | None:
        """The (ending, English ending) pair of `word` and its sense when they share a stem."""
        if " " in english:
            return None
        stem = 0
        while stem < min(len(word), len(english)) and word[stem] == english[stem]:
            stem += 1
        if stem < self.min_stem or len(word) - stem > MAX_ENDING or len(english) - stem > MAX_ENDING:
            return None
        return word[stem:], english[stem:]

    def _respell(self, word: str) -> str | None:
        """The English KB word `word` respells to by the most precise rule that yields one, or None
        (`respell`, which remembers the last `REMEMBERED_WORDS` words asked)."""
        folded = fold_accents(word)
        found = []
        for length in range(min(MAX_ENDING, len(folded) - self.min_stem), -1, -1):
            ending = folded[len(folded) - length:]
            for english in self.rules.get(ending, ()):
                respelled = folded[: len(folded) - length] + english
                if respelled in self.english_words:
                    precision = self._precision(ending, english)
                    if precision >= MIN_PRECISION:
                        found.append((precision, -length, respelled))
        return max(found)[2] if found else None

    def _measured_precision(self, ending: str, english: str) -> float:
        """Of the lexicon's words ending in `ending` whose respelling is an English KB word or one
        of their senses, the share whose respelling is one of their senses."""
        right = total = 0
        for word in self._ending(ending):
            respelled = word[: len(word) - len(ending)] + english
            senses = self.senses[word]
            if respelled in senses or respelled in self.english_words:
                total += 1
                right += respelled in senses
        return right / total if total else 0.0

    def _ending(self, ending: str) -> Iterable[str]:
        start, end = ending_range(self._reversed, ending)
        return (word[::-1] for word in self._reversed[start:end])


def ending_range(reversed_words: list[str], ending: str) -> tuple[int, int]:
    """The slice of `reversed_words` (words spelled backwards, sorted) that ends with `ending`."""
    reversed_ending = ending[::-1]
    start = bisect.bisect_left(reversed_words, reversed_ending)
    return start, bisect.bisect_left(reversed_words, reversed_ending + "\U0010ffff", start)
