"""Choose the TF-IDF analyzer on dev data only: NCBI-disease dev and BC5CDR-Disease dev (CTD MEDIC).

    python benchmarks/tune_sparse.py [--data ../shared/data] [--no-write]

Scores each (analyzer, n-gram range, sublinear TF) setting by exhaustive cosine Acc@1 and
appends the grid to benchmarks/log/tuning.md. Test sets are never read here.
"""

from __future__ import annotations

import itertools
import sys
import time

from report import arguments, commit, machine, publish

from babelink.eval import benchmark
from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex, TfidfParams
from babelink.kb.readers import read_kb
from babelink.retrieve.generators import SparseGenerator
from babelink.text import normalize_name

GRID = [
    TfidfParams(analyzer=analyzer, ngram_min=low, ngram_max=high, sublinear_tf=sublinear, exhaustive=True)
    for analyzer, (low, high), sublinear in itertools.product(
        ("char", "char_wb"), ((1, 3), (2, 3), (3, 3), (2, 4), (1, 4)), (True, False)
    )
]


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    kb = read_kb(args.data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz")
    names = NameTable.from_kb(kb)
    dev_sets = [benchmark.ncbi_set(args.data, kb, "dev"), benchmark.bc5cdr_set(args.data, kb, "dev")]
    default = TfidfParams()
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — TF-IDF analyzer grid on dev splits (commit `{commit()}`)",
        "",
        f"Command: `python benchmarks/tune_sparse.py` · machine: {machine()} · KB: CTD MEDIC · exhaustive cosine",
        "",
        "| analyzer | n-grams | sublinear TF | " + " | ".join(f"{s.name} Acc@1" for s in dev_sets) + " | mean |",
        "|---|---|---|" + "---:|" * (len(dev_sets) + 1),
    ]
    for params in GRID:
        generator = SparseGenerator(kb, names, TfidfNameIndex.fit(names.strings, params))

        def normalize(mentions: list[str], generator: SparseGenerator = generator) -> list[list[str]]:
            return [
                [c.concept_id for c in found] for found in generator.generate([normalize_name(m) for m in mentions], 5)
            ]

        scores = [benchmark.run_normalization(normalize, s)["overall"]["acc@1"] for s in dev_sets]
        chosen = (params.analyzer, params.ngram_min, params.ngram_max, params.sublinear_tf) == (
            default.analyzer, default.ngram_min, default.ngram_max, default.sublinear_tf)
        mark = " **(default)**" if chosen else ""
        lines.append(f"| {params.analyzer}{mark} | {params.ngram_min}–{params.ngram_max} | {params.sublinear_tf} | "
                     + " | ".join(f"{score:.3f}" for score in scores) + f" | {sum(scores) / len(scores):.3f} |")
        print(lines[-1], file=sys.stderr)
    publish("\n".join(lines) + "\n", not args.no_write, "tuning")


if __name__ == "__main__":
    main()
