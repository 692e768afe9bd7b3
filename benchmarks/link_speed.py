"""`link` throughput on the embedded default, and what the TF-IDF search's threads give.

    python benchmarks/link_speed.py [--documents 100] [--rounds 3] [--data ../shared/data] [--no-write]

Workload: the first `--documents` NCBI-disease test abstracts (title + abstract), linked with the
embedded default through `Linker.link_stream` (the CLI's path). The first pass starts from an
emptied name store, as a fresh install's first documents do, and stores the vectors of the names
they reach (encoded once per machine); it is reported on its own. Each round then forgets the
query vectors and the TF-IDF shortlists and links the documents twice: with the TF-IDF search on
one thread (the baseline, `index.sparse.MAX_SEARCH_THREADS = 1`) and as shipped. The median of the
rounds is reported, and every pass must give the first pass's mentions.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from report import arguments, commit, emptied_store, machine, publish

from babelink.formats.pubtator import iter_pubtator
from babelink.index import sparse
from babelink.linker import Linker

CORPUS = "bench/ncbi_disease/NCBItestset_corpus.txt"


def _mentions(linked) -> list[tuple]:
    return [(d.id, m.start, m.end, tuple((c.concept_id, round(c.score, 6)) for c in m.candidates))
            for d in linked for m in d.mentions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = arguments(parser.description, parser)
    documents = list(iter_pubtator(args.data / CORPUS))[: args.documents]
    linker = Linker(emptied_store(Linker.open().bundle))
    started = time.perf_counter()
    reference = _mentions(linker.link_stream(documents))  # names encoded on first need and stored
    first_pass = len(documents) / (time.perf_counter() - started)
    encoded = linker.bundle.dense.encoded()
    shipped_threads = sparse.MAX_SEARCH_THREADS
    rates: dict[str, list[float]] = {"one": [], "shipped": []}
    for _ in range(args.rounds):
        for setting, threads in (("one", 1), ("shipped", shipped_threads)):
            linker.encoder.clear()
            linker.bundle.sparse.clear()
            sparse.MAX_SEARCH_THREADS = threads
            started = time.perf_counter()
            found = _mentions(linker.link_stream(documents))
            rates[setting].append(len(documents) / (time.perf_counter() - started))
            if found != reference:
                raise SystemExit(f"the {setting!r} pass found other mentions than the first pass")
    sparse.MAX_SEARCH_THREADS = shipped_threads
    one, shipped = (statistics.median(rates[key]) for key in ("one", "shipped"))
    rounds = {key: ", ".join(f"{rate:.2f}" for rate in values) for key, values in rates.items()}
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — link speed, embedded default (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/link_speed.py --documents {args.documents} --rounds {args.rounds}` · "
         f"machine: {machine()} · torch {torch.__version__}, {torch.get_num_threads()} threads"), "",
        (f"The first {len(documents)} NCBI-disease test abstracts ({sum(len(d.text) for d in documents):,} "
         f"characters, {len(reference):,} mentions found in every pass). The first pass started from an empty "
         f"name store and encoded {encoded:,} names; then, names stored, query vectors and TF-IDF shortlists "
         f"forgotten before each pass, median of {args.rounds} alternating rounds:"), "",
        "| setting | documents/s | × baseline | rounds |",
        "|---|---:|---:|---|",
        f"| TF-IDF search on one thread (baseline) | {one:.2f} | 1.00 | {rounds['one']} |",
        (f"| as shipped (TF-IDF search on {sparse.search_threads()} threads) | {shipped:.2f} | {shipped / one:.2f} "
         f"| {rounds['shipped']} |"),
        (f"| first pass of a fresh install (names encoded on first need, as shipped) | {first_pass:.2f} | "
         f"{first_pass / one:.2f} | 1 |"),
    ]
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
