"""A bilingual lexicon mined from the KB itself, for KBs (and the embedded default) without one.

A multilingual KB names many concepts both in English and in another language (ICD-10 titles in
eleven languages, UMLS's MSHSPA or MDRFRE atoms): every such concept is a pair of aligned phrases.
A foreign word and an English word that keep appearing in the same concepts' names translate
each other: words are linked one to one within each concept, strongest association (Dice over
concepts) first, and a pair's score is the Dice coefficient of its links (competitive linking,
Melamed 2000; 001 §2.2 takes translation pairs from dictionaries, this takes them from the KB).
Each foreign word keeps its best English words as senses, best first, so "hipertensión" renders
as "hypertension" and "agudo" as "acute".

Only scripts written with spaces are mined: names in Chinese, Japanese or Thai would first need
the segmentation a lexicon is meant to provide. Stop words on either side are never paired.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import regex
import stopwordsiso

from babelink.errors import BabelinkError
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name
from babelink.translate.lexicon import KNOWN_LANGUAGES, Lexicon, LexiconSource

#: Names with any of these scripts are not mined (no spaces to split words on).
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
_WORD = regex.compile(r"\p{L}")
#: The lexicon source's file name in the manifest.
MINED = "mined from the KB's names"


@dataclass(frozen=True)
class MiningParams:
    """`min_dice`: weakest association kept; `min_concepts`: concepts a pair must share (one shared
    concept is chance); `senses`: English words kept per foreign word, best first."""

    min_dice: float = 0.2
    min_concepts: int = 2
    senses: int = 3


def mine_lexicon(kb: KnowledgeBase, params: MiningParams = MiningParams()) -> Lexicon:
    """English senses of the words of every non-English language in `kb` with spaced names."""
    words_by_concept = _words_by_concept(kb)
    senses: dict[str, dict[str, tuple[str, ...]]] = {}
    sources = []
    digest = kb.content_hash()
    for lang in sorted({lang for by_lang in words_by_concept.values() for lang in by_lang} - {"en"}):
        entries = _mine_language(words_by_concept, lang, params)
        if entries:
            senses[lang] = entries
            pairs = sum(len(found) for found in entries.values())
            sources.append(LexiconSource(lang, MINED, digest, pairs))
    return Lexicon(senses, sources)


def _words_by_concept(kb: KnowledgeBase) -> dict[str, dict[str, set[str]]]:
    """concept → language → the content words of its names in that language."""
    stop_words = {lang: stopwordsiso.stopwords(lang) if stopwordsiso.has_lang(lang) else set()
                  for lang in kb.languages()}
    words: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    names = kb.names
    for concept_id, name, lang in zip(names.column("concept_id").to_pylist(), names.column("name").to_pylist(),
                                      names.column("lang").to_pylist()):
        if lang not in KNOWN_LANGUAGES or _UNSPACED.search(name):
            continue
        words[concept_id][lang].update(word for word in normalize_name(name).split()
                                       if len(word) > 1 and _WORD.search(word) and word not in stop_words[lang])
    return words


def _mine_language(words_by_concept: dict[str, dict[str, set[str]]], lang: str,
                   params: MiningParams) -> dict[str, tuple[str, ...]]:
    """Competitive linking (Melamed 2000): within each concept, word pairs are linked one to one,
    strongest Dice first, so "agudo" in *infarto agudo del miocardio* links to "acute" once
    "infarto" and "miocardio" have taken "infarction" and "myocardial", although it co-occurs
    with all three. A sense's score is the Dice coefficient of its links."""
    aligned = [(by_lang[lang], by_lang["en"]) for by_lang in words_by_concept.values()
               if by_lang.get(lang) and by_lang.get("en")]
    foreign_counts: Counter[str] = Counter()
    english_counts: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for foreign, english in aligned:
        foreign_counts.update(foreign)
        english_counts.update(english)
        together.update((f, e) for f in foreign for e in english)

    def dice(pair: tuple[str, str], count: int) -> float:
        return 2 * count / (foreign_counts[pair[0]] + english_counts[pair[1]])

    links: Counter[tuple[str, str]] = Counter()
    for foreign, english in aligned:
        pairs = sorted(((f, e) for f in foreign for e in english),
                       key=lambda pair: (-dice(pair, together[pair]), pair))
        taken_foreign: set[str] = set()
        taken_english: set[str] = set()
        for f, e in pairs:
            if f not in taken_foreign and e not in taken_english:
                links[f, e] += 1
                taken_foreign.add(f)
                taken_english.add(e)
    scored: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for pair, count in links.items():
        if count >= params.min_concepts and (score := dice(pair, count)) >= params.min_dice:
            scored[pair[0]].append((-score, -count, pair[1]))
    return {foreign: tuple(english for _, _, english in sorted(found)[: params.senses])
            for foreign, found in sorted(scored.items())}


def lexicon_with_mined(lexicon: Lexicon | None, kb: KnowledgeBase, params: MiningParams = MiningParams()) -> Lexicon:
    """`lexicon`'s senses first and the KB-mined ones after them, per language (`build
    --translations-from-kb`): a user's dictionary leads, the KB fills its gaps."""
    mined = mine_lexicon(kb, params)
    if not mined.languages:
        raise BabelinkError("--translations-from-kb: the KB names no concept in English and in another language "
                            "written with spaces; there is nothing to mine a lexicon from")
    if lexicon is None:
        return mined
    senses = {}
    for lang in sorted(set(lexicon.languages) | set(mined.languages)):
        merged = dict(lexicon.entries(lang))
        for foreign, found in mined.entries(lang).items():
            merged[foreign] = tuple(dict.fromkeys(merged.get(foreign, ()) + found))
        senses[lang] = merged
    return Lexicon(senses, [*lexicon.sources, *mined.sources])

