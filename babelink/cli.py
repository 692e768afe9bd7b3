"""Command line: a thin layer over `babelink.kb.readers`, `babelink.link.bundle` and `Linker`."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, TextIO

import typer

from babelink.abbreviations import abbreviation_map, expand_abbreviations
from babelink.errors import BabelinkError, InputFormatError, InvalidInputError
from babelink.kb.io import iter_lines, iter_stream_lines
from babelink.lang import parse_languages

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Cross-lingual biomedical entity linking.")


class OutputFormat(str, Enum):
    jsonl = "jsonl"
    tsv = "tsv"


BundleOption = Annotated[
    Path | None, typer.Option("--bundle", "-b", help="Bundle directory; the embedded default when omitted.")
]


class Retriever(str, Enum):
    sparse = "sparse"
    dense = "dense"
    hybrid = "hybrid"


class IndexKind(str, Enum):
    flat = "flat"
    hnsw = "hnsw"
    ivfpq = "ivfpq"


@app.command()
def build(
    kb: Annotated[Path, typer.Option("--kb", help="KB file or directory (MRCONSO.RRF, CTD_diseases.tsv, .obo, .tsv, .jsonl).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to write (replaced atomically).")],
    kb_format: Annotated[str | None, typer.Option("--kb-format", help="umls|ctd|obo|tsv|jsonl|parquet; inferred when omitted.")] = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="Keep names in these languages (ISO or UMLS LAT; repeat or comma-separate).")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="UMLS only: keep these SABs.")] = None,
    term_type: Annotated[list[str] | None, typer.Option("--term-type", help="UMLS only: keep these TTYs.")] = None,
    retriever: Annotated[Retriever, typer.Option("--retriever", help="Candidate generation: TF-IDF, encoder, or both fused.")] = Retriever.hybrid,
    encoder: Annotated[str, typer.Option("--encoder", help="'default' (bundled multilingual-e5-small) or a checkpoint directory.")] = "default",
    pooling: Annotated[str | None, typer.Option("--pooling", help="cls|mean; default: the checkpoint's babelink_encoder.json, else cls.")] = None,
    prefix: Annotated[str | None, typer.Option("--prefix", help="Text prepended to every name and mention before encoding.")] = None,
    index: Annotated[IndexKind, typer.Option("--index", help="FAISS layout: exact, graph (default), or compressed (UMLS scale).")] = IndexKind.hnsw,
    ef_search: Annotated[int | None, typer.Option("--ef-search", min=1, help="hnsw: search breadth (default 128); wider finds more true neighbours, slower (BENCHMARKS.md).")] = None,
    nprobe: Annotated[int | None, typer.Option("--nprobe", min=1, help="ivfpq: inverted lists visited per query (default 64); more recall, slower.")] = None,
    spans_from: Annotated[Path | None, typer.Option("--spans-from", help="Annotated documents (PubTator file or brat directory) for a labeled-span index searched before the KB.")] = None,
    switch_threshold: Annotated[float | None, typer.Option("--switch-threshold", help="Score a labeled span needs to be used before the KB.")] = None,
    dft_from: Annotated[Path | None, typer.Option("--dft-from", help="Annotated documents whose mentions extend the KB names (dictionary fine-tuning).")] = None,
    dft_ratio: Annotated[float, typer.Option("--dft-ratio", min=0.0, max=1.0, help="Fraction of --dft-from documents used.")] = 0.2,
    dft_seed: Annotated[int, typer.Option("--dft-seed", help="Seed of the document draw.")] = 0,
) -> None:
    """Read a KB and write a bundle (KB + TF-IDF and/or dense index + manifest)."""
    from babelink.index.dense import DenseParams
    from babelink.kb.readers import read_kb
    from babelink.link import annotations
    from babelink.link.bundle import DEFAULT_SWITCH_THRESHOLD, build_bundle
    from babelink.progress import progress_bar

    languages = parse_languages(lang)
    knowledge_base = read_kb(kb, kb_format, languages=languages, sources=source, term_types=term_type)
    source_info = {"path": str(kb.absolute()), "format": kb_format, "languages": sorted(languages or []),
                   "sources": source or [], "term_types": term_type or []}
    spans = None
    if spans_from is not None:
        pairs = annotations.mention_pairs(annotations.read_annotated(spans_from), knowledge_base)
        spans = annotations.span_kb(pairs, knowledge_base)
    dft = None
    if dft_from is not None:
        knowledge_base, dft = annotations.apply_dft(knowledge_base, dft_from, dft_ratio, dft_seed)
    search_breadth = {name: value for name, value in (("ef_search", ef_search), ("nprobe", nprobe)) if value is not None}
    dense_params = DenseParams(kind=index.value, **search_breadth)
    with progress_bar("indexing") as progress:
        path = build_bundle(
            knowledge_base, out, retriever=retriever.value, encoder=encoder,
            encoder_settings={"pooling": pooling, "prefix": prefix}, dense_params=dense_params,
            spans=spans, switch_threshold=DEFAULT_SWITCH_THRESHOLD if switch_threshold is None else switch_threshold,
            dft=dft, kb_source=source_info,
            progress=progress,
        )
    summary = f"wrote {path}: {len(knowledge_base):,} concepts, {knowledge_base.num_names:,} names, {retriever.value} retriever"
    if spans is not None:
        summary += f", {spans.num_names:,} labeled spans"
    if dft is not None:
        summary += f", {dft.pairs:,} DFT names from {len(dft.documents):,} documents"
    typer.echo(summary, err=True)


def _mentions_from(input_path: str) -> Iterator[tuple[str, str]]:
    """(mention, text to search) per line. `.jsonl` lines are a JSON string or `{"mention": …,
    "context"?: …}`: a short form the context defines is searched as its long form; `.tsv` uses
    column 1; other files hold one mention per line."""
    name = "<stdin>" if input_path == "-" else input_path
    lines = iter_stream_lines(sys.stdin.buffer, name) if input_path == "-" else iter_lines(input_path)
    for number, line in lines:
        context = None
        if name.endswith(".jsonl"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputFormatError(name, number, f"invalid JSON: {error.msg}") from None
            line, context = (value.get("mention"), value.get("context")) if isinstance(value, dict) else (value, None)
            if not isinstance(line, str) or not isinstance(context, str | None):
                raise InputFormatError(name, number, 'expected a JSON string or an object with a "mention" string '
                                                     'and an optional "context" string')
        elif name.endswith(".tsv"):
            line = line.split("\t", 1)[0]
        if not line.strip():
            raise InputFormatError(name, number, "empty mention")
        yield line, expand_abbreviations(line, abbreviation_map(context)) if context else line


@contextlib.contextmanager
def _open_output(output: str) -> Iterator[TextIO]:
    """stdout for `-`; otherwise a temporary file renamed onto `output` only when complete."""
    if output == "-":
        yield sys.stdout
        return
    target = Path(output)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@app.command()
def normalize(
    mentions: Annotated[list[str] | None, typer.Argument(help="Mentions to normalise (or use --input).")] = None,
    bundle: BundleOption = None,
    input_path: Annotated[str | None, typer.Option("--input", "-i", help="File with one mention per line; '-' for stdin.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file; '-' for stdout.")] = "-",
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Concepts per mention.")] = 5,
    output_format: Annotated[OutputFormat, typer.Option("--format", help="jsonl: one object per mention; tsv: one row per candidate.")] = OutputFormat.jsonl,
    ngram_threshold: Annotated[float | None, typer.Option("--ngram-threshold", help="JSONL: a mention whose best score is below this gets \"parts\", its n-grams linked by the n-gram search loop.")] = None,
) -> None:
    """Rank KB concepts for each mention (any language)."""
    from babelink.link.pipeline import Linker
    from babelink.link.records import normalize_record

    if bool(mentions) == bool(input_path):
        raise InvalidInputError("give mentions as arguments or --input FILE, not both or neither")
    for mention in mentions or ():
        if not mention.strip():
            raise InvalidInputError("empty mention given as an argument")
    linker = Linker.from_bundle(bundle) if bundle else Linker.default()
    items = ((mention, mention) for mention in mentions) if mentions else _mentions_from(input_path)
    pending: collections.deque[str] = collections.deque()  # mentions whose searched text is in flight

    def searched_texts() -> Iterator[str]:
        for mention, text in items:
            pending.append(mention)
            yield text

    with _open_output(output) as out:
        if output_format is OutputFormat.tsv:
            out.write("mention\trank\tid\tname\tmatched_name\tscore\n")
        for searched, candidates in linker.normalize_stream(searched_texts(), top_k):
            mention = pending.popleft()
            if output_format is OutputFormat.jsonl:
                record = normalize_record(mention, candidates)
                if searched != mention:
                    record["searched"] = searched
                if ngram_threshold is not None and (not candidates or candidates[0].score < ngram_threshold):
                    record["parts"] = [part.to_dict() for part in linker.search_ngrams(mention, ngram_threshold, top_k)]
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            else:
                for rank, c in enumerate(candidates, start=1):
                    out.write(f"{mention}\t{rank}\t{c.concept_id}\t{c.name}\t{c.matched_name}\t{c.score:.6f}\n")


class LinkFormat(str, Enum):
    jsonl = "jsonl"
    pubtator = "pubtator"
    bioc = "bioc"
    bioc_json = "bioc-json"
    brat = "brat"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


@app.command()
def link(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to link (or use --input).")] = None,
    bundle: BundleOption = None,
    input_path: Annotated[str | None, typer.Option("--input", "-i", help="JSONL ({\"id\", \"text\"} lines), PubTator, BioC (.xml/.json), a text file, a directory of .txt files, or '-' (JSONL on stdin).")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Output file ('-' for stdout); a directory for brat.")] = "-",
    output_format: Annotated[LinkFormat, typer.Option("--format", help="Output format.")] = LinkFormat.jsonl,
    context_filter: Annotated[Path | None, typer.Option("--filter", help="Contextual filter directory (babelink train filter).")] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="Language of every text (ISO 639-1); guessed per text when omitted.")] = None,
    candidates: Annotated[bool, typer.Option("--candidates", help="JSONL: each mention's ranked candidates too.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Documents linked together.")] = 16,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="JSONL file or brat output: start over instead of skipping the documents an earlier run wrote.")] = False,
    engine: Annotated[Engine, typer.Option("--engine", help="local: this process; ray: Ray Data actors, each loading the bundle once per 10,000 documents.")] = Engine.local,
    ray_workers: Annotated[int, typer.Option("--ray-workers", min=1, help="--engine ray: linking actors (one CPU each).")] = 2,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="--engine ray: a running cluster ('auto', 'ray://head:10001'); a local one when omitted.")] = None,
    ner: Annotated[Path | None, typer.Option("--ner", help="Learned mention detector directory (babelink train ner) instead of span enumeration.")] = None,
) -> None:
    """Detect and link the concept mentions of whole texts (any language). JSONL to a file and
    brat output resume: rerun after a kill and the documents already written are skipped."""
    from babelink.corpus import resume
    from babelink.formats.document import Document
    from babelink.formats.inputs import read_input_documents

    if bool(texts) == bool(input_path):
        raise InvalidInputError("give texts as arguments or --input FILE, not both or neither")
    if output_format is LinkFormat.brat and output == "-":
        raise InvalidInputError("--format brat writes a directory: give --output DIR")
    if input_path not in (None, "-") and output != "-" and Path(input_path).resolve() == Path(output).resolve():
        raise InvalidInputError("--output must not be the --input file")
    if ner is not None and engine is Engine.ray:
        raise InvalidInputError("--ner runs with --engine local only")
    done = resume.completed_ids(output, output_format.value, overwrite)
    if done:
        typer.echo(f"resuming {output}: skipping {len(done):,} documents already linked (--overwrite to start over)",
                   err=True)
    documents = ([Document(str(number), text) for number, text in enumerate(texts, start=1)] if texts
                 else read_input_documents(input_path))
    if engine is Engine.ray:
        from babelink.corpus.ray_engine import link_with_ray

        results = link_with_ray(documents, done, bundle=bundle, context_filter=context_filter, lang=lang,
                                candidates=candidates, batch_size=batch_size, workers=ray_workers, address=ray_address)
    else:
        results = _link_locally(documents, done, bundle, context_filter, lang, candidates, batch_size, ner)
    with _progress_counter("linking", skipped=len(done)) as advance:
        counted = (advance(result) for result in results)
        if output_format is LinkFormat.brat:
            resume.write_brat_each(counted, Path(output))
        elif output_format is LinkFormat.jsonl and output != "-":
            resume.append_jsonl(counted, Path(output), overwrite)
        else:
            with _open_output(output) as out:
                _write_linked(counted, output_format, out)


def _link_locally(documents, skip: set[str], bundle: Path | None, context_filter: Path | None, lang: str | None,
                  candidates: bool, batch_size: int, ner: Path | None = None):
    """Linked results of the documents not in `skip`; the linker loads now, documents link lazily."""
    from babelink.corpus.resume import Linked
    from babelink.detect.ner import NerDetector
    from babelink.link.pipeline import Linker
    from babelink.link.rerank import ContextFilter

    filter_model = ContextFilter(context_filter) if context_filter else None
    detector = NerDetector(ner) if ner else None
    linker = (Linker.from_bundle(bundle, context_filter=filter_model, detector=detector) if bundle
              else Linker.default(context_filter=filter_model, detector=detector))
    pending = ((d.id, d.text, lang or d.lang) for d in documents if d.id not in skip)
    return (Linked.of(document, candidates) for document in linker.link_stream(pending, batch_size))


def _write_linked(results, output_format: LinkFormat, out: TextIO) -> None:
    from babelink.formats.bioc import write_bioc_json, write_bioc_xml
    from babelink.formats.pubtator import write_pubtator

    if output_format is LinkFormat.jsonl:
        for result in results:
            out.write(json.dumps(result.record, ensure_ascii=False) + "\n")
            out.flush()
        return
    writer = {LinkFormat.pubtator: write_pubtator, LinkFormat.bioc: write_bioc_xml,
              LinkFormat.bioc_json: write_bioc_json}[output_format]
    writer((result.as_document() for result in results), out)


@contextlib.contextmanager
def _progress_counter(stage: str, skipped: int = 0):
    """`advance(item) -> item`, counting items on a progress display (on a terminal only);
    `skipped`: documents an earlier run already wrote, shown beside the count."""
    from babelink.progress import progress_bar

    suffix = f" ({skipped:,} skipped: already in the output)" if skipped else ""
    with progress_bar(stage) as progress:
        done = 0

        def advance(item):
            nonlocal done
            done += 1
            progress(f"{stage}: {done:,} documents{suffix}", done, None)
            return item

        yield advance


@app.command()
def info(bundle: BundleOption = None) -> None:
    """Print a bundle's manifest (the embedded default's when --bundle is omitted)."""
    from babelink.link.bundle import read_manifest
    from babelink.link.default import default_bundle

    typer.echo(json.dumps(read_manifest(bundle or default_bundle()), indent=2, ensure_ascii=False))


@app.command()
def serve(
    bundle: BundleOption = None,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    context_filter: Annotated[Path | None, typer.Option("--filter", help="Contextual filter directory (babelink train filter).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Threads running model work (torch already uses every core).")] = 1,
    queue: Annotated[int, typer.Option("--queue", min=1, help="Requests admitted at once; more get 429 with Retry-After.")] = 32,
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="Seconds per request, queueing included; then 503.")] = 30.0,
) -> None:
    """Serve normalize and link over HTTP: REST API (OpenAPI at /docs) and a viewer page at /."""
    import uvicorn

    from babelink.link.pipeline import Linker
    from babelink.link.rerank import ContextFilter
    from babelink.serve import ServiceLimits, create_app

    filter_model = ContextFilter(context_filter) if context_filter else None
    linker = (Linker.from_bundle(bundle, context_filter=filter_model) if bundle
              else Linker.default(context_filter=filter_model))
    service = create_app(linker, ServiceLimits(workers=workers, queue=queue, timeout=timeout))
    typer.echo(f"serving {linker.bundle.path} on http://{host}:{port}/", err=True)
    uvicorn.run(service, host=host, port=port)


train_app = typer.Typer(no_args_is_help=True, help="Train models: the entity encoder (SAP), the contextual filter, the NER detector.")
app.add_typer(train_app, name="train")


@train_app.command("sap")
def train_sap(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output checkpoint directory (resumes from out/resume/ when present).")],
    kb: Annotated[Path | None, typer.Option("--kb", help="KB whose synonyms are the positive pairs (003 §2).")] = None,
    kb_format: Annotated[str | None, typer.Option("--kb-format", help="umls|ctd|obo|tsv|jsonl|parquet; inferred when omitted.")] = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="Read only these KB languages.")] = None,
    synonyms: Annotated[str, typer.Option("--synonyms", help="all_syn | en_syn | <lang>_syn (001 Tab. 3) | none (--kb only scores --eval: continue on --pairs alone, 001 §2.2).")] = "all_syn",
    pairs: Annotated[list[Path] | None, typer.Option("--pairs", help="Translation pairs (english<TAB>foreign), each pair a pseudo-class (001 §2.2).")] = None,
    mentions_from: Annotated[Path | None, typer.Option("--mentions-from", help="Task fine-tuning: annotated documents whose mentions pair with their gold concept's KB names.")] = None,
    init: Annotated[str, typer.Option("--init", help="'default' (bundled multilingual-e5-small) or a checkpoint directory.")] = "default",
    max_minutes: Annotated[float | None, typer.Option("--max-minutes", help="Stop (and save) after this long.")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1)] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1)] = 1,
    batch_pairs: Annotated[int, typer.Option("--batch-pairs", min=2, help="Positive pairs per batch.")] = 128,
    learning_rate: Annotated[float, typer.Option("--lr")] = 2e-5,
    freeze_embeddings: Annotated[bool, typer.Option("--freeze-embeddings", help="Keep the word embeddings fixed (CPU training).")] = False,
    max_pairs_per_concept: Annotated[int, typer.Option("--max-pairs-per-concept", min=1)] = 50,
    margin: Annotated[float, typer.Option("--margin", help="λ of the hard-triplet mining condition.")] = 0.2,
    alpha: Annotated[float, typer.Option("--alpha", help="MS loss positive temperature.")] = 2.0,
    beta: Annotated[float, typer.Option("--beta", help="MS loss negative temperature.")] = 50.0,
    epsilon: Annotated[float, typer.Option("--epsilon", help="MS loss similarity offset.")] = 1.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    eval_set: Annotated[str | None, typer.Option("--eval", help="Dev set scored on --kb to keep the best checkpoint: quaero-dev, ncbi-dev or bc5cdr-dev.")] = None,
    eval_data: Annotated[Path, typer.Option("--eval-data", help="Directory holding the benchmark data (bench/…).")] = Path("../shared/data"),
    eval_every: Annotated[int, typer.Option("--eval-every", min=1, help="Steps between dev evaluations.")] = 200,
    eval_distractors: Annotated[int, typer.Option("--eval-distractors", min=0, help="Concepts besides the dev gold ones in the evaluation dictionary.")] = 5000,
) -> None:
    """Self-alignment pretraining of the encoder on KB synonyms and translation pairs."""
    from babelink.encoders import DEFAULT
    from babelink.encoders.e5_bundled import E5_SETTINGS, bundled_e5_path
    from babelink.encoders.transformer import settings_for
    from babelink.kb.readers import read_kb
    from babelink.link.annotations import read_annotated
    from babelink.progress import progress_bar
    from babelink.train import pairs as training_pairs
    from babelink.train.sap import SapConfig, SapTrainer

    if kb is None and not pairs:
        raise InvalidInputError("give --kb (synonyms or, with --mentions-from, task pairs) and/or --pairs")
    if eval_set is not None and kb is None:
        raise InvalidInputError("--eval scores the encoder on --kb; give --kb")
    positives, evaluate = [], None
    if kb is not None:
        knowledge_base = read_kb(kb, kb_format, languages=parse_languages(lang))
        if mentions_from is not None:
            positives += training_pairs.mention_names(read_annotated(mentions_from), knowledge_base,
                                                      max_pairs_per_concept, seed)
        elif synonyms != "none":
            positives += training_pairs.positive_pairs(training_pairs.synonym_names(knowledge_base, synonyms),
                                                       max_pairs_per_concept, seed)
        if eval_set is not None:
            evaluate = _dev_evaluator(eval_set, eval_data, knowledge_base, eval_distractors)
    for path in pairs or ():
        positives += training_pairs.translation_pairs(path)
    init_path = bundled_e5_path() if init == DEFAULT else Path(init)
    settings = settings_for(init_path, **(E5_SETTINGS if init == DEFAULT else {}))
    config = SapConfig(learning_rate=learning_rate, batch_pairs=batch_pairs, margin=margin, alpha=alpha, beta=beta,
                       epsilon=epsilon, epochs=epochs, max_steps=max_steps, max_minutes=max_minutes,
                       freeze_embeddings=freeze_embeddings, seed=seed)
    trainer = SapTrainer(init_path, positives, out, config, settings)
    typer.echo(f"training on {len(positives):,} positive pairs, {trainer.total_steps:,} steps"
               + (f", resuming at step {trainer.state.step:,}" if trainer.state.step else ""), err=True)
    with progress_bar("training") as progress:
        def report(state, seconds):
            pairs_per_second = (state.step - first_step) * config.batch_pairs / max(seconds, 1e-9)
            progress(f"step {state.step:,} loss {state.loss_history[-1]:.4f} · {pairs_per_second:,.0f} pairs/s",
                     state.step, trainer.total_steps)

        first_step, started = trainer.state.step, time.monotonic()
        path = trainer.train(report, evaluate, eval_every)
    losses, seconds = trainer.state.loss_history, time.monotonic() - started
    rate = (trainer.state.step - first_step) * config.batch_pairs / max(seconds, 1e-9)
    typer.echo(f"wrote {path} after {trainer.state.step:,} steps ({rate:,.0f} pairs/s); last loss {losses[-1]:.4f}"
               if losses else f"wrote {path}", err=True)
    if trainer.state.evaluations:
        step, score = max(trainer.state.evaluations, key=lambda item: item[1])
        typer.echo(f"best {eval_set} Acc@1 {score:.4f} at step {step:,} (kept in {path})", err=True)


@train_app.command("filter")
def train_filter(
    train: Annotated[Path, typer.Option("--train", help="Annotated training documents (PubTator, BioC or a brat directory).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output filter directory (written atomically).")],
    bundle: BundleOption = None,
    dev: Annotated[Path | None, typer.Option("--dev", help="Annotated dev documents: the keep-threshold is tuned on them for strict F1.")] = None,
    init: Annotated[str | None, typer.Option("--init", help="Checkpoint to start from; the bundle's encoder when omitted.")] = None,
    window: Annotated[int, typer.Option("--window", min=0, help="Context words on each side of a span (Ws, 000 §4.4).")] = 2,
    epochs: Annotated[int, typer.Option("--epochs", min=1)] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=2)] = 32,
    learning_rate: Annotated[float, typer.Option("--lr")] = 2e-5,
    negatives: Annotated[float, typer.Option("--negatives-per-positive", min=0.1, help="Subsample the matcher's wrong proposals to at most this many per right one.")] = 4.0,
    layers: Annotated[int | None, typer.Option("--layers", min=1, help="Keep only the encoder's first N transformer layers (faster on CPU).")] = None,
    max_minutes: Annotated[float | None, typer.Option("--max-minutes")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Train the contextual relevance filter (000 §4.4) on the documents the bundle's DFT did not consume."""
    from babelink.formats import read_documents
    from babelink.link.annotations import gold_resolver
    from babelink.link.pipeline import Linker
    from babelink.progress import progress_bar
    from babelink.train import crossencoder

    linker = Linker.from_bundle(bundle) if bundle else Linker.default()
    consumed = set(linker.bundle.dft_documents())
    documents = [document for document in read_documents(train) if document.id not in consumed]
    resolve = gold_resolver(linker.bundle.kb)
    config = crossencoder.FilterTrainingConfig(window=window, learning_rate=learning_rate, epochs=epochs,
                                               batch_size=batch_size, max_negatives_per_positive=negatives, layers=layers,
                                               max_minutes=max_minutes, seed=seed)
    examples = crossencoder.filter_examples(linker.document_linker, documents, resolve, window)
    balanced = crossencoder.balance(examples, config.max_negatives_per_positive, seed)
    typer.echo(f"{len(documents):,} documents ({len(consumed):,} left out: DFT), {len(examples):,} proposals, "
               f"{sum(e.label for e in examples):,} relevant; training on {len(balanced):,}", err=True)
    start = init or linker.bundle.encoder().path
    with progress_bar("training") as progress:
        trained = crossencoder.train_filter(start, balanced, out, config, lambda step, total, loss: progress(
            f"step {step:,}/{total:,} loss {loss:.4f}", step, total))
    if dev is not None:
        linker.document_linker.context_filter = trained
        threshold, f1 = crossencoder.tune_threshold(linker.document_linker, list(read_documents(dev)), resolve)
        trained.save_settings(replace(trained.settings, threshold=threshold))
        typer.echo(f"dev strict F1 {f1[threshold]:.4f} at threshold {threshold}", err=True)
    typer.echo(f"wrote {out}", err=True)


