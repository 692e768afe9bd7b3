"""HNSW search breadth (`babelink build --ef-search`): recall, accuracy and speed at each breadth.

    python benchmarks/hnsw_breadth.py [--encoder default|DIR] [--data ../shared/data] [--no-write]

One open-umls bundle (the graph does not depend on the breadth, which is a query-time setting),
queried with the in-KB XL-BEL v0.0 mentions at each `ef_search`: neighbour recall@32 against exact
search over the same vectors, in-KB Acc@1 per language (dense and default hybrid), and hybrid
`normalize` mentions/s (uncached encoder, so every breadth pays the same encoding). Baseline: the
default breadth, same run.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.index.dense import DenseNameIndex, DenseParams
from babelink.linker import Linker
from babelink.retrieve.generators import DenseGenerator, HybridGenerator, HybridParams
from babelink.text import normalize_name

BREADTHS = (64, 128, 256, 512, 1024)
K = 32  # the hybrid pool: strings the dense index is asked for per mention


def _accuracy(bundle, generator, query_set) -> dict:
    linker = Linker(bundle, generator)
    return benchmark.run_normalization(
        lambda mentions: [[c.concept_id for c in candidates] for candidates in linker.normalize(mentions, top_k=5)],
        query_set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="default", help="'default' or a checkpoint directory")
    args = arguments(parser.description, parser)
    import faiss

    options = {} if args.encoder == "default" else {"encoder": str(Path(args.encoder).absolute())}
    bundle = load_bundle(cached_bundle(args.data, "open-umls", **options))
    encoder = bundle.encoder()
    query_set = benchmark.xlbel_set(args.data, bundle.kb)
    vectors = encoder.encode([normalize_name(query.mention) for query in query_set.queries])
    stored = bundle.dense.index.reconstruct_n(0, len(bundle.dense))
    _, exact = faiss.knn(vectors, stored, K, metric=faiss.METRIC_INNER_PRODUCT)
    rows = []
    for ef in BREADTHS:
        index = DenseNameIndex(replace(bundle.dense.params, ef_search=ef), bundle.dense.index)
        started = time.perf_counter()
        found = index.search(vectors, K)[0]
        search_ms = 1000 * (time.perf_counter() - started) / len(vectors)
        recall = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(exact.tolist(), found.tolist())]))
        dense = _accuracy(bundle, DenseGenerator(bundle.kb, bundle.names, index, encoder), query_set)
        hybrid = _accuracy(bundle, HybridGenerator(bundle.kb, bundle.names, bundle.sparse, index, encoder,
                                                   HybridParams(**bundle.manifest["hybrid"])), query_set)
        rows.append((ef, recall, search_ms, dense, hybrid))
        print(f"ef {ef}: recall {recall:.4f}, hybrid {hybrid['mentions_per_second']:.0f} mentions/s", flush=True)
    baseline = next(row for row in rows if row[0] == DenseParams.ef_search)[4]["mentions_per_second"]
    languages = list(rows[0][3]["groups"])

    def mean(result):
        return np.mean([result["groups"][language]["acc@1"] for language in languages])

    lines = [f"## {time.strftime('%Y-%m-%d')} — HNSW search breadth (commit `{commit()}`)", "",
             f"Command: `python benchmarks/hnsw_breadth.py --encoder {args.encoder}` · machine: {machine()}", "",
             (f"open-umls bundle ({len(bundle.dense):,} name vectors, HNSW{bundle.dense.params.hnsw_m}), encoder "
             f"`{args.encoder}`; the {len(vectors):,} in-KB XL-BEL v0.0 mentions, Acc@1 (mean over "
             f"{', '.join(languages)}); recall@{K} of the index's neighbours against exact search. "
             f"Baseline: `ef_search` {DenseParams.ef_search} (the default), same run."), "",
             ("| ef_search | recall@32 vs exact | ms/mention, search | dense mean Acc@1 | hybrid mean Acc@1 "
             "| hybrid mentions/s | × default |"), "|---:|---:|---:|---:|---:|---:|---:|"]
    for ef, recall, search_ms, dense, hybrid in rows:
        speed = hybrid["mentions_per_second"]
        lines.append(f"| {ef} | {recall:.3f} | {search_ms:.2f} | {mean(dense):.4f} | {mean(hybrid):.4f} "
                     f"| {speed:,.0f} | {speed / baseline:.2f} |")
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
