"""`babelink link`: whole texts → detected mentions and their concepts, resumable at corpus scale."""

from __future__ import annotations

from collections import Counter
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from babelink.cli.options import (
    BundleOption,
    CodesOption,
    FilterOption,
    KeepModifiersOption,
    LangsOption,
    LinkThresholdOption,
    MinProbabilityOption,
    ModelOption,
    RecallThresholdOption,
    SourcesOption,
    TypesOption,
    counted,
    language_option,
    link_params,
)
from babelink.errors import InvalidInputError
from babelink.fsutil import refuse_same_file


class LinkFormat(str, Enum):
    jsonl = "jsonl"
    pubtator = "pubtator"
    bioc = "bioc"
    bioc_json = "bioc-json"
    brat = "brat"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


def link(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to link (or use --input).")] = None,
    bundle: BundleOption = None,
    input_path: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help='JSONL ({"id", "text"} lines), PubTator, BioC (.xml/.json), a text file, '
            "a directory of .txt files, or '-' (JSONL on stdin).",
        ),
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Output file ('-' for stdout); a directory for brat.")
    ] = "-",
    output_format: Annotated[LinkFormat, typer.Option("--format", help="Output format.")] = LinkFormat.jsonl,
    context_filter: FilterOption = None,
    lang: Annotated[
        str | None, typer.Option("--lang", callback=language_option,
                                   help="Language of every text (ISO 639-1, UMLS LAT or a locale such as pt-BR); "
                                        "guessed per text when omitted.")
    ] = None,
    candidates: Annotated[
        bool, typer.Option("--candidates", help="JSONL: each mention's ranked candidates too.")
    ] = False,
    min_probability: MinProbabilityOption = None,
    link_threshold: LinkThresholdOption = None,
    recall_threshold: RecallThresholdOption = None,
    keep_modifiers: KeepModifiersOption = False,
    types: TypesOption = None,
    sources: SourcesOption = None,
    langs: LangsOption = None,
    codes: CodesOption = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Documents linked together.")] = 16,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="JSONL file or brat output: start over instead of skipping the documents an earlier run wrote.",
        ),
    ] = False,
    engine: Annotated[
        Engine,
        typer.Option(
            "--engine",
            help="local: this process; ray: Ray Data actors, each loading the bundle once per 10,000 documents.",
        ),
    ] = Engine.local,
    ray_workers: Annotated[
        int, typer.Option("--ray-workers", min=1, help="--engine ray: linking actors (one CPU each).")
    ] = 2,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="--engine ray: a running cluster ('auto', 'ray://head:10001'); a local one when omitted.",
        ),
    ] = None,
    ner: Annotated[
        Path | None,
        typer.Option(
            "--ner", help="Learned mention detector directory (babelink train ner) instead of span enumeration."
        ),
    ] = None,
    model: ModelOption = None,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Report a document that cannot be linked (its file and line) and go on: an error "
                               "record in JSONL output, left out of the other formats.")] = False,
) -> None:
    """Detect and link the concept mentions of whole texts (any language).

    JSONL to a file and brat output resume: rerun after a kill and the written documents are skipped."""
    from babelink.corpus.resume import write_linked
    from babelink.formats.document import Document
    from babelink.formats.inputs import read_input_documents

    if bool(texts) == bool(input_path):
        raise InvalidInputError("give texts as arguments or --input FILE, not both or neither")
    if output_format is LinkFormat.brat and output == "-":
        raise InvalidInputError("--format brat writes a directory: give --output DIR")
    refuse_same_file(output, [input_path])
    if (ner is not None or model is not None or skip_invalid) and engine is Engine.ray:
        raise InvalidInputError("--ner, --model and --skip-invalid run with --engine local only")
    documents = ([Document(str(number), text, lang=lang) for number, text in enumerate(texts, start=1)] if texts
                 else read_input_documents(input_path, lang=lang))
    from babelink.retrieve.filters import NameFilter

    params = link_params(min_probability, keep_modifiers, link_threshold, recall_threshold)
    name_filter = NameFilter.of(types, sources, langs)
    if (name_filter or codes) and engine is Engine.ray:
        raise InvalidInputError("--types, --sources, --langs and --codes run with --engine local only")
    if engine is Engine.ray:
        from babelink.bundle.default import default_bundle
        from babelink.bundle.store import load_bundle
        from babelink.corpus.ray_engine import link_with_ray
        from babelink.link.documents import bundle_link_params
        from babelink.link.settings import with_settings

        loaded = load_bundle(bundle or default_bundle())
        reads = loaded.languages
        provenance = with_settings(loaded.provenance, bundle_link_params(loaded.manifest, **params),
                                   context_filter=context_filter)  # as each worker's linker will say
        done = _resumed(output, output_format, overwrite, provenance)
        results = link_with_ray(documents, done, bundle=bundle, context_filter=context_filter, params=params,
                                batch_size=batch_size, workers=ray_workers, address=ray_address)
    else:
        from babelink.linker import Linker

        # loaded now; documents link lazily. Texts on the command line: start fast (no torch); a file: encode fast
        linker = Linker.open(bundle, filter=context_filter, ner=ner, name_filter=name_filter, model=model,
                             runtime="onnx" if texts else "torch", **params)
        reads = linker.languages
        done = _resumed(output, output_format, overwrite, linker.provenance)
        vocabularies = linker.checked_vocabularies(codes) if codes else None
        results = _reporting_skips(linker.link_stream((d for d in documents if d.id not in done), batch_size,
                                                      skip_invalid))
        if vocabularies is not None:
            results = (linked.in_vocabularies(vocabularies) for linked in results)
    if lang is not None and lang not in reads:
        typer.echo(_unread_notice(f"the bundle has no names and no lexicon in {lang!r}", reads), err=True)
    elif lang is None:
        results = _reporting_unread(results, reads)
    with counted("linking", skipped=len(done)) as advance:
        write_linked((advance(result) for result in results), output, output_format.value, candidates=candidates,
                     overwrite=overwrite)