@train_app.command("ner")
def train_ner(
    train: Annotated[Path, typer.Option("--train", help="Annotated training documents (PubTator, BioC or a brat directory).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output detector directory (written atomically).")],
    dev: Annotated[Path | None, typer.Option("--dev", help="Annotated dev documents: strict span F1 is reported on them.")] = None,
    init: Annotated[str, typer.Option("--init", help="'default' (bundled multilingual-e5-small) or a checkpoint directory.")] = "default",
    types: Annotated[list[str] | None, typer.Option("--types", help="Learn only annotations of these types (repeat); all when omitted.")] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1)] = 3,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Windows per step.")] = 16,
    learning_rate: Annotated[float, typer.Option("--lr", help="Encoder learning rate.")] = 5e-5,
    head_learning_rate: Annotated[float, typer.Option("--head-lr", help="Learning rate of the fresh emission layer and CRF.")] = 1e-3,
    as_type: Annotated[str | None, typer.Option("--as-type", help="Label every annotation with this one type (when types do not matter downstream).")] = None,
    max_length: Annotated[int, typer.Option("--max-length", min=8, help="Sub-tokens per window.")] = 256,
    max_minutes: Annotated[float | None, typer.Option("--max-minutes", help="Stop (and save) after this long.")] = None,
    freeze_embeddings: Annotated[bool, typer.Option("--freeze-embeddings", help="Keep the word embeddings fixed (CPU training).")] = False,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Train the learned mention detector (encoder + CRF BIO tagger, 002 §4.2) for `link --ner`."""
    from babelink.encoders import DEFAULT
    from babelink.encoders.e5_bundled import bundled_e5_path
    from babelink.formats import read_documents
    from babelink.progress import progress_bar
    from babelink.train import ner

    documents = list(read_documents(train))
    config = ner.NerTrainingConfig(types=tuple(types) if types else None, learning_rate=learning_rate,
                                   head_learning_rate=head_learning_rate, as_type=as_type, epochs=epochs,
                                   batch_size=batch_size, max_length=max_length, freeze_embeddings=freeze_embeddings,
                                   max_minutes=max_minutes, seed=seed)
    mentions = sum(len(ner.selected(d.annotations, config.types)) for d in documents)
    typer.echo(f"training on {len(documents):,} documents, {mentions:,} mentions", err=True)
    with progress_bar("training") as progress:
        detector = ner.train_ner(bundled_e5_path() if init == DEFAULT else Path(init), documents, out, config,
                                 lambda step, total, loss: progress(f"step {step:,}/{total:,} loss {loss:.4f}", step, total))
    typer.echo(f"wrote {out}: labels {', '.join(detector.settings.labels)}", err=True)
    if dev is not None:
        scores = ner.evaluate_ner(detector, list(read_documents(dev)), config.types)
        strict, partial = scores["strict"], scores["partial"]
        typer.echo(f"dev strict P {strict['precision']:.4f} R {strict['recall']:.4f} F1 {strict['f1']:.4f} "
                   f"(partial F1 {partial['f1']:.4f})", err=True)


@train_app.command("interpolate")
def train_interpolate(
    trained: Annotated[Path, typer.Option("--trained", help="Fine-tuned checkpoint directory (e.g. babelink train sap --out).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output checkpoint directory (written atomically).")],
    weight: Annotated[float, typer.Option("--weight", min=0.0, max=1.0, help="Share of the fine-tuned weights (1: all of them).")] = 0.5,
    init: Annotated[str, typer.Option("--init", help="'default' (bundled multilingual-e5-small) or the checkpoint the training started from.")] = "default",
) -> None:
    """Mix a fine-tuned encoder's weights with its starting point's (WiSE-FT), to keep what fine-tuning forgot."""
    from babelink.encoders import DEFAULT
    from babelink.encoders.e5_bundled import bundled_e5_path
    from babelink.train.interpolate import interpolate_checkpoints

    path = interpolate_checkpoints(bundled_e5_path() if init == DEFAULT else Path(init), trained, weight, out)
    typer.echo(f"wrote {path}", err=True)


def _dev_evaluator(name: str, data: Path, kb, distractors: int):
    from babelink.eval import benchmark
    from babelink.train.evaluation import DenseDevEvaluator

    sets = {"quaero-dev": benchmark.quaero_set, "ncbi-dev": benchmark.ncbi_set, "bc5cdr-dev": benchmark.bc5cdr_set}
    if name not in sets:
        raise InvalidInputError(f"--eval must be one of {', '.join(sets)}, got {name!r}")
    if not (data / "bench").is_dir():
        raise InvalidInputError(f"{data}: no bench/ directory with the benchmark data (--eval-data)")
    queries = sets[name](data, kb, "dev")
    if not queries.queries:
        raise InvalidInputError(f"{name}: no dev query has a gold concept in --kb")
    return DenseDevEvaluator(kb, queries, distractors)


def main() -> None:
    """Entry point: babelink errors become one line on stderr and exit status 1."""
    try:
        app()
    except BabelinkError as error:
        typer.echo(f"babelink: error: {error}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(141)
    except OSError as error:
        typer.echo(f"babelink: error: {error.filename or ''}: {error.strerror or error}", err=True)
        sys.exit(1)
