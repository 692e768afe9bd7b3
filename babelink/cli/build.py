"""`babelink build`: a KB file → a bundle directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from babelink.cli.options import IndexKind, KbFormatOption, Retriever, TranslationsOption
from babelink.errors import InvalidInputError
from babelink.fsutil import refuse_same_file
from babelink.lang import parse_languages


def build(
    kb: Annotated[Path, typer.Option(
        "--kb", help="KB file or directory (MRCONSO.RRF, CTD_diseases.tsv, .obo, .tsv, .jsonl).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to write (replaced atomically).")],
    kb_format: KbFormatOption = None,
    lang: Annotated[list[str] | None, typer.Option(
        "--lang", help="Keep names in these languages (ISO or UMLS LAT; repeat or comma-separate).")] = None,
    source: Annotated[list[str] | None, typer.Option(
        "--source", help="UMLS only: keep these SABs (repeat or comma-separate).")] = None,
    term_type: Annotated[list[str] | None, typer.Option(
        "--term-type", help="UMLS only: keep these TTYs (repeat or comma-separate).")] = None,
    retriever: Annotated[Retriever, typer.Option(
        "--retriever", help="Candidate generation: TF-IDF, encoder, or both fused.")] = Retriever.hybrid,
    encoder: Annotated[str, typer.Option(
        "--encoder", help="'default' (bundled multilingual-e5-small), a packaged trained encoder's name "
                               "(e5-sap: docs/training.md) or a checkpoint directory.")] = "default",
    pooling: Annotated[str | None, typer.Option(
        "--pooling", help="cls|mean; default: the checkpoint's babelink_encoder.json, else cls.")] = None,
    prefix: Annotated[str | None, typer.Option(
        "--prefix", help="Text prepended to every name and mention before encoding.")] = None,
    precision: Annotated[str | None, typer.Option(
        "--precision", help="auto|fp32|bf16|fp16: one vector space (auto: bf16 where the CPU has it, fp16 on "
                            "a GPU); int8: ONNX "
                            "Runtime with quantised layers, faster on CPUs with int8 dot products, a space of its "
                            "own that queries use too; scores vary slightly with batching (README).")] = None,
    index: Annotated[IndexKind, typer.Option(
        "--index", help="FAISS layout: exact, graph (default), or compressed (UMLS scale); or lazy: no name "
        "encoded at build, the TF-IDF shortlist ranked by the encoder, names encoded on first need and kept.")
    ] = IndexKind.hnsw,
    ef_search: Annotated[int | None, typer.Option(
        "--ef-search", min=1,
        help="hnsw: search breadth (default 128); wider finds more true neighbours, slower (BENCHMARKS.md).")] = None,
    nprobe: Annotated[int | None, typer.Option(
        "--nprobe", min=1, help="ivfpq: inverted lists visited per query (default 64); more recall, slower.")] = None,
    spans_from: Annotated[Path | None, typer.Option(
        "--spans-from",
        help="Annotated documents (PubTator file or brat directory) for a labeled-span index searched before the KB.")
    ] = None,
    switch_threshold: Annotated[float | None, typer.Option(
        "--switch-threshold", help="Score a labeled span needs to be used before the KB.")] = None,
    link_threshold: Annotated[float | None, typer.Option(
        "--link-threshold", min=0.0, max=1.0,
        help="The link threshold `link` uses on this bundle unless told otherwise (default: the library's, 0.98, "
             "chosen on dev for the bundled encoder): give the one dev chose for --encoder.")] = None,
    recall_threshold: Annotated[float | None, typer.Option(
        "--recall-threshold", min=0.0, max=1.0,
        help="The TF-IDF gate `link` uses on this bundle unless told otherwise (default: the library's, 0.55).")
    ] = None,
    dft_from: Annotated[Path | None, typer.Option(
        "--dft-from", help="Annotated documents whose mentions extend the KB names (dictionary fine-tuning).")] = None,
    dft_ratio: Annotated[float, typer.Option(
        "--dft-ratio", min=0.0, max=1.0, help="Fraction of --dft-from documents used.")] = 0.2,
    dft_seed: Annotated[int, typer.Option("--dft-seed", help="Seed of the document draw.")] = 0,
    kb_name: Annotated[str | None, typer.Option(
        "--kb-name", help="The KB's name in every prediction's provenance (default: the KB file's name).")] = None,
    kb_version: Annotated[str | None, typer.Option(
        "--kb-version", help="The KB's release, e.g. 2024AA (default: a hash of its content).")] = None,
    translations: TranslationsOption = None,
    types_from: Annotated[list[Path] | None, typer.Option(
        "--types-from",
        help="OBO ontologies (e.g. HPO's hp.obo) whose top branches become the types of the concepts that are, "
             "or cross-reference, their terms: how a KB without MRSTY learns which concepts are clinical "
             "modifiers, which link leaves out; repeat for several.")] = None,
    translations_from_kb: Annotated[bool, typer.Option(
        "--translations-from-kb",
        help="Also mine a lexicon from the KB's own names in English and other languages (after --translations' "
             "senses); how the embedded default translates.")] = False,
) -> None:
    """Read a KB and write a bundle (KB + TF-IDF and/or dense index + manifest)."""
    from babelink import augment
    from babelink.bundle.store import DEFAULT_SWITCH_THRESHOLD, build_bundle, read_manifest
    from babelink.index.dense import DenseParams
    from babelink.kb.obo import read_obo_branches, types_from_ontology
    from babelink.kb.readers import infer_format, read_kb
    from babelink.progress import progress_bar
    from babelink.text import comma_list
    from babelink.translate import read_lexicons
    from babelink.translate.mining import lexicon_with_mined

    refuse_same_file(out, [kb, spans_from, dft_from], "--out")
    lexicon = read_lexicons(translations) if translations else None  # fail fast, before the KB is read
    ontologies = {path: read_obo_branches(path) for path in types_from or ()}
    languages = parse_languages(lang)
    sources, term_types = comma_list(source), comma_list(term_type)
    knowledge_base = read_kb(kb, kb_format, languages=languages, sources=sources, term_types=term_types)
    typed = 0
    for branches in ontologies.values():
        knowledge_base, gained = types_from_ontology(knowledge_base, branches)
        typed += gained
    source_info = {"path": str(kb.absolute()), "format": kb_format or infer_format(kb),
                   "languages": sorted(languages or []), "sources": list(sources), "term_types": list(term_types),
                   "name": kb_name, "version": kb_version,
                   "types_from": [str(path.absolute()) for path in ontologies]}
    spans = augment.span_kb(augment.read_annotated(spans_from), knowledge_base) if spans_from is not None else None
    dft = None
    if dft_from is not None:
        knowledge_base, dft = augment.apply_dft(knowledge_base, dft_from, dft_ratio, dft_seed)
    if translations_from_kb:
        lexicon = lexicon_with_mined(lexicon, knowledge_base)
    breadth = {name: value for name, value in (("ef_search", ef_search), ("nprobe", nprobe)) if value is not None}
    with progress_bar("indexing") as progress:
        path = build_bundle(
            knowledge_base,
            out,
            retriever=retriever.value,
            encoder=encoder,
            encoder_settings={"pooling": pooling, "prefix": prefix, "precision": precision},
            dense_params=DenseParams(kind=index.value, **breadth),
            spans=spans,
            switch_threshold=DEFAULT_SWITCH_THRESHOLD if switch_threshold is None else switch_threshold,
            dft=dft,
            translations=lexicon,
            kb_source=source_info,
            link_thresholds={name: value for name, value in (("link_threshold", link_threshold),
                                                             ("recall_threshold", recall_threshold))
                             if value is not None},
            progress=progress,
        )
    summary = (f"wrote {path}: {len(knowledge_base):,} concepts, {knowledge_base.num_names:,} names, "
               f"{retriever.value} retriever")
    built = read_manifest(path).get("dense", {}).get("encoder")
    if built is not None:  # which encoder, run how: a bundle is queried with this one only
        summary += (f" with encoder {built['name']} ({built['dimension']}-d, precision {built['precision']}, "
                    f"{index.value} index)")
    if spans is not None:
        summary += f", {spans.num_names:,} labeled spans"
    if dft is not None:
        summary += f", {dft.pairs:,} DFT names from {len(dft.documents):,} documents"
    if lexicon is not None:
        summary += f", lexicons for {', '.join(lexicon.languages)}"
    if ontologies:
        summary += f", {typed:,} concepts typed by {', '.join(path.name for path in ontologies)}"
    typer.echo(summary, err=True)


def update(
    bundle: Annotated[Path | None, typer.Option(
        "--bundle", "-b", help="Bundle directory to change (default: the embedded default bundle).")] = None,
    add: Annotated[Path | None, typer.Option(
        "--add", help="Names to add: a KB file in any format (.tsv with id, name[, lang…]; .jsonl; …).")] = None,
    index: Annotated[IndexKind | None, typer.Option(
        "--index", help="Give the bundle this dense index: `hnsw` turns a lazy index into the FAISS search of "
        "every name, encoding only the names not encoded yet.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the updated bundle here (default: replace --bundle atomically).")] = None,
    kb_format: KbFormatOption = None,
    translations: TranslationsOption = None,
) -> None:
    """Add concepts, synonyms and codes to a bundle (encoding only the new names; read with the build's --lang,
    --source, --term-type and --types-from), translation lexicons (their senses before the bundle's own), or give
    it another dense index."""
    from babelink.bundle.default import default_bundle
    from babelink.bundle.store import read_manifest
    from babelink.bundle.update import add_translations, read_additions, reindex_bundle, update_bundle
    from babelink.index.dense import DenseParams
    from babelink.progress import progress_bar
    from babelink.translate import read_lexicons

    if add is None and index is None and not translations:
        raise InvalidInputError("nothing to do: give --add FILE, --translations FILE, --index KIND, or several")
    lexicon = read_lexicons(translations) if translations else None  # a malformed line stops here, bundle untouched
    bundle = bundle or default_bundle()
    refuse_same_file(out or bundle, [add], "--out")
    if add is not None:
        additions, notes = read_additions(bundle, add, kb_format)  # a malformed row stops here, bundle untouched
        for note in notes:
            typer.echo(f"warning: {note}", err=True)
        before = read_manifest(bundle)["build_id"]
        path = update_bundle(bundle, additions, out, source=add.name)
        after = read_manifest(path)
        if after["build_id"] == before:
            typer.echo(f"{path}: unchanged, the bundle has every name and code of {add} already", err=True)
        else:
            update = after["updates"][-1]
            there = update["given"] - update["names"]
            typer.echo(f"wrote {path}: added {update['names']:,} names ({update['new_concepts']:,} new concepts)"
                       + (f", gave {update['enriched_concepts']:,} concepts more types or codes"
                          if update["enriched_concepts"] else "")
                       + (f"; {there:,} of the names given were there already" if there else ""), err=True)
        bundle, out = path, None
    if lexicon is not None:
        before = read_manifest(bundle)["build_id"]
        path = add_translations(bundle, lexicon, out)
        after = read_manifest(path)
        if after["build_id"] == before:
            typer.echo(f"{path}: unchanged, the bundle has every lexicon given already", err=True)
        else:
            entries = after["translations"]["languages"]
            typer.echo(f"wrote {path}: lexicons for " + ", ".join(
                f"{lang} ({entries[lang]:,} words)" for lang in sorted({s.lang for s in lexicon.sources})), err=True)
        bundle, out = path, None
    if index is not None:
        with progress_bar("indexing") as progress:
            path = reindex_bundle(bundle, DenseParams(kind=index.value), out, progress=progress)
        typer.echo(f"wrote {path}: {index.value} index over {read_manifest(path)['kb']['strings']:,} name strings",
                   err=True)
