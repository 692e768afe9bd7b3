"""Adding names to a bundle (`babelink update`) against rebuilding it, on open-umls.

    python benchmarks/update_speed.py [--data ../shared/data] [--added 1000] [--no-write]

1,000 names (seed 0) whose normalised strings no other name has are held out of the open-umls
KB; the rest is built as a default hybrid bundle (the rebuild's cost, measured in this run), then
`update_bundle` adds the held-out names back. Both the updated bundle and the full default bundle
(the rebuild, `report.cached_bundle`) then normalise the added names: Acc@1 and how many answers
are identical.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
from report import KB_FILES, arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import build_bundle, load_bundle
from babelink.bundle.update import update_bundle
from babelink.kb.base import KnowledgeBase
from babelink.kb.readers import read_kb
from babelink.linker import Linker
from babelink.text import normalize_name


def _split(kb: KnowledgeBase, count: int) -> tuple[KnowledgeBase, KnowledgeBase]:
    """(the KB without `count` names, those names): non-preferred names whose string is unique."""
    names = kb.names
    strings = [normalize_name(name) for name in names.column("name").to_pylist()]
    frequency = Counter(strings)
    preferred = names.column("preferred").to_pylist()
    eligible = [row for row, (string, first) in enumerate(zip(strings, preferred)) if frequency[string] == 1
                and string and not first]
    held = np.sort(np.random.default_rng(0).choice(eligible, count, replace=False))
    keep = np.ones(names.num_rows, dtype=bool)
    keep[held] = False
    return (KnowledgeBase(names.filter(pa.array(keep)), kb.concepts),
            KnowledgeBase(names.take(pa.array(held)), kb.concepts.slice(0, 0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--added", type=int, default=1000)
    args = arguments(parser.description, parser)
    kb = read_kb(args.data / KB_FILES["open-umls"])
    base, added = _split(kb, args.added)
    rebuilt = cached_bundle(args.data, "open-umls")
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        path = build_bundle(base, Path(scratch) / "base")
        build_seconds = time.perf_counter() - started
        started = time.perf_counter()
        update_bundle(path, added, source="held-out names")
        update_seconds = time.perf_counter() - started
        entry = load_bundle(path).manifest["updates"][0]
        queries = added.names.column("name").to_pylist()
        gold = added.names.column("concept_id").to_pylist()
        answers = {name: [found[0].concept_id if found else None for found in Linker.open(bundle).normalize(queries)]
                   for name, bundle in (("updated", path), ("rebuilt", rebuilt))}
    accuracy = {name: sum(a == g for a, g in zip(found, gold)) / len(gold) for name, found in answers.items()}
    same = sum(a == b for a, b in zip(answers["updated"], answers["rebuilt"]))
    lines = [f"## {time.strftime('%Y-%m-%d')} — update against rebuild (commit `{commit()}`)", "",
             f"Command: `python benchmarks/update_speed.py --added {args.added}` · machine: {machine()}", "",
             (f"open-umls without {args.added:,} held-out names ({base.num_names:,} names) built as the default hybrid "
              f"bundle, then the held-out names added back with `update_bundle`; the rebuild is the full default "
              f"bundle. Update: {entry['new_strings']:,} new strings, {entry['unseen_ngram_share']:.1%} of their "
              f"n-grams unseen by the TF-IDF vocabulary (sparse index {entry['sparse']})."), "",
             "| step | seconds | × update |", "|---|---:|---:|",
             f"| full build (the rebuild's cost) | {build_seconds:,.1f} | {build_seconds / update_seconds:,.1f} |",
             f"| update with {args.added:,} names | {update_seconds:,.1f} | 1.0 |", "",
             "| bundle | Acc@1 on the added names | answers identical to the rebuild's |", "|---|---:|---:|",
             f"| updated | {accuracy['updated']:.3f} | {same:,} / {len(gold):,} |",
             f"| rebuilt | {accuracy['rebuilt']:.3f} | — |", ""]
    publish("\n".join(lines), not args.no_write, "speed")


if __name__ == "__main__":
    main()
