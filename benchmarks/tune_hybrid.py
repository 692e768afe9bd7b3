"""Dev-only tuning of the hybrid fusion weight, the candidate pool and the index-switch threshold.

    python benchmarks/tune_hybrid.py [--encoder default|DIR] [--sets ncbi bc5cdr quaero] [--data ../shared/data]
        [--no-write]

Dev sets: NCBI-disease dev and BC5CDR-Disease dev (CTD MEDIC) and QUAERO dev (French, open-umls,
in-KB), so the weight is not chosen on English alone. `--encoder` tunes for another encoder
than the bundled one (its bundles are built with it), `--sets` on fewer dev sets (an encoder
fine-tuned for one corpus is tuned on that corpus's dev set). Test splits are never read. The switch
threshold is tuned with the labeled-span index of each corpus's *train* split on its dev split.
The objective is the unweighted mean Acc@1 over the sets.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, publish

from babelink import augment
from babelink.bundle.store import build_bundle, load_bundle
from babelink.encoders.cache import CachedEncoder
from babelink.eval import benchmark
from babelink.linker import Linker, generator_for
from babelink.retrieve.generators import HybridGenerator, HybridParams
from babelink.retrieve.switching import SwitchingGenerator

WEIGHTS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 1.0)
POOLS = (16, 32, 64)
THRESHOLDS = (0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 1.01)
TRAIN_FILES = {"NCBI-disease dev": "ncbi_disease/NCBItrainset_corpus.txt",
               "BC5CDR-Disease dev": "bc5cdr/CDR_TrainingSet.PubTator.txt"}


def _acc1(generator, query_set) -> float:
    linker = Linker(None, generator)
    result = benchmark.run_normalization(
        lambda ms: [[c.concept_id for c in cs] for cs in linker.normalize(ms, top_k=1)], query_set, ks=(1,))
    return result["overall"]["acc@1"]


DEV_SETS = {"ncbi": ("ctd-medic", benchmark.ncbi_set), "bc5cdr": ("ctd-medic", benchmark.bc5cdr_set),
            "quaero": ("open-umls", benchmark.quaero_set)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="default", help="encoder of the bundles (default: bundled)")
    parser.add_argument("--sets", nargs="+", choices=list(DEV_SETS), default=list(DEV_SETS))
    args = arguments(parser.description, parser)
    started = time.perf_counter()
    options = {} if args.encoder == "default" else {"encoder": str(Path(args.encoder).absolute())}
    bundles = {
        kb: load_bundle(cached_bundle(args.data, kb, **options)) for kb in {DEV_SETS[key][0] for key in args.sets}
    }
    encoder = CachedEncoder(next(iter(bundles.values())).encoder(), max_entries=1_000_000)
    sets = [
        (bundles[kb], query_set(args.data, bundles[kb].kb, "dev")) for kb, query_set in map(DEV_SETS.get, args.sets)
    ]

    def hybrid(bundle, params):
        return HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder, params)

    grid = {}
    for pool in POOLS:
        for weight in WEIGHTS if pool == HybridParams().pool else ():
            grid[(weight, pool)] = [_acc1(hybrid(b, HybridParams(weight, pool)), s) for b, s in sets]
            print(weight, pool, grid[(weight, pool)], file=sys.stderr)
    best_weight = max(WEIGHTS, key=lambda w: sum(grid[(w, HybridParams().pool)]))
    for pool in POOLS:
        if (best_weight, pool) not in grid:
            grid[(best_weight, pool)] = [_acc1(hybrid(b, HybridParams(best_weight, pool)), s) for b, s in sets]
    best = max(grid, key=lambda key: sum(grid[key]))

    switching = {}
    with tempfile.TemporaryDirectory() as scratch:
        for bundle, query_set in [item for item in sets if item[1].name in TRAIN_FILES]:
            documents = augment.read_annotated(args.data / "bench" / TRAIN_FILES[query_set.name])
            spans = augment.span_kb(documents, bundle.kb)
            spans_path = build_bundle(
                spans,
                Path(scratch) / query_set.name,
                retriever="hybrid",
                hybrid_params=HybridParams(*best),
                encoder=bundle.manifest["dense"]["encoder"]["name"],
            )
            span_generator = generator_for(load_bundle(spans_path), encoder)
            kb_generator = hybrid(bundle, HybridParams(*best))
            switching[query_set.name] = [_acc1(SwitchingGenerator(span_generator, kb_generator, t), query_set)
                                         for t in THRESHOLDS]
    means = [sum(column) / len(column) for column in zip(*switching.values())]
    best_threshold = THRESHOLDS[max(range(len(THRESHOLDS)), key=means.__getitem__)]

    names = [query_set.name for _, query_set in sets]
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — hybrid fusion and index switching, dev-only tuning (commit `{commit()}`)",
        "",
        (
            f"Command: `python benchmarks/tune_hybrid.py {' '.join(sys.argv[1:])}` · machine: {machine()} · "
            f"{time.perf_counter() - started:.0f} s"
        ),
        "",
        (
            "Rule: `score = w · dense cosine + (1 − w) · sparse cosine` over the union of both retrievers' "
            "`pool` best name strings (char_wb 2–4-gram TF-IDF). "
            f"w = 0 is sparse re-ranked, w = 1 dense re-ranked. Encoder: {args.encoder}. Acc@1, in-KB dev queries:"
        ),
        "",
        "| w | pool | " + " | ".join(names) + " | mean |",
        "|---:|---:|" + "---:|" * (len(names) + 1),
    ]
    for (weight, pool), scores in grid.items():
        mark = "**" if (weight, pool) == best else ""
        lines.append(f"| {mark}{weight}{mark} | {pool} | " + " | ".join(f"{s:.3f}" for s in scores)
                     + f" | {mark}{sum(scores) / len(scores):.3f}{mark} |")
    lines += [
        "",
        f"Chosen: w = {best[0]}, pool = {best[1]}.",
        "",
        (
            "Index switching (002 §6.2): labeled-span index from each corpus's train split, searched first; "
            "its concepts rank first when the best span scores ≥ threshold and ≥ the KB's best (1.01 = never switch):"
        ),
        "",
        "| threshold | " + " | ".join(switching) + " | mean |",
        "|---:|" + "---:|" * (len(switching) + 1),
    ]
    for position, threshold in enumerate(THRESHOLDS):
        cells = " | ".join(f"{values[position]:.3f}" for values in switching.values())
        lines.append(f"| {threshold} | {cells} | {means[position]:.3f} |")
    lines += ["", f"Chosen: switch threshold {best_threshold}."]
    publish("\n".join(lines) + "\n", not args.no_write, "tuning")


if __name__ == "__main__":
    main()
