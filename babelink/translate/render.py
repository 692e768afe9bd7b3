"""English renderings of a normalised mention through a bilingual lexicon, word by word.

A rendering is a cheap translation that an English-heavy KB can be searched with: each word is
replaced by one of its English senses, and several renderings try the words' next senses. The
word-level translation knowledge of 001 §2.2 carries across languages where the multilingual
encoder's own alignment is weak (the "infarto de miocardio" → "infarction of myocardium" kind).

- Words: spaced scripts split on spaces; Chinese, Japanese and Thai runs are segmented by
  forward maximum matching against the lexicon's own entries (`segment`).
- Inflection: a word missing from the lexicon backs off to the entry that shares its longest
  prefix, when what differs is a short ending on either side and the lexicon itself shows that
  pair of endings on other stems ("enfermedades" → "enfermedad": "-es" and "" end many entries
  of one stem; the brand name "refludan" does not become "reflux": no French stem takes both
  "-dan" and "-x"); a long word that still has no match is tried as a compound of two entries
  ("herzinfarkt" → "herz" + "infarkt"). Stems are counted in letters: a Hangul character is a
  syllable, so a Korean stem may be two characters ("천식이" → "천식", asthma). Hebrew and Arabic
  write some function words joined to the next one: a word is first looked up without them
  ("ואסתמה", and asthma → "אסתמה"; `PROCLITICS`).
- English stays English: a word the lexicon lacks but the KB's English names contain
  ("mellitus", "HbA1c") is kept as it is.
- Cognates: a spaced word nothing else matches is respelled as an English KB word by the rules
  its language's lexicon teaches ("pneumonie" → "pneumonia", `translate.cognates`), else kept.
  Only when rendering: a respelling is no evidence of which language a mention is written in.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import regex

from babelink.detect.tokenize import UNSPACED_SCRIPTS
from babelink.text import script_of
from babelink.translate.cognates import CognateRules, ending_range
from babelink.translate.lexicon import Lexicon

#: Runs of scripts written without spaces, which lexicon-driven segmentation splits into words.
_UNSPACED_RUN = regex.compile(rf"[{UNSPACED_SCRIPTS}]+")
#: A run of katakana (group 1) or of the other unspaced scripts.
_KATAKANA_SPLIT = regex.compile(r"([\p{Katakana}\u30FC]+)|[^\p{Katakana}\u30FC]+")
_GRAPHEME = regex.compile(r"\X")
_HANGUL = regex.compile(r"\p{Hangul}")
#: Longest phrase entry matched as one word.
MAX_PHRASE_WORDS = 6
#: Longest ending an inflection backoff compares, and how many other stems must take both endings.
MAX_ENDING = 5
MIN_ATTESTING_STEMS = 2


def _sequences(*slots: tuple[str, ...]) -> tuple[str, ...]:
    """Every non-empty concatenation of one choice per slot ("" skips it), shortest first."""
    found = {"".join(parts) for parts in itertools.product(*slots)} - {""}
    return tuple(sorted(found, key=lambda prefix: (len(prefix), prefix)))


#: Function words that Hebrew and Arabic write joined to the next word, as the sequences they
#: may form: Hebrew "and", "that"/"when", a preposition ("in", "as", "to", "from"), "the"; Arabic
#: "and"/"so", a preposition ("with", "as", "for"), "the" (and "for the", contracted "لل"). A
#: word the lexicon lacks is looked up without them before any other backoff.
PROCLITICS = {
    "he": _sequences(("", "ו"), ("", "ש", "כש", "מש"), ("", "ב", "כ", "ל", "מ"), ("", "ה")),
    "ar": _sequences(("", "و", "ف"), ("", "ب", "ك", "ل", "لل"), ("", "ال")),
}


@dataclass(frozen=True)
class RenderParams:
    """`senses`: senses tried per word; `renderings`: English queries per mention at most;
    `min_stem`: shortest shared prefix an inflected word may back off to, or a cognate shares with
    its English word; `min_compound`: shortest word tried as a compound (each part at least
    `min_stem` characters); `cognates`: respell words nothing matches (`translate.cognates`)."""

    senses: int = 3
    renderings: int = 5
    min_stem: int = 4
    min_compound: int = 8
    cognates: bool = True


@dataclass(frozen=True)
class _Vocabulary:
    """One language's lexicon entries and what lookups into them need."""

    entries: dict[str, tuple[str, ...]]
    sorted_keys: list[str]  # for prefix search (`Renderer._stem`)
    longest_chars: int  # longest entry, in characters (unspaced segmentation)
    longest_words: int  # longest entry, in words, capped at MAX_PHRASE_WORDS (phrase matching)
    min_stem: int  # shortest stem an ending is attested on (`RenderParams.min_stem`)
    _attested: dict[tuple[str, str], bool] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: dict[str, tuple[str, ...]], min_stem: int) -> _Vocabulary:
        """`min_stem` counts letters (`_in_characters`)."""
        words = "".join(entry for entry in entries if " " not in entry)
        return cls(entries, sorted(entries), max(map(len, entries), default=1),
                   min(MAX_PHRASE_WORDS, max((key.count(" ") + 1 for key in entries), default=1)),
                   _in_characters(min_stem, words))

    @functools.cached_property
    def reversed_words(self) -> list[str]:
        """The single-word entries spelled backwards, sorted: the words that end with an ending
        are one range of it (`cognates.ending_range`). Short words ("re", "ma") would attest any ending,
        so only words of at least `min_stem` characters are kept."""
        return sorted(entry[::-1] for entry in self.entries if " " not in entry and len(entry) >= self.min_stem)

    def attested(self, ending: str, other: str) -> bool:
        """Whether at least `MIN_ATTESTING_STEMS` stems (of `min_stem` characters or more) of the
        lexicon's single words take both endings (of `MAX_ENDING` characters at most). Counted on
        the words with the rarer ending, on first use of the pair: a language costs one sort."""
        key = (ending, other) if ending <= other else (other, ending)
        if key in self._attested:
            return self._attested[key]
        found = 0
        if max(map(len, key)) <= MAX_ENDING and not any(" " in part for part in key):
            ranges = {part: ending_range(self.reversed_words, part) for part in key}
            rare = min(key, key=lambda part: ranges[part][1] - ranges[part][0])
            common = key[1] if rare == key[0] else key[0]
            for position in range(*ranges[rare]):
                stem = self.reversed_words[position][len(rare):][::-1]
                found += len(stem) >= self.min_stem and stem + common in self.entries
                if found >= MIN_ATTESTING_STEMS:
                    break
        self._attested[key] = found >= MIN_ATTESTING_STEMS
        return self._attested[key]


