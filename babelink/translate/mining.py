"""A bilingual lexicon mined from the KB itself, for KBs (and the embedded default) without one.

A multilingual KB names many concepts both in English and in another language (ICD-10 titles in
eleven languages, UMLS's MSHSPA or MDRFRE atoms): every such concept is a pair of aligned phrases.
A foreign word and an English word that keep appearing in the same concepts' names translate
each other: words are linked one to one within each concept, strongest association (Dice over
concepts) first, and a pair's score is the Dice coefficient of its links (competitive linking,
Melamed 2000; 001 §2.2 takes translation pairs from dictionaries, this takes them from the KB).
Each foreign word keeps its best English words as senses, best first, so "hipertensión" renders
as "hypertension" and "agudo" as "acute".

Association alone misleads where an English word is common and its foreign twin rare: French
"systémique" met "pseudoscleroderma" in more concepts, proportionally, than "systemic", which far
more English names use. Medical words are mostly shared Greek and Latin, so a pair spelled alike is
evidence of its own: the same word once accents are folded ("arterial" in a Spanish and an English
name of one concept: once is enough), then cognates (the same first letters, Simard, Foster &
Isabelle 1992; `MiningParams.cognate_prefix`) link before any other pair of their concept and rank
above the other senses. A cognate met in one concept only is kept where the word has senses of its
own, ahead of them: French "artérielle" meets "arterial" in one HPO label and "pressure" in two
ICD-10 titles (*tension artérielle*), and renders as "arterial" first. Of the mined Latin-script
words that the MUSE dictionaries list, up to 14 points more have a first sense MUSE gives
(benchmarks/mined_lexicon.py).

Chinese and Japanese names have no spaces to split words on, and the segmentation a lexicon is
meant to provide is not there yet: their Han runs give every character n-gram of up to
`MAX_HAN_CHARS` as a candidate word, and a katakana run is one word. One such word often names
what English says in two, so a word linked to one English word takes the two-word phrase around
it where the two nearly always come together ("糖尿病", *diabetes mellitus*). Within a concept a
character belongs to one linked word, so once "糖尿病" has its sense, its own "糖尿" takes none;
at equal association the longer n-gram links first. Thai, Lao, Khmer and Burmese words are longer
than such n-grams and are not mined.

Function words are mined like the rest. Stop-word lists are written for search, not for naming
diseases: stopwords-iso's English list holds *low*, *high*, *right*, *small* and *first*, without
which "presión baja" has no "low" and "droite" no "right"; and "de" links to "of" by association,
so "cáncer de mama" renders as "cancer of breast", which the encoder ranks with *breast cancer*
as closely as `link` requires. Only spelling is no evidence for them: a function word written as
an English one ("de", "la", "con", "der") is a coincidence, so a language's stop words take no
kinship.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import regex

from babelink.detect.stopwords import stop_words
from babelink.detect.tokenize import UNSPACED_SCRIPTS
from babelink.errors import BabelinkError
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name
from babelink.translate.cognates import fold_accents
from babelink.translate.lexicon import KNOWN_LANGUAGES, Lexicon, LexiconSource

#: Names with any of these scripts are not split on spaces.
_UNSPACED = regex.compile(rf"[{UNSPACED_SCRIPTS}]")
#: Scripts without spaces that are mined all the same: Han runs as n-grams, katakana runs whole.
_HAN_RUN = regex.compile(r"\p{Han}+")
_KATAKANA_RUN = regex.compile(r"[\p{Katakana}\u30FC]{2,}")
_SOUTHEAST_ASIAN = regex.compile(r"[\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
#: Longest Han n-gram mined: Chinese and Japanese medical words are one to four characters.
MAX_HAN_CHARS = 4
_WORD = regex.compile(r"\p{L}")
#: The key under which a concept's English two-word phrases are kept (offered to unspaced names only).
_ENGLISH_PHRASES = "en phrases"
#: Share of a foreign word's co-occurrences with an English word that must fall within one
#: phrase around it for the phrase to be the sense (`_phrase_around`).
PHRASE_SHARE = 0.9
#: Where one concept's candidate word occurs in its names: (name number, first character, end).
#: Empty for words of spaced names, which are whole tokens and cannot overlap.
Occurrences = tuple[tuple[int, int, int], ...]
#: How alike a pair is spelled (`_kinship`): the same word, or cognates.
SAME_WORD, COGNATES = 2, 1
#: The lexicon source's file name in the manifest.
MINED = "mined from the KB's names"


@dataclass(frozen=True)
class MiningParams:
    """`min_dice`: weakest association kept; `min_concepts`: concepts a pair must share (one shared
    concept is chance); `senses`: English words kept per foreign word, best first;
    `cognate_prefix`: letters two words must begin with alike to be taken for cognates (Simard et
    al. 1992; 0: association alone, not even the same word)."""

    min_dice: float = 0.2
    min_concepts: int = 2
    senses: int = 3
    cognate_prefix: int = 4


def mine_lexicon(kb: KnowledgeBase, params: MiningParams = MiningParams()) -> Lexicon:
    """English senses of the words of every non-English language in `kb` (Thai, Lao, Khmer and
    Burmese names left out)."""
    words_by_concept = _words_by_concept(kb)
    senses: dict[str, dict[str, tuple[str, ...]]] = {}
    sources = []
    digest = kb.content_hash()
    for lang in sorted({lang for by_lang in words_by_concept.values() for lang in by_lang} - {"en", _ENGLISH_PHRASES}):
        entries = _mine_language(words_by_concept, lang, params)
        if entries:
            senses[lang] = entries
            pairs = sum(len(found) for found in entries.values())
            sources.append(LexiconSource(lang, MINED, digest, pairs))
    return Lexicon(senses, sources)


def _words_by_concept(kb: KnowledgeBase) -> dict[str, dict[str, dict[str, Occurrences]]]:
    """concept → language → the candidate words of its names in that language, each with where
    it occurs when it is a Han n-gram."""
    words: dict[str, dict[str, dict[str, Occurrences]]] = defaultdict(lambda: defaultdict(dict))
    unspaced_names: Counter[tuple[str, str]] = Counter()  # numbers each concept's Chinese or Japanese names
    names = kb.names
    for concept_id, name, lang in zip(names.column("concept_id").to_pylist(), names.column("name").to_pylist(),
                                      names.column("lang").to_pylist()):
        if lang not in KNOWN_LANGUAGES or _SOUTHEAST_ASIAN.search(name):
            continue
        found = words[concept_id][lang]
        normalized = normalize_name(name)
        if not _UNSPACED.search(name):
            tokens = normalized.split()
            is_word = [len(token) > 1 and _WORD.search(token) is not None for token in tokens]
            found.update((token, ()) for token, keep in zip(tokens, is_word) if keep)
            if lang == "en":
                words[concept_id][_ENGLISH_PHRASES].update((f"{tokens[at]} {tokens[at + 1]}", ())
                                                            for at in range(len(tokens) - 1)
                                                            if is_word[at] and is_word[at + 1])
            continue
        unspaced_names[concept_id, lang] += 1
        for word, places in _unspaced_words(normalized, unspaced_names[concept_id, lang]).items():
            found[word] = found.get(word, ()) + places
    return words


def _unspaced_words(normalized: str, number: int) -> dict[str, Occurrences]:
    """The candidate words of a Chinese or Japanese name (the concept's name `number`): every
    Han n-gram of up to `MAX_HAN_CHARS`, and every katakana run."""
    found: dict[str, Occurrences] = {}
    for run in _HAN_RUN.finditer(normalized):
        for start in range(run.start(), run.end()):
            for end in range(start + 1, min(run.end(), start + MAX_HAN_CHARS) + 1):
                gram = normalized[start:end]
                found[gram] = found.get(gram, ()) + ((number, start, end),)
    for run in _KATAKANA_RUN.finditer(normalized):
        found.setdefault(run[0], ())
    return found


def _mine_language(words_by_concept: dict[str, dict[str, dict[str, Occurrences]]], lang: str,
                   params: MiningParams) -> dict[str, tuple[str, ...]]:
    """Competitive linking (Melamed 2000): within each concept, word pairs are linked one to one,
    strongest Dice first, so "agudo" in *infarto agudo del miocardio* links to "acute" once
    "infarto" and "miocardio" have taken "infarction" and "myocardial", although it co-occurs
    with all three; a Han n-gram links only where none of its characters is taken, and takes the
    English phrase around its word where it nearly always meets the phrase (`_phrase_around`).
    The same word links first, then cognates (never a stop word: spelling is no evidence for
    those), then the rest. A sense's score is the Dice coefficient of its links; the same word
    comes first, then cognates, both kept below `min_dice`, and the same word from a single
    concept; so is a cognate from a single concept, for a word that keeps other senses."""
    aligned = []
    for by_lang in words_by_concept.values():
        if by_lang.get(lang) and by_lang.get("en"):
            unspaced = any(by_lang[lang].values())
            aligned.append((by_lang[lang], by_lang["en"], by_lang.get(_ENGLISH_PHRASES, {}) if unspaced else {}))
    foreign_counts: Counter[str] = Counter()
    english_counts: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for foreign, english, phrases in aligned:
        foreign_counts.update(foreign.keys())
        english_counts.update([*english, *phrases])
        together.update((f, e) for f in foreign for e in [*english, *phrases])

    def dice(pair: tuple[str, str], count: int) -> float:
        return 2 * count / (foreign_counts[pair[0]] + english_counts[pair[1]])

    folded = {word: fold_accents(word) for word in foreign_counts}
    function_words = stop_words(lang)

    def kinship(foreign: str, english: str) -> int:
        return 0 if foreign in function_words else _kinship(folded[foreign], english, params.cognate_prefix)

    links: Counter[tuple[str, str]] = Counter()
    for foreign, english, phrases in aligned:
        pairs = sorted(((f, e) for f in foreign for e in english),
                       key=lambda pair: (-kinship(*pair), -dice(pair, together[pair]),
                                         -len(pair[0]) * bool(foreign[pair[0]]), pair))
        taken_foreign: set[str] = set()
        taken_english: set[str] = set()
        taken_chars: set[tuple[int, int]] = set()
        for f, e in pairs:
            if f in taken_foreign or e in taken_english:
                continue
            free = [(n, start, end) for n, start, end in foreign[f]
                    if not any((n, char) in taken_chars for char in range(start, end))]
            if foreign[f] and not free:
                continue
            sense = _phrase_around(f, e, phrases, taken_english, foreign, together, dice)
            links[f, sense] += 1
            taken_foreign.add(f)
            taken_english.update(sense.split())
            taken_chars.update((n, char) for n, start, end in free for char in range(start, end))
    scored: dict[str, list[tuple[int, float, int, str]]] = defaultdict(list)
    once_met: list[tuple[str, tuple[int, float, int, str]]] = []
    for pair, count in links.items():
        kin, score = kinship(*pair), dice(pair, count)
        if (count >= params.min_concepts or kin == SAME_WORD) and (score >= params.min_dice or kin):
            scored[pair[0]].append((-kin, -score, -count, pair[1]))
        elif kin == COGNATES:
            once_met.append((pair[0], (-kin, -score, -count, pair[1])))
    for foreign, sense in once_met:  # a further sense of a word kept, never a word's only one
        if foreign in scored:
            scored[foreign].append(sense)
    return {foreign: tuple(english for *_, english in sorted(found)[: params.senses])
            for foreign, found in sorted(scored.items())}


def _kinship(folded: str, english: str, prefix: int) -> int:
    """How alike a foreign word (accents folded) and an English word are spelled: `SAME_WORD`,
    `COGNATES` (both of `prefix` letters or more and beginning alike: "systemique", "systemic"),
    or 0; always 0 across scripts, and with `prefix` 0 (association alone)."""
    if prefix <= 0:
        return 0
    if folded == english:
        return SAME_WORD
    return COGNATES if len(folded) >= prefix <= len(english) and folded[:prefix] == english[:prefix] else 0


def _phrase_around(foreign: str, word: str, phrases: Iterable[str], taken: set[str], others: Iterable[str],
                   together: Counter[tuple[str, str]], dice: Callable[[tuple[str, str], int], float]) -> str:
    """The concept's two-word English phrase around `word` that `foreign` meets in at least
    `PHRASE_SHARE` of the concepts where it meets `word`, the most frequent such, when the
    phrase's other word is free and no other foreign word of the concept (`others`, sharing no
    character with `foreign`) is more associated with it; else `word`. "糖尿病" meets *mellitus*
    only in *diabetes mellitus*, so it is rendered as the phrase; "高血压" meets *hypertension* in
    many phrases, and "抵抗性" leaves *insulin* to "インスリン"."""
    best, best_count = word, PHRASE_SHARE * together[foreign, word]
    for phrase in phrases:
        first, second = phrase.split()
        other = second if first == word else first if second == word else None
        if other is None or other in taken or together[foreign, phrase] < best_count:
            continue
        own = dice((foreign, other), together[foreign, other])
        rivals = (rival for rival in others if not set(rival) & set(foreign))
        if all(dice((rival, other), together[rival, other]) <= own for rival in rivals):
            best, best_count = phrase, together[foreign, phrase]
    return best


def lexicon_with_mined(lexicon: Lexicon | None, kb: KnowledgeBase, params: MiningParams = MiningParams()) -> Lexicon:
    """`lexicon`'s senses first and the KB-mined ones after them, per language (`build
    --translations-from-kb`): a user's dictionary leads, the KB fills its gaps."""
    mined = mine_lexicon(kb, params)
    if not mined.languages:
        raise BabelinkError("--translations-from-kb: the KB names no concept both in English and in another "
                            "language babelink mines; there is nothing to mine a lexicon from")
    return mined if lexicon is None else lexicon.followed_by(mined)

