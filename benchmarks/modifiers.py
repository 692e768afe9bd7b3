"""What `link` leaves out as modifiers on the embedded default, and what that does to accuracy.

    python benchmarks/modifiers.py [--data ../shared/data] [--no-write]

The embedded default bundle (built on first use) links NCBI-disease test, BC5CDR-Disease test and
Mantra GSC en/es/fr with its default decision. The span proposals are gathered once per set with
modifiers kept; the decision is then made twice from them, as `link --keep-modifiers` (the
baseline) and as `link` (a span whose best concept is a clinical modifier left out before
overlaps are resolved, `link.modifiers`). Gold ids are matched through each concept's codes:
the default's concepts carry their MeSH, OMIM and UMLS codes, so a prediction is right when a
gold id (MeSH `D…`, `OMIM:…`, a CUI) is one of them; gold mentions no concept carries are left
out, as the in-KB protocol of BENCHMARKS.md does.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from report import arguments, commit, machine, publish

from babelink.batching import batched
from babelink.detect.overlaps import resolve_overlaps
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.kb.base import KnowledgeBase
from babelink.link.modifiers import concept_types, is_modifier
from babelink.linker import Linker

#: set → (path under bench/, language, annotation types kept)
SETS = {
    "NCBI-disease test": ("ncbi_disease/NCBItestset_corpus.txt", "en", None),
    "BC5CDR-Disease test": ("bc5cdr/CDR_TestSet.PubTator.txt", "en", {"Disease"}),
    "Mantra GSC en": ("mantra_gsc/Mantra-GSC/English", "en", None),
    "Mantra GSC es": ("mantra_gsc/Mantra-GSC/Spanish", "es", None),
    "Mantra GSC fr": ("mantra_gsc/Mantra-GSC/French", "fr", None),
}


def code_index(kb: KnowledgeBase) -> dict[str, set[str]]:
    """Every code a concept carries (its id, alternative ids, cross-references, each also without
    its vocabulary prefix) → the concepts carrying it."""
    index: defaultdict[str, set[str]] = defaultdict(set)
    columns = (kb.concepts.column(name).to_pylist() for name in ("concept_id", "alt_ids", "xrefs"))
    for concept_id, alt_ids, xrefs in zip(*columns):
        for code in (concept_id, *(alt_ids or ()), *(xrefs or ())):
            index[code].add(concept_id)
            index[code.partition(":")[2] or code].add(concept_id)
    return index


def gold_by_codes(documents, codes: dict[str, set[str]]) -> dict[tuple[str, int, int], set[str]]:
    """(document, start, end) → the concepts carrying any of a gold mention's codes (`code_index`),
    for the mentions some concept carries."""
    return {(document.id, a.start, a.end): ids for document in documents for a in document.annotations
            for ids in [set().union(*(codes.get(code, set()) for code in a.concept_ids))] if ids}


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    started = time.perf_counter()
    linker = Linker.open()
    load_seconds = time.perf_counter() - started
    codes = code_index(linker.bundle.kb)
    types = concept_types(linker.bundle.kb)
    params = linker.link_params
    proposer = replace(linker.documents, params=replace(params, modifier_types=frozenset()))
    rows, dropped_words = [], Counter()
    for name, (path, lang, kept_types) in SETS.items():
        documents = [replace(document, lang=lang, annotations=tuple(
            a for a in document.annotations if kept_types is None or a.type in kept_types))
            for document in read_documents(Path(args.data) / "bench" / path)]
        gold = [(*key, ids) for key, ids in gold_by_codes(documents, codes).items()]
        proposals = [found for batch in batched(documents, 16) for found in proposer.proposals(batch)]
        scores, dropped = [], 0
        for keep_modifiers in (True, False):
            predicted = []
            for document, found in zip(documents, proposals):
                modifiers = [p for p in found if is_modifier(p.candidates[0].concept_id, types, params.modifier_types)]
                if not keep_modifiers:
                    dropped += len(modifiers)
                    dropped_words.update(p.text.casefold() for p in modifiers)
                    found = [p for p in found if p not in modifiers]
                predicted += [(document.id, p.start, p.end, p.candidates[0].concept_id)
                              for p in resolve_overlaps(found, params.overlap)]
            scores.append(span_scores(predicted, gold))
        (kept, left_out) = scores
        rows.append(f"| {name} | {lang} | {len(documents):,} | {len(gold):,} | {kept['strict']['predicted']:,} | "
                    f"{left_out['strict']['predicted']:,} ({dropped:,} modifier spans proposed) | {_prf(kept)} | "
                    f"{_prf(left_out)} |")
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — link leaves modifiers out, embedded default (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/modifiers.py` · bundle: the embedded default "
         f"({linker.bundle.provenance['bundle']}, loaded in {load_seconds:.0f} s) · machine: {machine()}"), "",
        ("Strict P / R / F1 (partial F1), one set of proposals per set, decided with modifiers linked "
         "(`--keep-modifiers`, the baseline) and left out (`link`'s default):"), "",
        ("| set | lang | documents | gold mentions in KB | mentions, modifiers linked | mentions, modifiers left out "
         "| modifiers linked | modifiers left out |"), "|---|---|---:|---:|---:|---:|---|---|",
        *rows, "",
        "Modifier spans left out, most frequent: " + ", ".join(
            f"*{word}* {count}" for word, count in dropped_words.most_common(20)) + ".", "",
        f"Run time {time.perf_counter() - started:.0f} s.", "",
    ]
    publish("\n".join(lines), not args.no_write, "end-to-end")


def _prf(scores: dict) -> str:
    strict = scores["strict"]
    return (f"{strict['precision']:.3f} / {strict['recall']:.3f} / **{strict['f1']:.3f}** "
            f"({scores['partial']['f1']:.3f})")


if __name__ == "__main__":
    main()