@dataclass(frozen=True)
class Word:
    text: str
    senses: tuple[str, ...]  # English renderings, best first; (text,) when kept as it is
    found: bool = True  # in the lexicon (exactly, by its stem, or as a compound)
    unmatched: bool = False  # a spaced word neither the lexicon nor the KB's English names know

    @property
    def translated(self) -> bool:
        return self.senses != (self.text,)


class Renderer:
    """Renders normalised mentions of one language at a time into English (`render`)."""

    def __init__(self, lexicon: Lexicon, english_words: Iterable[str], params: RenderParams = RenderParams()):
        self.lexicon = lexicon
        self.english_words = frozenset(english_words)
        self.params = params
        self._vocabularies: dict[str, _Vocabulary] = {}
        self._cognates: dict[str, CognateRules] = {}
        self._lexicon_scripts: dict[str, frozenset[str]] = {}
        self.words = functools.lru_cache(maxsize=200_000)(self._words)

    def render(self, normalized: str, lang: str | None = None) -> list[str]:
        """Up to `params.renderings` distinct English renderings, other than the mention itself:
        first every word's best sense, then one word at a time its next senses. `lang` None:
        through each language `languages` finds, alternating between them."""
        per_language = [self._renderings(normalized, code) for code in self.languages(normalized, lang)]
        texts = dict.fromkeys(text for group in itertools.zip_longest(*per_language) for text in group if text)
        texts.pop(normalized, None)
        return list(texts)[: self.params.renderings]

    def _renderings(self, normalized: str, lang: str) -> list[str]:
        words = self.words(normalized, lang)
        if self.params.cognates and any(word.unmatched for word in words):
            words = tuple(self._respelled(word, lang) if word.unmatched else word for word in words)
        if not any(word.translated for word in words):
            return []
        first = tuple(word.senses[0] for word in words)
        # A short phrase reversed: many languages put the modifier after its head ("colesterol
        # alto" → "cholesterol high" → "high cholesterol"); measured to help in every visible one.
        reordered = [first[::-1]] if 2 <= len(first) <= 3 else []
        renderings = [first, *reordered] + [first[:position] + (word.senses[rank],) + first[position + 1 :]
                                            for rank in range(1, self.params.senses)
                                            for position, word in enumerate(words) if rank < len(word.senses)]
        return [" ".join(rendering) for rendering in renderings]

    def languages(self, normalized: str, lang: str | None = None) -> list[str]:
        """The lexicon languages to render a mention from: `lang` when given and the mention is
        written in a script of its lexicon (none for English, or a language without a lexicon,
        in the script of the KB's English names); else, as for a mention of unknown language, none
        for a mention whose words are all English KB words, and otherwise the languages whose
        lexicon knows the largest share of its characters (several on a tie: a short mention is
        often a word of several languages). So "糖尿病" in an English or French text, or in
        one said to be Cantonese, is read as Chinese."""
        if lang is not None and script_of(normalized) in self._scripts(lang):
            return [lang] if lang in self.lexicon.languages else []
        if all(word in self.english_words for word in normalized.split()):
            return []
        coverage = {code: self.coverage(normalized, code) for code in self.lexicon.languages}
        best = max(coverage.values(), default=0.0)
        return [code for code, share in coverage.items() if share == best] if best > 0 else []

    def _scripts(self, lang: str) -> frozenset[str]:
        """The scripts `lang` is written in, as far as the bundle knows: its lexicon entries'
        (English: Latin); none for a language it has no lexicon for."""
        if lang not in self._lexicon_scripts:
            written = self.lexicon.entries(lang) if lang in self.lexicon.languages else ()
            self._lexicon_scripts[lang] = frozenset(map(script_of, written)) - {""} or (
                frozenset({"LATIN"}) if lang == "en" else frozenset())
        return self._lexicon_scripts[lang]

    def coverage(self, normalized: str, lang: str) -> float:
        """Share of the mention's characters in words found in the lexicon of `lang`."""
        words = self.words(normalized, lang)
        total = sum(len(word.text) for word in words)
        return sum(len(word.text) for word in words if word.found) / total if total else 0.0

    def _words(self, normalized: str, lang: str) -> tuple[Word, ...]:
        words: list[Word] = []
        position = 0
        for run in _UNSPACED_RUN.finditer(normalized):
            words += [self._word(token, lang) for token in self.phrases(normalized[position : run.start()], lang)]
            words += [self._word(token, lang, spaced=False) for token in self.segment(run[0], lang)]
            position = run.end()
        words += [self._word(token, lang) for token in self.phrases(normalized[position:], lang)]
        return tuple(words)

    def phrases(self, text: str, lang: str) -> list[str]:
        """The words of spaced text, where the longest run of words that is itself an entry (a
        glossary's "infarto agudo de miocardio") stays together."""
        tokens = text.split()
        vocabulary = self._vocabulary(lang)
        entries, longest = vocabulary.entries, vocabulary.longest_words
        out: list[str] = []
        start = 0
        while start < len(tokens):
            end = next((end for end in range(min(len(tokens), start + longest), start + 1, -1)
                        if " ".join(tokens[start:end]) in entries), start + 1)
            out.append(" ".join(tokens[start:end]))
            start = end
        return out

    def segment(self, run: str, lang: str) -> list[str]:
        """Split an unspaced run into lexicon entries covering as many characters as possible,
        in as few words as possible (dynamic programming over grapheme boundaries). Characters
        no entry covers form unknown words between them; a katakana run is one word (a
        transliterated loanword, which sub-words of it would mistranslate)."""
        return [word for part in _KATAKANA_SPLIT.finditer(run)
                for word in ([part[0]] if part[1] else self._segment_unspaced(part[0], lang))]

    def _segment_unspaced(self, run: str, lang: str) -> list[str]:
        vocabulary = self._vocabulary(lang)
        entries, longest = vocabulary.entries, vocabulary.longest_chars
        cuts = [match.start() for match in _GRAPHEME.finditer(run)] + [len(run)]
        # best[i]: (uncovered characters, words) of the best split of run[:cuts[i]], and its previous cut
        best: list[tuple[tuple[int, int], int]] = [((0, 0), -1)] + [((len(run) + 1, 0), -1)] * (len(cuts) - 1)
        for end in range(1, len(cuts)):
            for start in range(end - 1, -1, -1):
                piece = run[cuts[start] : cuts[end]]
                if len(piece) > longest and end - start > 1:
                    break
                known = piece in entries
                if not known and end - start > 1:
                    continue
                (uncovered, words), _ = best[start]
                cost = (uncovered + (0 if known else len(piece)), words + 1)
                if cost < best[end][0]:
                    best[end] = (cost, start)
        pieces: list[tuple[str, bool]] = []
        end = len(cuts) - 1
        while end > 0:
            start = best[end][1]
            piece = run[cuts[start] : cuts[end]]
            pieces.append((piece, piece in entries))
            end = start
        return _merge_unknown(reversed(pieces))

    def _word(self, token: str, lang: str, spaced: bool = True) -> Word:
        entries = self._vocabulary(lang).entries
        if token in entries:
            return Word(token, entries[token][: self.params.senses])
        if token in self.english_words or not spaced or token.isdigit():
            return Word(token, (token,), found=False)
        host = self._without_proclitics(token, lang)
        if host is not None:
            return Word(token, entries[host][: self.params.senses])
        stem = self._stem(token, lang)
        if stem is not None:
            return Word(token, entries[stem][: self.params.senses])
        parts = self._compound(token, lang)
        if parts is not None:
            return Word(token, (" ".join(entries[part][0] for part in parts),))
        return Word(token, (token,), found=False, unmatched=True)

    def _respelled(self, word: Word, lang: str) -> Word:
        """`word` as the English KB word its language's cognate rules respell it to, if any."""
        if lang not in self._cognates:
            self._cognates[lang] = CognateRules(self.lexicon.entries(lang), self.english_words, self.params.min_stem)
        english = self._cognates[lang].respell(word.text)
        return word if english is None else Word(word.text, (english,), found=False)

    def _without_proclitics(self, token: str, lang: str) -> str | None:
        """The longest entry `token` ends with after one of its language's proclitic sequences
        (`PROCLITICS`: "ואסתמה" is "ו", and, + "אסתמה", asthma), at least 2 characters long."""
        entries = self._vocabulary(lang).entries
        return next((token[len(prefix):] for prefix in PROCLITICS.get(lang, ())
                     if token.startswith(prefix) and len(token) - len(prefix) >= 2 and token[len(prefix):] in entries),
                    None)

    def _stem(self, token: str, lang: str) -> str | None:
        """The entry sharing the longest prefix (at least `min_stem`) with `token`, when each
        side's remaining ending is short (a third of the word, at least 3 characters) and the
        lexicon attests that pair of endings on other stems (`_Vocabulary.attested`)."""
        vocabulary = self._vocabulary(lang)
        min_stem = self._min_stem(token)
        if len(token) <= min_stem:
            return None
        keys = vocabulary.sorted_keys
        slack = min(MAX_ENDING, max(3, len(token) // 3))
        for length in range(len(token), max(min_stem, len(token) - slack) - 1, -1):
            prefix = token[:length]
            index = bisect.bisect_left(keys, prefix)
            matches = []
            while index < len(keys) and keys[index].startswith(prefix):
                if len(keys[index]) - length <= slack and vocabulary.attested(token[length:], keys[index][length:]):
                    matches.append(keys[index])
                index += 1
            if matches:
                return min(matches, key=lambda key: (len(key), key))  # the bare stem before its inflections
        return None

    def _min_stem(self, token: str) -> int:
        return _in_characters(self.params.min_stem, token)

    def _compound(self, token: str, lang: str) -> tuple[str, str] | None:
        """`token` as two lexicon entries, the second as long as possible (compound heads
        come last in the languages that write compounds as one word); a linking "s" or "n"
        between them may be dropped ("lungen|entzündung", "infektions|krankheit")."""
        if len(token) < self.params.min_compound:
            return None
        entries = self._vocabulary(lang).entries
        shortest = self.params.min_stem - 1
        for cut in range(shortest, len(token) - shortest + 1):
            head, tail = token[:cut], token[cut:]
            if tail not in entries:
                continue
            for modifier in (head, head[:-1] if head[-1:] in "sn" else None):
                if modifier and len(modifier) >= shortest and modifier in entries:
                    return modifier, tail
        return None

    def _vocabulary(self, lang: str) -> _Vocabulary:
        if lang not in self._vocabularies:
            self._vocabularies[lang] = _Vocabulary.of(self.lexicon.entries(lang), self.params.min_stem)
        return self._vocabularies[lang]


def _in_characters(letters: int, text: str) -> int:
    """A length of `letters` letters as characters of `text`: half as many when most of it is
    Hangul, whose every character is a syllable of two or three letters ("천식이" is "천식",
    asthma, and a particle)."""
    return -(-letters // 2) if text and len(_HANGUL.findall(text)) > len(text) / 2 else letters


def _merge_unknown(pieces: Iterable[tuple[str, bool]]) -> list[str]:
    """Words of a segmentation, adjacent unknown pieces joined into one word."""
    words: list[str] = []
    previous_known = True
    for piece, known in pieces:
        if not known and not previous_known:
            words[-1] += piece
        else:
            words.append(piece)
        previous_known = known
    return words
