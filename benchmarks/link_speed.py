"""`link` throughput on the embedded default, and what the TF-IDF search's threads give.

    python benchmarks/link_speed.py [--documents 100] [--rounds 3] [--data ../shared/data] [--no-write]

Workload: the first `--documents` NCBI-disease test abstracts (title + abstract), linked with the
embedded default through `Linker.link_stream` (the CLI's path). Two first passes start from an
emptied name store, as a fresh install's first documents do, and store the vectors of the names
they reach (encoded once per machine): one without the screening search (every span that clears the
recall gate ranked over the whole pools, `retrieve.candidate.ScreenedGenerator`), then one as
shipped; they are reported on their own, with the names each encoded, and the mentions that differ
between the two searches over one store.
Each round then forgets the query vectors and the TF-IDF shortlists and links the documents three
times: with the TF-IDF search on one thread (the baseline, `index.sparse.MAX_SEARCH_THREADS = 1`),
without the screening search, and as shipped. The median of the rounds is reported, and every pass
must give its first pass's mentions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import asdict, replace

import torch
from report import arguments, commit, emptied_store, machine, publish

from babelink.formats.pubtator import iter_pubtator
from babelink.index import sparse
from babelink.linker import Linker
from babelink.retrieve.generators import HybridParams

CORPUS = "bench/ncbi_disease/NCBItestset_corpus.txt"


def _mentions(linked) -> list[tuple]:
    return [(d.id, m.start, m.end, tuple((c.concept_id, round(c.score, 6)) for c in m.candidates))
            for d in linked for m in d.mentions]


def _linked(mentions: list[tuple]) -> list[tuple]:
    """(document, start, end, best concept) of each mention."""
    return [(document, start, end, candidates[0][0]) for document, start, end, candidates in mentions]


def unscreened(bundle):
    """`bundle` linking without the screening search: its screening pool as wide as its pool."""
    hybrid = HybridParams(**bundle.manifest["hybrid"])
    wide = asdict(replace(hybrid, screening_pool=hybrid.pool))
    return replace(bundle, manifest={**bundle.manifest, "hybrid": wide})


def _first_pass(bundle, documents, screened: bool) -> tuple[Linker, list[tuple], float, int]:
    """A linker of `bundle` from an emptied name store, its first pass's mentions, documents/s and names encoded."""
    fresh = emptied_store(bundle)
    linker = Linker(fresh if screened else unscreened(fresh))
    started = time.perf_counter()
    found = _mentions(linker.link_stream(documents))  # names encoded on first need and stored
    return linker, found, len(documents) / (time.perf_counter() - started), linker.bundle.dense.encoded()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = arguments(parser.description, parser)
    documents = list(iter_pubtator(args.data / CORPUS))[: args.documents]
    bundle = Linker.open().bundle
    _, _, wide_first, wide_encoded = _first_pass(bundle, documents, screened=False)
    linker, reference, first_pass, encoded = _first_pass(bundle, documents, screened=True)
    wide = Linker(unscreened(linker.bundle), encoder=linker.encoder)
    wide.encoder.clear()
    wide_reference = _mentions(wide.link_stream(documents))  # the names only whole pools reach, stored again
    # Compared over one store, by span and concept: a name's vector differs in its last digits with the
    # batch it was encoded in, and each first pass encoded its names in batches of its own.
    lost, gained = (len(set(_linked(one)) - set(_linked(other)))
                    for one, other in ((wide_reference, reference), (reference, wide_reference)))
    shipped_threads = sparse.MAX_SEARCH_THREADS
    settings = {"one": (linker, 1, reference), "wide": (wide, shipped_threads, wide_reference),
                "shipped": (linker, shipped_threads, reference)}
    rates: dict[str, list[float]] = {key: [] for key in settings}
    for _ in range(args.rounds):
        for setting, (used, threads, expected) in settings.items():
            used.encoder.clear()
            used.bundle.sparse.clear()
            sparse.MAX_SEARCH_THREADS = threads
            started = time.perf_counter()
            found = _mentions(used.link_stream(documents))
            rates[setting].append(len(documents) / (time.perf_counter() - started))
            if found != expected:
                raise SystemExit(f"the {setting!r} pass found other mentions than the names' store gave before")
    sparse.MAX_SEARCH_THREADS = shipped_threads
    one, wide_rate, shipped = (statistics.median(rates[key]) for key in settings)
    rounds = {key: ", ".join(f"{rate:.2f}" for rate in values) for key, values in rates.items()}
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — link speed, embedded default (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/link_speed.py --documents {args.documents} --rounds {args.rounds}` · "
         f"machine: {machine()} · torch {torch.__version__}, {torch.get_num_threads()} threads"), "",
        (f"The first {len(documents)} NCBI-disease test abstracts ({sum(len(d.text) for d in documents):,} "
         f"characters, {len(reference):,} mentions found as shipped). Each first pass started from an empty name "
         f"store: without the screening search it encoded {wide_encoded:,} names, as shipped {encoded:,}. Mentions "
         f"linked without it but not as shipped: {lost:,}; as shipped but not without it: {gained:,} (span and "
         f"concept, over one store). Then, names stored, query vectors and "
         f"TF-IDF shortlists forgotten before each pass, median of {args.rounds} alternating rounds:"), "",
        "| setting | documents/s | × baseline | rounds |",
        "|---|---:|---:|---|",
        f"| TF-IDF search on one thread (baseline) | {one:.2f} | 1.00 | {rounds['one']} |",
        (f"| no screening search (every span ranked over the whole pools) | {wide_rate:.2f} | {wide_rate / one:.2f} "
         f"| {rounds['wide']} |"),
        (f"| as shipped (TF-IDF search on {sparse.search_threads()} threads, screening search) | {shipped:.2f} | "
         f"{shipped / one:.2f} | {rounds['shipped']} |"),
        (f"| first pass of a fresh install, no screening search | {wide_first:.2f} | {wide_first / one:.2f} | 1 |"),
        (f"| first pass of a fresh install (names encoded on first need, as shipped) | {first_pass:.2f} | "
         f"{first_pass / one:.2f} | 1 |"),
    ]
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
