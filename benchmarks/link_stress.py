"""Linking bad and huge inputs: what happens, how long it takes, and how much memory it holds.

    python benchmarks/link_stress.py [--data ../shared/data] [--no-write] [--megabytes 5]

Each case runs in its own process on the default hybrid CTD MEDIC bundle (see
`report.cached_bundle`), so its peak RSS is its own; the baseline case is one PubMed abstract.
The huge document is NCBI-disease test abstracts concatenated to `--megabytes` of text: it is
linked in segments (`babelink.link.documents.split_segments`), so memory should stay near the
baseline's while time grows linearly.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import resource
import time
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.errors import BabelinkError
from babelink.formats.pubtator import iter_pubtator
from babelink.linker import Linker


def _cases(data: Path, megabytes: float) -> dict[str, str]:
    abstracts = [d.text for d in iter_pubtator(data / "bench" / "ncbi_disease" / "NCBItestset_corpus.txt")]
    huge, size = [], 0
    while size < megabytes * 2**20:
        huge.append(abstracts[len(huge) % len(abstracts)])
        size += len(huge[-1].encode()) + 2
    generator = random.Random(0)
    return {
        "one abstract (baseline)": abstracts[0],
        "empty": "",
        "whitespace only": " \n\t " * 1000,
        "binary garbage (random code points)": "".join(chr(generator.randrange(1, 0x2FFFF)) for _ in range(20_000)),
        "mixed scripts and emoji": 50
        * "Patient mit Diabetes 🙂 患者有糖尿病 🩺 החולה סובל מסוכרת 🧪 hypertension artérielle ",
        "lone surrogate": "asthma \ud800 attack",
        f"{megabytes:g} MB document": "\n\n".join(huge),
    }


def case_step(data: str, name: str, megabytes: float) -> dict:
    text = _cases(Path(data), megabytes)[name]
    linker = Linker(load_bundle(cached_bundle(Path(data), "ctd-medic")))
    linker.link("warm-up with asthma")
    started = time.perf_counter()
    try:
        outcome = f"{len(linker.link(text).mentions):,} mentions"
    except BabelinkError as error:
        outcome = f"error: {error}"
    return {"characters": len(text), "seconds": time.perf_counter() - started, "outcome": outcome,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=5.0)
    args = arguments(parser.description, parser)
    results = {}
    for name in _cases(args.data, args.megabytes):
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            results[name] = pool.apply(case_step, (str(args.data), name, args.megabytes))
    baseline = results["one abstract (baseline)"]["rss_mb"]
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — linking bad and huge inputs (commit `{commit()}`)",
        "",
        (
            f"Command: `python benchmarks/link_stress.py --megabytes {args.megabytes:g}` · machine: {machine()} · "
            "default hybrid CTD MEDIC bundle, no filter"
        ),
        "",
        "| input | characters | outcome | seconds | peak RSS MB | × baseline RSS |",
        "|---|---:|---|---:|---:|---:|",
    ]
    lines += [f"| {name} | {r['characters']:,} | {r['outcome']} | {r['seconds']:.2f} | {r['rss_mb']:.0f} | "
              f"{r['rss_mb'] / baseline:.2f} |" for name, r in results.items()]
    publish("\n".join(lines) + "\n", not args.no_write, "robustness")


if __name__ == "__main__":
    main()
