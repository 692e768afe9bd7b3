"""`babelink normalize`: mentions → ranked concepts."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import Enum
from typing import Annotated

import typer

from babelink.cli.options import (
    BundleOption,
    CodesOption,
    LangsOption,
    MinProbabilityOption,
    SourcesOption,
    TypesOption,
    language_option,
)
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
        "--format", help="jsonl: one object per mention; tsv: one row per candidate (mention, rank, id, name, "
                  "matched_name, score, probability, then a column per --codes vocabulary); a mention without "
                  "any, one row with its mention alone.")] = OutputFormat.jsonl,
    ngram_threshold: Annotated[float | None, typer.Option(
        "--ngram-threshold", help="JSONL: a mention whose best score is below this gets \"parts\", its n-grams "
                                  "linked by the n-gram search loop.")] = None,
    lang: Annotated[str | None, typer.Option(
        "--lang", callback=language_option,
        help="Language of the mentions (ISO 639-1, UMLS LAT or a locale such as pt-BR); with translation "
             "lexicons in the bundle, guessed per mention when omitted.")] = None,
    min_probability: MinProbabilityOption = None,
    types: TypesOption = None,
    sources: SourcesOption = None,
    langs: LangsOption = None,
    codes: CodesOption = None,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Write an error record for an unusable mention and go on, instead of stopping "
                               "at its line.")] = False,
) -> None:
    """Rank KB concepts for each mention (any language)."""
    from babelink.formats.inputs import read_mentions
    from babelink.fsutil import atomic_output
    from babelink.link.records import normalize_lines, tsv_header, tsv_rows
    from babelink.linker import Linker

    if bool(mentions) == bool(input_path):
        raise InvalidInputError("give mentions as arguments or --input FILE, not both or neither")
    refuse_same_file(output, [input_path])
    from babelink.retrieve.filters import NameFilter

    # a few mentions on the command line: start fast (no torch); a file: encode fast
    linker = Linker.open(bundle, name_filter=NameFilter.of(types, sources, langs),
                         runtime="onnx" if mentions else "torch")
    vocabularies = linker.checked_vocabularies(codes) if codes else None
    if mentions:
        lines, source = ((number, mention, mention) for number, mention in enumerate(mentions, 1)), "<arguments>"
    else:
        lines, source = read_mentions(input_path), "<stdin>" if input_path == "-" else input_path
    with atomic_output(output) as out:
        if output_format is OutputFormat.tsv:
            out.write(tsv_header(vocabularies or ()))
        items = normalize_lines(linker, lines, top_k, source, skip_invalid, lang, min_probability or 0.0,
                                None if output_format is OutputFormat.tsv else ngram_threshold)
        for item in items:
            result = item.result
            if vocabularies is not None:
                result = replace(result, candidates=[c.in_vocabularies(vocabularies) for c in result.candidates])
                item = replace(item, result=result)
            if result.error is not None:
                typer.echo(f"{source}:{item.line}: skipped: {result.error}", err=True)
            if output_format is OutputFormat.tsv:
                out.write(tsv_rows(item.mention, result.candidates, vocabularies or ()))
                continue
            # an unusable mention may hold a lone surrogate: JSON escapes it
            record = item.record(linker.bundle.provenance)
            out.write(json.dumps(record, ensure_ascii=result.error is not None) + "\n")
