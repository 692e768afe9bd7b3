"""`babelink link` throughput: the local engine against the Ray engine, documents per second.

    python benchmarks/batch_throughput.py --bundle BUNDLE [--documents N] [--workers 2]
        [--batch-size 16] [--corpus PUBTATOR] [--data ../shared/data] [--no-write]

Workload: the NCBI-disease test abstracts (title + abstract, 100 documents) linked with
`--bundle`, through the code paths `babelink link` runs (`Linker.link_stream`; `link_with_ray`).
Both engines must return the same documents in the same order (checked); their mentions are
compared and the agreement reported (with a dense encoder, batching changes bf16 arithmetic). Wall time
includes start-up (bundle load; for Ray also the runtime and its actors); the steady rate is measured over the
documents after the first quarter. The cluster projection multiplies the local engine's
steady rate per core by the actor count, capped by what the driver can write.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from report import arguments, commit, machine, publish

from babelink.bundle.store import read_manifest
from babelink.corpus.ray_engine import link_with_ray
from babelink.formats.pubtator import iter_pubtator
from babelink.link.mentions import LinkedDocument
from babelink.linker import Linker

PROJECTED_WORKERS = (8, 32, 128)


@dataclass(frozen=True)
class Run:
    records: list[dict]
    wall: float  # seconds, start-up included
    steady: float  # documents/s after the first quarter of the documents


def _timed(results: Iterator[LinkedDocument], started: float, documents: int) -> Run:
    records, mark = [], None
    for result in results:
        records.append(result.to_dict())
        if len(records) == documents // 4:
            mark = time.perf_counter()
    end = time.perf_counter()
    return Run(records, end - started, (documents - documents // 4) / max(end - (mark or started), 1e-9))


def _local(bundle: Path, documents: list, batch_size: int) -> Run:
    started = time.perf_counter()
    linked = Linker.open(bundle).link_stream(documents, batch_size)
    return _timed(linked, started, len(documents))


def _ray(bundle: Path, documents: list, batch_size: int, workers: int) -> Run:
    started = time.perf_counter()
    results = link_with_ray(documents, set(), bundle=bundle, context_filter=None,
                            batch_size=batch_size, workers=workers, address=None)
    return _timed(results, started, len(documents))


def _agreement(first: list[dict], second: list[dict]) -> tuple[float, float]:
    """Jaccard overlap of the two runs' (document, start, end, concept) mentions, and the largest
    score difference over the mentions both found."""
    def mentions(records):
        return {(r["id"], m["start"], m["end"], m["concept"]): m["score"] for r in records for m in r["mentions"]}

    a, b = mentions(first), mentions(second)
    common = a.keys() & b.keys()
    return len(common) / max(1, len(a.keys() | b.keys())), max((abs(a[k] - b[k]) for k in common), default=0.0)


def _driver_rate(records: list[dict], repeats: int = 20) -> float:
    """Documents/s the driver can serialise and append (its share of every run, however many actors)."""
    started = time.perf_counter()
    with open(os.devnull, "w", encoding="utf-8") as stream:
        for _ in range(repeats):
            for record in records:
                stream.write(json.dumps(record, ensure_ascii=False) + "\n")
                stream.flush()
    return repeats * len(records) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory to link with")
    parser.add_argument("--corpus", type=Path, help="PubTator file (default: NCBI-disease test under --data)")
    parser.add_argument("--documents", type=int, help="link only the first N documents")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors")
    parser.add_argument("--batch-size", type=int, default=16, help="documents linked together")
    args = arguments(__doc__.splitlines()[0], parser)
    corpus = args.corpus or args.data / "bench" / "ncbi_disease" / "NCBItestset_corpus.txt"
    documents = list(iter_pubtator(corpus))[: args.documents]
    local = _local(args.bundle, documents, args.batch_size)
    ray = _ray(args.bundle, documents, args.batch_size, args.workers)
    if [record["id"] for record in ray.records] != [record["id"] for record in local.records]:
        sys.exit("the Ray engine returned other documents, or another order, than the local engine")
    agreement, score_gap = _agreement(local.records, ray.records)
    per_core, driver = local.steady / os.cpu_count(), _driver_rate(local.records)
    mentions = sum(len(record["mentions"]) for record in local.records)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — batch throughput, local vs Ray (commit `{commit()}`)",
        "",
        f"Command: `python benchmarks/batch_throughput.py {' '.join(sys.argv[1:])}` · machine: {machine()}",
        "",
        (
            f"{len(documents):,} documents of {corpus.name} ({sum(len(d.text) for d in documents):,} characters, "
            f"{mentions:,} mentions linked), bundle `{args.bundle.name}` "
            f"({read_manifest(args.bundle)['retriever']}), batches of {args.batch_size}; "
            f"the engines' (document, start, end, concept) mentions agree at {agreement:.2%} (Jaccard), scores of "
            f"common mentions within {score_gap:.1e}: a dense encoder's bf16 arithmetic depends on which strings share "
            "a batch, and the engines batch differently."
        ),
        "",
        "| engine | actors | wall s (start-up included) | documents/s over the wall time | × local |",
        "|---|---:|---:|---:|---:|",
        f"| local | – | {local.wall:.1f} | {len(documents) / local.wall:,.1f} | 1.00 |",
        f"| ray | {args.workers} | {ray.wall:.1f} | {len(documents) / ray.wall:,.1f} | {local.wall / ray.wall:.2f} |",
        "",
        (
            f"On {os.cpu_count()} cores Ray cannot beat the local engine, which already uses every core; it pays "
            "for its runtime, the actors' bundle loads and the transfers. Projection, not a measurement: linking "
            "is independent per document, so W one-CPU actors on a cluster should reach about W × "
            f"{per_core:,.1f} documents/s (the local engine's steady rate after the first quarter of the "
            f"documents, {local.steady:,.1f}/s, per core here) until the driver, which serialises and appends "
            f"every record ({driver:,.0f} documents/s measured here), becomes the bound."
        ),
        "",
        "| actors | projected documents/s |",
        "|---:|---:|",
    ]
    lines += [f"| {workers} | {min(workers * per_core, driver):,.0f} |" for workers in PROJECTED_WORKERS]
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
