"""A bundle built and queried in int8 (ONNX Runtime, quantised linear layers) against the default precision.

    python benchmarks/encoder_precision.py [--data ../shared/data] [--no-write]

Two open-umls bundles of the bundled encoder that differ only in `build --precision`: the
default (`auto`: bf16 autocast on CPUs that compute it, as here; the same run's baseline) and
`int8`. Reported: each build's seconds (from its manifest; `cached_bundle` reuses a bundle while
the code that determines its content is unchanged, and the table says whether this run built
it), and on XL-BEL v0.0 (en, es, de, zh, ja) and Mantra GSC (en, es, fr) the Acc@1 per language of
the dense retriever alone and of the hybrid default, top-5, with mentions/s over each set.
"""

from __future__ import annotations

import argparse
import time

from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.encoders.cache import CachedEncoder
from babelink.eval import benchmark
from babelink.linker import Linker
from babelink.retrieve.generators import DenseGenerator

PRECISIONS = {"default (bf16 autocast, baseline)": {}, "int8": {"encoder_settings": {"precision": "int8"}}}
SETS = {"XL-BEL v0.0": benchmark.xlbel_set, "Mantra GSC": benchmark.mantra_set}


def evaluate(path, data) -> dict:
    """{(set, system): run_normalization result} for the dense retriever and the hybrid default."""
    bundle = load_bundle(path)
    encoder = CachedEncoder(bundle.encoder())
    linkers = {"dense": Linker(bundle, DenseGenerator(bundle.kb, bundle.names, bundle.dense, encoder)),
               "hybrid": Linker(bundle, encoder=encoder)}
    results = {}
    for set_name, make_set in SETS.items():
        query_set = make_set(data, bundle.kb)
        for system, linker in linkers.items():
            encoder.clear()  # each system pays for its own encoding
            linker.normalize(["warm-up"])
            results[set_name, system] = benchmark.run_normalization(
                lambda mentions, linker=linker: [[c.concept_id for c in found]
                                                 for found in linker.normalize(mentions, top_k=5)], query_set)
    return results


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    builds, results = {}, {}
    for label, options in PRECISIONS.items():
        started = time.perf_counter()
        path = cached_bundle(args.data, "open-umls", **options)
        manifest = load_bundle(path).manifest
        builds[label] = (manifest["build_seconds"], time.perf_counter() - started > 5, manifest["kb"]["strings"])
        results[label] = evaluate(path, args.data)
    labels = list(PRECISIONS)
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — encoder precision: int8 against the default (commit `{commit()}`)", "",
        f"Command: `python benchmarks/encoder_precision.py` · machine: {machine()} · open-umls, bundled encoder", "",
        "| precision | build s | built in this run | name strings | strings encoded per build s |",
        "|---|---:|---|---:|---:|",
        *(f"| {label} | {seconds:,.0f} | {'yes' if now else 'no (cached)'} | {strings:,} | {strings / seconds:,.0f} |"
          for label, (seconds, now, strings) in builds.items()), "",
        "| set | language | system | " + " | ".join(f"{label} Acc@1" for label in labels) + " | difference |",
        "|---|---|---|" + "---:|" * (len(labels) + 1),
    ]
    for set_name in SETS:
        for system in ("dense", "hybrid"):
            groups = results[labels[0]][set_name, system]["groups"]
            for lang in groups:
                scores = [results[label][set_name, system]["groups"][lang]["acc@1"] for label in labels]
                lines.append(f"| {set_name} | {lang} | {system} | " + " | ".join(f"{s:.3f}" for s in scores)
                             + f" | {scores[-1] - scores[0]:+.3f} |")
    lines += ["", "| set | system | " + " | ".join(f"{label} mentions/s" for label in labels) + " |",
              "|---|---|" + "---:|" * len(labels)]
    for set_name in SETS:
        for system in ("dense", "hybrid"):
            lines.append(f"| {set_name} | {system} | " + " | ".join(
                f"{results[label][set_name, system]['mentions_per_second']:,.0f}" for label in labels) + " |")
    publish("\n".join(lines) + "\n", not args.no_write, "speed")


if __name__ == "__main__":
    main()
