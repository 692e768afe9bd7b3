"""`babelink normalize`: mentions → ranked concepts."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from enum import Enum
from typing import Annotated

import typer

from babelink.cli.options import BundleOption
from babelink.errors import InvalidInputError
from babelink.fsutil import refuse_same_file
from babelink.retrieve.candidate import MAX_TOP_K


class OutputFormat(str, Enum):
    jsonl = "jsonl"
    tsv = "tsv"


def normalize(
    mentions: Annotated[list[str] | None, typer.Argument(help="Mentions to normalise (or use --input).")] = None,
    bundle: BundleOption = None,
    input_path: Annotated[str | None, typer.Option(
        "--input", "-i", help="File with one mention per line; '-' for stdin.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file; '-' for stdout.")] = "-",
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=MAX_TOP_K, help="Concepts per mention.")] = 5,
    output_format: Annotated[OutputFormat, typer.Option(
        "--format", help="jsonl: one object per mention; tsv: one row per candidate.")] = OutputFormat.jsonl,
    ngram_threshold: Annotated[float | None, typer.Option(
        "--ngram-threshold", help="JSONL: a mention whose best score is below this gets \"parts\", its n-grams "
                                  "linked by the n-gram search loop.")] = None,
) -> None:
    """Rank KB concepts for each mention (any language)."""
    from babelink.formats.inputs import read_mentions
    from babelink.fsutil import atomic_output
    from babelink.link.linker import Linker
    from babelink.link.records import TSV_HEADER, normalize_record, tsv_rows

    if bool(mentions) == bool(input_path):
        raise InvalidInputError("give mentions as arguments or --input FILE, not both or neither")
    refuse_same_file(output, [input_path])
    for mention in mentions or ():
        if not mention.strip():
            raise InvalidInputError("empty mention given as an argument")
    linker = Linker.open(bundle)
    items = ((mention, mention) for mention in mentions) if mentions else read_mentions(input_path)
    pending: collections.deque[str] = collections.deque()  # mentions whose searched text is in flight

    def searched_texts() -> Iterator[str]:
        for mention, text in items:
            pending.append(mention)
            yield text

    with atomic_output(output) as out:
        if output_format is OutputFormat.tsv:
            out.write(TSV_HEADER)
        for searched, candidates in linker.normalize_stream(searched_texts(), top_k):
            mention = pending.popleft()
            if output_format is OutputFormat.tsv:
                out.write(tsv_rows(mention, candidates))
                continue
            parts = None
            if ngram_threshold is not None and (not candidates or candidates[0].score < ngram_threshold):
                parts = linker.search_ngrams(mention, ngram_threshold, top_k)
            out.write(json.dumps(normalize_record(mention, candidates, searched=searched, parts=parts),
                                 ensure_ascii=False) + "\n")
