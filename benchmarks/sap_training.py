"""SAP on this CPU: the bundled multilingual-e5-small before and after self-alignment pretraining.

    python benchmarks/sap_training.py --encoder DIR [--label "all_syn, 90 min"] [--data ../shared/data] [--no-write]

Train first (the commands are in benchmarks/log/reproducing.md), e.g.

    babelink train sap --kb ../shared/data/kb/open-umls/MRCONSO.RRF --out ~/.cache/babelink/train/sap-all \\
        --freeze-embeddings --max-minutes 90 --batch-pairs 64 --lr 5e-5

then this script builds a default (hybrid, HNSW) open-umls bundle with each encoder — the untrained
bundled one (baseline, same run) and `--encoder` — and reports XL-BEL v0.0 visible-language
in-KB Acc@1/Acc@5 per language and Mantra GSC in-KB Acc@1, with the dense retriever alone (the
encoder's own quality) and with the default hybrid retriever.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from report import arguments, cached_bundle, commit, machine, publish

from babelink.bundle.store import load_bundle
from babelink.eval import benchmark
from babelink.linker import Linker
from babelink.retrieve.generators import DenseGenerator, HybridGenerator, HybridParams
from babelink.train.interpolate import RECORD_FILE


def _scores(bundle, generator, data: Path) -> dict:
    linker = Linker(bundle, generator)

    def normalize(mentions):
        return [[c.concept_id for c in candidates] for candidates in linker.normalize(mentions, top_k=5)]

    return {"xlbel": benchmark.run_normalization(normalize, benchmark.xlbel_set(data, bundle.kb)),
            "mantra": benchmark.run_normalization(normalize, benchmark.mantra_set(data, bundle.kb))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", type=Path, required=True, help="the trained checkpoint directory")
    parser.add_argument("--label", default=None, help="how the encoder was trained, for the report")
    args = arguments(parser.description, parser)
    rows = []
    for label, encoder in (
        ("bundled e5-small (untrained)", "default"),
        (args.label or str(args.encoder), str(args.encoder.absolute())),
    ):
        options = {} if encoder == "default" else {"encoder": encoder}  # the default bundle's cache key
        bundle = load_bundle(cached_bundle(args.data, "open-umls", **options))
        vector_encoder = bundle.encoder()
        dense = _scores(bundle, DenseGenerator(bundle.kb, bundle.names, bundle.dense, vector_encoder), args.data)
        hybrid = _scores(bundle, HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, vector_encoder,
                                                 HybridParams()), args.data)
        rows.append((label, dense, hybrid))
    trained = json.loads((args.encoder / "sap_config.json").read_text())
    record = args.encoder / RECORD_FILE
    mixed = json.loads(record.read_text()) if record.is_file() else None
    languages = list(rows[0][1]["xlbel"]["groups"])
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — SAP training, XL-BEL before/after (commit `{commit()}`)",
        "",
        f"Command: `python benchmarks/sap_training.py --encoder {args.encoder}` · machine: {machine()}",
        "",
        f"Trained encoder: {trained['steps']:,} steps, config `{json.dumps(trained, sort_keys=True)}`"
        + (
            f"; then interpolated with the bundled encoder (`babelink train interpolate`): `{json.dumps(mixed)}`"
            if mixed
            else ""
        )
        + ".",
        "",
        "XL-BEL v0.0 in-KB Acc@1 / Acc@5 per language (open-umls, HNSW index), mean of Acc@1, Mantra GSC in-KB Acc@1:",
        "",
        "| encoder | retriever | " + " | ".join(languages) + " | mean Acc@1 | Mantra Acc@1 |",
        "|---|---|" + "---:|" * (len(languages) + 2),
    ]
    for label, dense, hybrid in rows:
        for retriever, scores in (("dense", dense), ("hybrid", hybrid)):
            groups = scores["xlbel"]["groups"]
            cells = " | ".join(f"{groups[lang]['acc@1']:.3f} / {groups[lang]['acc@5']:.3f}" for lang in languages)
            mean = sum(groups[lang]["acc@1"] for lang in languages) / len(languages)
            lines.append(
                f"| {label} | {retriever} | {cells} | {mean:.3f} | {scores['mantra']['overall']['acc@1']:.3f} |"
            )
    publish("\n".join(lines) + "\n", not args.no_write, "sap-training")


if __name__ == "__main__":
    main()
