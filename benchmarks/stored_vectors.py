"""Queries written as a KB name take the vector their name was encoded to at build: encoder passes
saved, speed, and agreement with encoding every query.

    python benchmarks/stored_vectors.py [--data ../shared/data] [--no-write] [--kbs default open-umls]
        [--mentions 1000]

Each workload runs twice in one process on one loaded bundle: with `Bundle.query_encoder` (a
query that is a KB name, once normalised, takes its stored vector; babelink's default) and, the
baseline, with a plain `CachedEncoder` (every distinct query encoded). Encoder caches start empty
for each run; an untimed pass of the baseline first fills the page cache for both.

- `normalize`, top-5: XL-BEL v0.0 (en es de zh ja), Mantra GSC and QUAERO dev mentions, `--mentions`
  of each set taken at even steps through it (all languages of a set);
- `link`, default `LinkParams`: NCBI-disease test (100 abstracts), Mantra GSC es and fr documents.

Bundles: the embedded default (with the lexicon mined from its names) and open-umls hybrid with the
shared MUSE lexicons (what `build --translations` stores; issue 18's configuration). Reported per
workload: strings sent to the encoder, mentions or documents per second, the speed ratio, and
agreement: queries with the same top-5 concept ids and the largest score difference (`normalize`),
identical mentions (offsets and concept) (`link`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, publish, shared_path

from babelink.bundle.default import default_bundle
from babelink.bundle.store import Bundle, load_bundle
from babelink.encoders.cache import CachedEncoder
from babelink.formats import read_documents
from babelink.formats.xlbel import read_xlbel
from babelink.linker import Linker
from babelink.translate import read_lexicons

MUSE = "translations/muse"
MANTRA = {"es": "mantra_gsc/Mantra-GSC/Spanish", "fr": "mantra_gsc/Mantra-GSC/French",
          "en": "mantra_gsc/Mantra-GSC/English"}
QUAERO_DEV = ("quaero/corpus/dev/EMEA", "quaero/corpus/dev/MEDLINE")


class CountingEncoder:
    """The bundle's encoder, counting the strings it is asked to encode."""

    def __init__(self, encoder):
        self.inner, self.dimension, self.encoded = encoder, encoder.dimension, 0

    def encode(self, texts):
        self.encoded += len(texts)
        return self.inner.encode(texts)

    def describe(self) -> dict:
        return self.inner.describe()


def _documents(data: Path, path: str, lang: str | None):
    return [replace(document, lang=lang) for document in read_documents(data / "bench" / path)]


def workloads(data: Path, mentions: int) -> dict[str, tuple[str, list]]:
    """Workload name → (`normalize` or `link`, its mentions or documents); `mentions` per `normalize` set."""
    xlbel = [query.mention for lang in ("en", "es", "de", "zh", "ja")
             for query in read_xlbel(data / "bench" / "xl_bel" / "xlbel_v0.0" / f"{lang}_1k_test_query.txt")]
    mantra = [a.text for lang, path in MANTRA.items() for d in _documents(data, path, lang) for a in d.annotations]
    quaero = [a.text for path in QUAERO_DEV for d in _documents(data, path, "fr") for a in d.annotations]
    return {
        "normalize XL-BEL v0.0": ("normalize", _even(xlbel, mentions)),
        "normalize Mantra GSC": ("normalize", _even(mantra, mentions)),
        "normalize QUAERO dev": ("normalize", _even(quaero, mentions)),
        "link NCBI-disease test": ("link", _documents(data, "ncbi_disease/NCBItestset_corpus.txt", "en")),
        "link Mantra GSC es": ("link", _documents(data, MANTRA["es"], "es")),
        "link Mantra GSC fr": ("link", _documents(data, MANTRA["fr"], "fr")),
    }


