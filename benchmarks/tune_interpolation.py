"""Dev-only choice of the interpolation weight between the bundled encoder and a SAP-trained one.

    python benchmarks/tune_interpolation.py --trained DIR [--weights 0.3 0.5 0.7 1.0] [--data ../shared/data]
        [--no-write]

For each weight w, `babelink train interpolate` mixes the checkpoints (w = 0 is the bundled
encoder, w = 1 the trained one) and dense Acc@1 is measured on two dev sets, each against a
fixed dictionary of its gold concepts plus 5,000 distractor concepts (`DenseDevEvaluator`, the
trainer's `--eval`): QUAERO dev (French, open-umls) and NCBI-disease dev (English, CTD MEDIC),
English because SAP on KB synonyms costs English the most. The chosen weight has the best mean
of the two among those that do not lower NCBI-disease dev below the bundled encoder; test splits
are never read. Only the chosen mix is kept, as `~/.cache/babelink/train/{trained}-w{w}`; the
others are written to a scratch directory and removed once measured.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from report import KB_FILES, arguments, commit, machine, publish

from babelink.encoders import DEFAULT, open_encoder
from babelink.encoders.e5_bundled import bundled_e5_path
from babelink.eval import benchmark
from babelink.home import babelink_home
from babelink.kb.readers import read_kb
from babelink.train.evaluation import DenseDevEvaluator
from babelink.train.interpolate import interpolate_checkpoints

DEV_SETS = {"QUAERO dev": ("open-umls", benchmark.quaero_set), "NCBI-disease dev": ("ctd-medic", benchmark.ncbi_set)}


def _mixed(trained: Path, weight: float, out: Path) -> str | Path:
    """The encoder at `weight`: the checkpoints themselves at 0 and 1, else their mix written to `out`."""
    if weight == 0.0:
        return DEFAULT
    if weight == 1.0:
        return trained
    return interpolate_checkpoints(bundled_e5_path(), trained, weight, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trained", type=Path, required=True, help="the SAP-trained checkpoint directory")
    parser.add_argument("--weights", nargs="+", type=float, default=[0.3, 0.5, 0.7, 1.0])
    args = arguments(parser.description, parser)
    evaluators = {}
    for name, (kb_name, query_set) in DEV_SETS.items():
        kb = read_kb(args.data / KB_FILES[kb_name])
        evaluators[name] = DenseDevEvaluator(kb, query_set(args.data, kb, "dev"))
    scores = {}
    for weight in [0.0, *args.weights]:
        with tempfile.TemporaryDirectory() as scratch:
            encoder = open_encoder(_mixed(args.trained, weight, Path(scratch) / "mix"))
            scores[weight] = {name: evaluate(encoder) for name, evaluate in evaluators.items()}
        print(f"w = {weight}: {scores[weight]}", flush=True)
    english = "NCBI-disease dev"
    allowed = [w for w in scores if scores[w][english] >= scores[0.0][english]]
    chosen = max(allowed, key=lambda w: sum(scores[w].values()))
    kept = _mixed(args.trained, chosen, babelink_home() / "train" / f"{args.trained.name}-w{chosen:g}")
    print(f"chosen w = {chosen:g}: {kept}", flush=True)
    lines = [f"## {time.strftime('%Y-%m-%d')} — SAP interpolation weight, dev only (commit `{commit()}`)", "",
             (f"Command: `python benchmarks/tune_interpolation.py --trained {args.trained} --weights "
             f"{' '.join(f'{w:g}' for w in args.weights)}` · machine: {machine()}"), "",
             ("Dense Acc@1 against each dev set's gold concepts + 5,000 distractors; w = share of the trained weights "
             "(0: bundled e5-small):"), "",
             f"| w | {' | '.join(DEV_SETS)} | mean |", "|---:|" + "---:|" * (len(DEV_SETS) + 1)]
    for weight, found in scores.items():
        mark = " ← chosen" if weight == chosen else ""
        lines.append(f"| {weight:g}{mark} | " + " | ".join(f"{found[name]:.3f}" for name in DEV_SETS)
                     + f" | {sum(found.values()) / len(found):.3f} |")
    publish("\n".join(lines) + "\n", not args.no_write, "tuning")


if __name__ == "__main__":
    main()