def _resumed(output: str, output_format: LinkFormat, overwrite: bool, provenance: dict) -> set[str]:
    """The documents an earlier run of this bundle and settings wrote to `output`, skipped by this one."""
    from babelink.corpus.resume import completed_ids

    done = completed_ids(output, output_format.value, overwrite, provenance)
    if done:
        typer.echo(f"resuming {output}: skipping {len(done):,} documents already linked (--overwrite to start over)",
                   err=True)
    return done


def _reporting_unread(results, languages: frozenset[str]):
    """The results; at their end, on stderr, how many documents linked no mention and were read as
    a language the bundle has neither names nor a lexicon in: nothing else would say why. (One it
    cannot read that still links, a Spanish title read as Galician, is searched through the
    lexicon that knows most of its words.)"""
    unread: Counter[str] = Counter()
    for result in results:
        if not result.mentions and result.lang is not None and result.lang not in languages:
            unread[result.lang] += 1
        yield result
    if unread:
        counts = ", ".join(f"{code} ({count:,} document{'s' * (count != 1)})" for code, count in unread.most_common())
        typer.echo(_unread_notice(f"no mention in documents read as {counts}: the bundle has no names and no lexicon "
                                  f"in {'this language' if len(unread) == 1 else 'these languages'}", languages),
                   err=True)


def _unread_notice(what: str, languages: frozenset[str]) -> str:
    return (f"babelink: {what} (it reads {', '.join(sorted(languages))}): mentions are found only where words match "
            "its names or its lexicons across languages; a lexicon for the language lets it read more (`babelink "
            "update --translations en-XX.tsv`, docs/translation-and-calibration.md)")


def _reporting_skips(results):
    """The results, each document skipped as invalid reported on stderr as it goes by."""
    skipped = 0
    for result in results:
        if result.error is not None:
            skipped += 1
            typer.echo(f"babelink: skipped {result.error}", err=True)
        yield result
    if skipped:
        typer.echo(f"babelink: {skipped:,} documents skipped (--skip-invalid)", err=True)