def _even(items: list, count: int) -> list:
    step = max(1, len(items) // count)
    return items[::step][:count]


def run(bundle: Bundle, plain, stored: bool, job: str, inputs: list) -> dict:
    counting = CountingEncoder(plain)
    encoder = bundle.query_encoder(counting) if stored else CachedEncoder(counting)
    linker = Linker(bundle, encoder=encoder)
    linker.normalize(["warm-up"])
    linker.link("warm-up text with asthma")
    encoder.clear()
    counting.encoded = 0
    started = time.perf_counter()
    if job == "normalize":
        found = linker.normalize(inputs, top_k=5)
        output = [[(c.concept_id, c.score) for c in candidates] for candidates in found]
    else:
        output = [{(m.start, m.end, m.candidates[0].concept_id) for m in linked.mentions}
                  for linked in linker.link_documents(inputs)]
    return {"seconds": time.perf_counter() - started, "encoded": counting.encoded, "output": output}


def agreement(job: str, ours: list, theirs: list) -> str:
    if job == "normalize":
        same = sum([c for c, _ in a] == [c for c, _ in b] for a, b in zip(ours, theirs))
        gap = max((abs(x - y) for a, b in zip(ours, theirs) for (_, x), (_, y) in zip(a, b)), default=0.0)
        return f"{same:,}/{len(ours):,} same top-5, largest score difference {gap:.1e}"
    mentions = sum(len(a) for a in theirs)
    common = sum(len(a & b) for a, b in zip(ours, theirs))
    return f"{common:,} of {mentions:,} baseline mentions kept, {sum(len(a) for a in ours) - common:,} new"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kbs", nargs="+", default=["default", "open-umls"], choices=["default", "open-umls"])
    parser.add_argument("--mentions", type=int, default=1000, help="mentions of each normalize set")
    args = arguments(parser.description, parser)
    found = workloads(args.data, args.mentions)
    rows = []
    for kb_name in args.kbs:
        if kb_name == "default":
            bundle, label = load_bundle(default_bundle()), "embedded default (mined lexicon)"
        else:
            bundle = load_bundle(cached_bundle(args.data, "open-umls"))
            bundle, label = replace(bundle, lexicon=read_lexicons([args.data / MUSE])), "open-umls + MUSE lexicons"
        plain = bundle.encoder()
        for workload, (job, inputs) in found.items():
            if kb_name == "default" and workload == "normalize QUAERO dev":
                continue  # French UMLS CUIs: nothing the default's vocabularies answer
            run(bundle, plain, False, job, inputs)  # untimed: pages both runs read are cached before either
            baseline = run(bundle, plain, False, job, inputs)
            ours = run(bundle, plain, True, job, inputs)
            unit = "mentions" if job == "normalize" else "documents"
            key = f"{label}: {workload} ({len(inputs):,} {unit})"
            base_rate, rate = len(inputs) / baseline["seconds"], len(inputs) / ours["seconds"]
            rows.append(f"| {key} | every query encoded (baseline) | {baseline['encoded']:,} | {base_rate:,.1f} | "
                        "1.00 | — |")
            rows.append(f"| {key} | stored vectors (default) | {ours['encoded']:,} | **{rate:,.1f}** | "
                        f"{rate / base_rate:.2f} | {agreement(job, ours['output'], baseline['output'])} |")
            print(*rows[-2:], sep="\n", flush=True)
    heading = f"queries written as KB names take their stored vectors (commit `{commit()}`)"
    command = (f"Command: `python benchmarks/stored_vectors.py --kbs {' '.join(args.kbs)} --mentions {args.mentions}` "
               "· lexicons on open-umls: "
               f"`{shared_path(args.data / MUSE)}` · machine: {machine()}")
    setting = ("Baseline (same run, same bundle): every distinct query encoded. Default: a query written as a KB "
               "name (once normalised) takes the vector stored for that name. Rate: mentions/s (`normalize`, top-5) "
               "or documents/s (`link`, default parameters); encoder caches emptied before each run, after an untimed "
               "pass that fills the page cache.")
    lines = [f"## {time.strftime('%Y-%m-%d')} — {heading}", "", command, "", setting, "",
             "| workload | system | strings encoded | rate/s | × baseline | agreement with the baseline |",
             "|---|---|---:|---:|---:|---|", *rows, ""]
    publish("\n".join(lines), not args.no_write, "speed")


if __name__ == "__main__":
    main()
