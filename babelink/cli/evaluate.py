"""`babelink evaluate`: a `link` output scored against the gold corpus it was linked from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from babelink.cli import options


def evaluate(
    gold: Annotated[Path, typer.Option(
        "--gold", "-g", help="The annotated corpus: PubTator, BioC (.xml/.json) or a brat directory.")],
    predicted: Annotated[Path, typer.Option(
        "--predicted", "-p", help="`babelink link` output on that corpus (JSONL, PubTator, BioC or brat), or "
                                  "another system's in one of the last three.")],
    bundle: options.BundleOption = None,
    types: Annotated[list[str] | None, typer.Option(
        "--types", help="Score only gold annotations of these types, e.g. Disease in BC5CDR (repeat or "
                        "comma-separate); all when omitted.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Where the scores go ('-': stdout).")] = "-",
) -> None:
    """Score linked documents against gold annotations: strict and partial P/R/F1 of linking and of detection.

    Gold concept ids are resolved to the ids of the bundle's KB (alternative ids included), the
    bundle the predictions were linked with; gold mentions without an id there are left out of
    the linking scores, as in BENCHMARKS.md."""
    from babelink.bundle.default import default_bundle
    from babelink.bundle.store import load_bundle
    from babelink.eval.linking import read_predictions, score_linking
    from babelink.formats import read_documents
    from babelink.fsutil import atomic_output
    from babelink.text import comma_list

    wanted = set(comma_list(types)) or None
    loaded = load_bundle(bundle or default_bundle())
    scores = score_linking(read_predictions(predicted), read_documents(gold), loaded.kb, wanted,
                           bundle_id=loaded.provenance["bundle"], predicted_name=str(predicted), gold_name=str(gold))
    shown = {"gold": str(gold), "predicted": str(predicted), "types": sorted(wanted) if wanted else None,
             "bundle": loaded.provenance, **scores}
    with atomic_output(output) as out:
        out.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
