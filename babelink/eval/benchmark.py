"""Normalization benchmark sets and runner, shared by `benchmarks/` scripts and training hooks.

Protocol (docs/ARCHITECTURE.md): concept-level ranking, correct when a ranked concept equals any
gold ID. Gold IDs are resolved to the KB's primary IDs (MEDIC alternative IDs included), and
only queries with at least one gold concept in the KB are scored (the *in-KB subset*).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from babelink.abbreviations import abbreviation_map, expand_abbreviations
from babelink.augment import gold_resolver
from babelink.eval.metrics import evaluate
from babelink.formats.brat import iter_brat
from babelink.formats.document import NormalizationQuery, mentions_from_documents
from babelink.formats.pubtator import iter_pubtator
from babelink.formats.xlbel import read_xlbel
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name

XLBEL_LANGUAGES = ("en", "es", "de", "zh", "ja")
MANTRA_LANGUAGES = {"English": "en", "Spanish": "es", "French": "fr"}


@dataclass(frozen=True)
class QuerySet:
    """Scorable queries (gold resolved to KB IDs) and how many were read before the in-KB filter."""

    name: str
    queries: tuple[NormalizationQuery, ...]
    read: int


def _resolve_gold(queries: Iterable[NormalizationQuery], resolve: Callable[[str], str | None], name: str) -> QuerySet:
    kept, read = [], 0
    for query in queries:
        read += 1
        gold = tuple(dict.fromkeys(r for r in map(resolve, query.gold_ids) if r is not None))
        if gold:
            kept.append(NormalizationQuery(query.mention, gold, query.lang, query.context, query.doc_id))
    return QuerySet(name, tuple(kept), read)


def xlbel_set(data: Path, kb: KnowledgeBase, languages=XLBEL_LANGUAGES, version: str = "v0.0") -> QuerySet:
    queries = [
        q
        for lang in languages
        for q in read_xlbel(data / "bench" / "xl_bel" / f"xlbel_{version}" / f"{lang}_1k_test_query.txt")
    ]
    return _resolve_gold(queries, kb.resolve, f"XL-BEL {version}")


def pubtator_set(path: Path, kb: KnowledgeBase, name: str, types: frozenset[str] | None = None) -> QuerySet:
    return _resolve_gold(mentions_from_documents(iter_pubtator(path), types=types), gold_resolver(kb), name)


def mantra_set(data: Path, kb: KnowledgeBase) -> QuerySet:
    queries = []
    for folder, lang in MANTRA_LANGUAGES.items():
        for query in mentions_from_documents(iter_brat(data / "bench" / "mantra_gsc" / "Mantra-GSC" / folder)):
            queries.append(NormalizationQuery(query.mention, query.gold_ids, lang, doc_id=query.doc_id))
    return _resolve_gold(queries, kb.resolve, "Mantra GSC")


def ncbi_set(data: Path, kb: KnowledgeBase, split: str = "test") -> QuerySet:
    file = {"train": "NCBItrainset", "dev": "NCBIdevelopset", "test": "NCBItestset"}[split] + "_corpus.txt"
    return pubtator_set(data / "bench" / "ncbi_disease" / file, kb, f"NCBI-disease {split}")


def bc5cdr_set(data: Path, kb: KnowledgeBase, split: str = "test") -> QuerySet:
    file = {"train": "CDR_TrainingSet", "dev": "CDR_DevelopmentSet", "test": "CDR_TestSet"}[split]
    return pubtator_set(
        data / "bench" / "bc5cdr" / f"{file}.PubTator.txt", kb, f"BC5CDR-Disease {split}", frozenset({"Disease"})
    )


def run_normalization(
    normalize: Callable[[list[str]], list[list[str]]],
    query_set: QuerySet,
    ks=(1, 5),
    resolve_abbreviations: bool = False,
) -> dict:
    """Score `normalize` (mentions → ranked concept IDs) on a query set; adds timing.

    With `resolve_abbreviations`, a mention using a short form its document defines is searched
    with the long form (`babelink.abbreviations`; the time spent on it is counted).
    Groups are languages where the set has several, so per-language numbers come for free.
    """
    started = time.perf_counter()
    mentions = [_searched_text(query, resolve_abbreviations) for query in query_set.queries]
    ranked = normalize(mentions)
    seconds = time.perf_counter() - started
    languages = [query.lang or "-" for query in query_set.queries]
    result = evaluate(ranked, [query.gold_ids for query in query_set.queries], ks=ks,
                      groups=languages if len(set(languages)) > 1 else None)
    result["seconds"] = seconds
    result["mentions_per_second"] = len(mentions) / seconds if seconds else float("inf")
    result["read"] = query_set.read
    return result


def quaero_set(data: Path, kb: KnowledgeBase, split: str = "dev") -> QuerySet:
    """QUAERO French medical corpus (EMEA drug labels + MEDLINE titles), CUIs in annotator notes."""
    queries = []
    for corpus in ("EMEA", "MEDLINE"):
        for query in mentions_from_documents(iter_brat(data / "bench" / "quaero" / "corpus" / split / corpus)):
            queries.append(NormalizationQuery(query.mention, query.gold_ids, "fr", doc_id=query.doc_id))
    return _resolve_gold(queries, kb.resolve, f"QUAERO {split}")


def _searched_text(query: NormalizationQuery, resolve_abbreviations: bool) -> str:
    if resolve_abbreviations and query.context:
        return expand_abbreviations(query.mention, abbreviation_map(query.context))
    return query.mention


#: A KB language with at least this many names can stand in for an unseen one (`held_out_names_set`).
HELD_OUT_MIN_NAMES = 1000


def held_out_name_languages(kb: KnowledgeBase, pivot: str = "en") -> list[str]:
    """The KB's languages other than the `pivot` with at least `HELD_OUT_MIN_NAMES` names, most
    names first: those whose names `held_out_names_set` can hold out."""
    return [lang for lang, count in kb.languages().items() if lang != pivot and count >= HELD_OUT_MIN_NAMES]


def held_out_names_set(kb: KnowledgeBase, lang: str, size: int = 400, seed: int = 0) -> tuple[QuerySet, KnowledgeBase]:
    """Queries in a language no annotated corpus here covers: `size` of the KB's own name strings in
    `lang` (a seeded sample), to be searched against the KB without that language's names (the
    second value), as XL-BEL searches Wikipedia's names of a concept against UMLS. A string that the
    remaining KB holds as written (a Latin or English name copied into the translation) is left out:
    it is found by its spelling, not across languages. Gold: every concept the string names in `lang`
    that keeps a name in another language. `read`: the language's distinct strings.

    The sample is the `size` candidates of lowest hash under the seed: whether a string is drawn
    depends on that string alone, so a change that adds or drops a few candidates (a new KB
    release, a new name normalisation) keeps the rest of the sample, and runs at two commits
    compare mostly the same names."""
    names = kb.names.select(["concept_id", "name", "lang"]).to_pydict()
    gold: dict[str, dict[str, None]] = {}
    surface: dict[str, str] = {}
    for concept, name, name_lang in zip(names["concept_id"], names["name"], names["lang"]):
        if name_lang == lang and (key := normalize_name(name)):
            gold.setdefault(key, {})[concept] = None
            surface.setdefault(key, name)
    rest = kb.select_languages(frozenset(kb.languages()) - {lang})
    kept_strings = {normalize_name(name) for name in rest.names.column("name").to_pylist()}
    candidates = []
    for key in sorted(gold):
        concepts = tuple(concept for concept in gold[key] if concept in rest)
        if concepts and key not in kept_strings:
            candidates.append(NormalizationQuery(surface[key], concepts, lang))

    def drawn(query: NormalizationQuery) -> bytes:
        return hashlib.blake2b(f"{seed}\0{query.mention}".encode(), digest_size=8).digest()

    sample = sorted(candidates, key=drawn)[:size]
    return QuerySet(f"KB names, {lang} held out", tuple(sample), len(gold)), rest
