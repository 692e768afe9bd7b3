"""Filters inside retrieval against filtering the unfiltered top-k afterwards, on open-umls.

    python benchmarks/filter_retrieval.py [--data ../shared/data] [--no-write]

For each filter (a source vocabulary, a language, two sources), the queries are the in-KB
mentions of XL-BEL v0.0 and Mantra GSC whose gold concept the filter allows. Both systems use the
default hybrid bundle: **in retrieval** (`Linker.filtered`: FAISS ID selector and masked TF-IDF
postings) and **post-filter** (the unfiltered top-k, then the concepts the filter does not allow
dropped, as peers do). The encoder cache is emptied before each timed run. Reported: Acc@1,
recall@5, answers with fewer than 5 candidates, mentions/s (filter compilation timed separately).
"""

from __future__ import annotations

import argparse
import time

from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.linker import Linker
from babelink.retrieve.filters import NameFilter, allowed_concepts, allowed_names

FILTERS = {"sources HPO": NameFilter.of(sources=["HPO"]), "sources MONDO, DOID": NameFilter.of(sources=["MONDO,DOID"]),
           "langs es": NameFilter.of(langs=["es"]), "sources ORDO": NameFilter.of(sources=["ORDO"])}
TOP_K = 5
FIRST_LINK_TEXT = "The patient has type 2 diabetes mellitus, arterial hypertension and chronic kidney disease."


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    bundle = load_bundle(cached_bundle(args.data, "open-umls"))
    linker = Linker(bundle)
    queries = [*benchmark.xlbel_set(args.data, bundle.kb).queries, *benchmark.mantra_set(args.data, bundle.kb).queries]
    linker.normalize(["warm-up"])
    rows = []
    for label, name_filter in FILTERS.items():
        started = time.perf_counter()
        filtered = linker.filtered(name_filter)
        compile_seconds = time.perf_counter() - started
        allowed = allowed_concepts(bundle.kb, bundle.names, allowed_names(bundle.kb, bundle.names, name_filter))
        chosen = [q for q in queries if set(q.gold_ids) & allowed]
        mentions, gold = [q.mention for q in chosen], [set(q.gold_ids) for q in chosen]
        filtered.normalize(["warm-up"])
        linker.encoder.clear()  # both systems encode the mentions: the shared cache would serve the second
        started = time.perf_counter()
        inside = [[c.concept_id for c in found] for found in filtered.normalize(mentions, top_k=TOP_K)]
        inside_rate = len(mentions) / (time.perf_counter() - started)
        linker.encoder.clear()
        started = time.perf_counter()
        after = [[c.concept_id for c in found if c.concept_id in allowed]
                 for found in linker.normalize(mentions, top_k=TOP_K)]
        after_rate = len(mentions) / (time.perf_counter() - started)
        for system, ranked, rate in (("in retrieval", inside, inside_rate), ("post-filter", after, after_rate)):
            acc1 = sum(bool(r) and r[0] in g for r, g in zip(ranked, gold)) / len(gold)
            recall = sum(bool(set(r) & g) for r, g in zip(ranked, gold)) / len(gold)
            short = sum(len(r) < TOP_K for r in ranked)
            rows.append(f"| {label} | {len(allowed):,} | {len(chosen):,} | {system} | {acc1:.3f} | {recall:.3f} | "
                        f"{short:,} | {rate:,.0f} | {compile_seconds if system == 'in retrieval' else 0:.1f} |")
    linker.link(FIRST_LINK_TEXT)  # the unfiltered linker derives what its filtered ones share
    first_links = [_first_link(linker, label, name_filter) for label, name_filter in FILTERS.items()]
    lines = [f"## {time.strftime('%Y-%m-%d')} — filters inside retrieval (commit `{commit()}`)", "",
             f"Command: `python benchmarks/filter_retrieval.py` · machine: {machine()}", "",
             ("Default open-umls hybrid bundle, HNSW index; queries: in-KB XL-BEL v0.0 and Mantra GSC mentions whose "
              f"gold concept the filter allows; top-{TOP_K}. Compile: seconds to build the filtered linker (once per "
              "filter)."), "",
             ("| filter | concepts allowed | queries | system | Acc@1 | recall@5 | answers < 5 | mentions/s "
              "| compile s |"),
             "|---|---:|---:|---|---:|---:|---:|---:|---:|", *rows, "",
             (f"First `link` of a filtered linker (\"{FIRST_LINK_TEXT}\", encoder cache emptied): one that derives "
              "the protected stop words and concept types itself (the baseline, as every filtered linker did before) "
              "against `Linker.filtered`, which shares the unfiltered linker's (that linker has linked once)."), "",
             "| filter | own stop words s (baseline) | shared s | × baseline | same mentions |",
             "|---|---:|---:|---:|---|", *first_links, ""]
    publish("\n".join(lines), not args.no_write, "speed")


def _first_link(linker: Linker, label: str, name_filter: NameFilter) -> str:
    """A table row: seconds of the first `link` of a filtered linker built alone and of `linker`'s."""
    timed = []
    for filtered in (Linker(linker.bundle, name_filter=name_filter, encoder=linker.encoder),
                     linker.filtered(name_filter)):
        linker.encoder.clear()
        started = time.perf_counter()
        mentions = [(m.start, m.end, m.concept.concept_id) for m in filtered.link(FIRST_LINK_TEXT).mentions]
        timed.append((time.perf_counter() - started, mentions))
    (own, own_mentions), (shared, shared_mentions) = timed
    return f"| {label} | {own:.2f} | {shared:.2f} | {own / shared:.1f} | {own_mentions == shared_mentions} |"


if __name__ == "__main__":
    main()
