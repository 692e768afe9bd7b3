"""`babelink train …`: the entity encoder (SAP), the contextual filter, the NER detector, the one-pass dual
encoder, weight interpolation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from babelink.cli.options import (
    BundleOption,
    DeviceOption,
    EncoderRateOption,
    EpochsOption,
    InitOption,
    KbFormatOption,
    LearnTypesOption,
    LoraRankOption,
    MaxMinutesOption,
    MaxStepsOption,
    SeedOption,
)
from babelink.errors import InvalidInputError
from babelink.fsutil import refuse_same_file
from babelink.lang import parse_languages

app = typer.Typer(no_args_is_help=True,
                  help="Train models: the entity encoder (SAP), a distilled student, the contextual filter, the "
                       "NER detector, the one-pass dual encoder (004); interpolate two checkpoints; build the "
                       "training pack of the GPU job.")


def _progress(progress):
    """A trainer's `(step, total, loss)` callback drawn on a `progress_bar`."""
    return lambda step, total, loss: progress(f"training steps, loss {loss:.4f}", step, total)


@app.command("sap")
def train_sap(
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output checkpoint directory (resumes from out/resume/ when present).")],
    kb: Annotated[Path | None, typer.Option("--kb", help="KB whose synonyms are the positive pairs (003 §2).")] = None,
    kb_format: KbFormatOption = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="Read only these KB languages.")] = None,
    synonyms: Annotated[str, typer.Option(
        "--synonyms", help="all_syn | en_syn | <lang>_syn (001 Tab. 3) | none (--kb only scores --eval: continue "
                           "on --pairs alone, 001 §2.2).")] = "all_syn",
    pairs: Annotated[list[Path] | None, typer.Option(
        "--pairs", help="Translation pairs (english<TAB>foreign), each pair a pseudo-class (001 §2.2).")] = None,
    mentions_from: Annotated[Path | None, typer.Option(
        "--mentions-from",
        help="Task fine-tuning: annotated documents whose mentions pair with their gold concept's KB names.")] = None,
    init: InitOption = "default",
    max_minutes: MaxMinutesOption = None,
    max_steps: MaxStepsOption = None,
    epochs: EpochsOption = 1,
    batch_pairs: Annotated[int, typer.Option("--batch-pairs", min=2, help="Positive pairs per batch.")] = 128,
    learning_rate: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 2e-5,
    freeze_embeddings: Annotated[bool, typer.Option(
        "--freeze-embeddings", help="Keep the word embeddings fixed (CPU training).")] = False,
    lora_rank: LoraRankOption = 0,
    device: DeviceOption = None,
    max_pairs_per_concept: Annotated[int, typer.Option(
        "--max-pairs-per-concept", min=1, help="At most this many synonym pairs of one concept (003 App. A.3).")] = 50,
    margin: Annotated[float, typer.Option("--margin", help="λ of the hard-triplet mining condition.")] = 0.2,
    alpha: Annotated[float, typer.Option("--alpha", help="MS loss positive temperature.")] = 2.0,
    beta: Annotated[float, typer.Option("--beta", help="MS loss negative temperature.")] = 50.0,
    epsilon: Annotated[float, typer.Option(
        "--epsilon", help="MS loss similarity offset ε (001 Eq. 1): 0.5 suits e5's cosines; the seed's 1 an "
        "encoder whose unrelated names are far apart.")] = 0.5,
    seed: SeedOption = 0,
    eval_set: Annotated[str | None, typer.Option(
        "--eval", help="Dev set scored on --kb to keep the best checkpoint: quaero-dev, ncbi-dev or "
                       "bc5cdr-dev.")] = None,
    eval_data: Annotated[Path | None, typer.Option(
        "--eval-data", help="Directory holding the benchmark data (its bench/…), needed by --eval.")] = None,
    eval_every: Annotated[int, typer.Option("--eval-every", min=1, help="Steps between dev evaluations.")] = 200,
    eval_distractors: Annotated[int, typer.Option(
        "--eval-distractors", min=0, help="Concepts besides the dev gold ones in the evaluation dictionary.")] = 5000,
) -> None:
    """Self-alignment pretraining of the encoder on KB synonyms and translation pairs."""
    from babelink.augment import read_annotated
    from babelink.encoders import resolve_checkpoint
    from babelink.kb.readers import read_kb
    from babelink.progress import progress_bar
    from babelink.train.evaluation import dev_evaluator
    from babelink.train.pairs import sap_pairs
    from babelink.train.sap import SapConfig, SapTrainer

    refuse_same_file(out, [kb, mentions_from, *(pairs or ())], "--out")
    if kb is None and not pairs:
        raise InvalidInputError("give --kb (synonyms or, with --mentions-from, task pairs) and/or --pairs")
    if eval_set is not None and (kb is None or eval_data is None):
        raise InvalidInputError(
            "--eval scores the encoder on --kb against the data in --eval-data: give --kb and --eval-data"
        )
    knowledge_base = read_kb(kb, kb_format, languages=parse_languages(lang)) if kb is not None else None
    positives = sap_pairs(knowledge_base, synonyms=synonyms, translations=pairs or (),
                          mentions=read_annotated(mentions_from) if mentions_from is not None else None,
                          max_pairs_per_concept=max_pairs_per_concept, seed=seed)
    evaluate = dev_evaluator(eval_set, eval_data, knowledge_base, eval_distractors) if eval_set else None
    config = SapConfig(learning_rate=learning_rate, batch_pairs=batch_pairs, margin=margin, alpha=alpha, beta=beta,
                       epsilon=epsilon, epochs=epochs, max_steps=max_steps, max_minutes=max_minutes,
                       freeze_embeddings=freeze_embeddings, lora_rank=lora_rank, seed=seed)
    start, settings = resolve_checkpoint(init)
    trainer = SapTrainer(start, positives, out, config, settings, device=device)
    typer.echo(f"training on {len(positives):,} positive pairs, {trainer.total_steps:,} steps"
               + (f", resuming at step {trainer.state.step:,}" if trainer.state.step else ""), err=True)
    first_step, started = trainer.state.step, time.monotonic()
    with progress_bar("training") as progress:
        def report(state, seconds):
            pairs_per_second = (state.step - first_step) * config.batch_pairs / max(seconds, 1e-9)
            progress(f"step {state.step:,} loss {state.loss_history[-1]:.4f} · {pairs_per_second:,.0f} pairs/s",
                     state.step, trainer.total_steps)

        path = trainer.train(report, evaluate, eval_every)
    losses, seconds = trainer.state.loss_history, time.monotonic() - started
    rate = (trainer.state.step - first_step) * config.batch_pairs / max(seconds, 1e-9)
    typer.echo(f"wrote {path} after {trainer.state.step:,} steps ({rate:,.0f} pairs/s); last loss {losses[-1]:.4f}"
               if losses else f"wrote {path}", err=True)
    if trainer.state.evaluations:
        step, score = max(trainer.state.evaluations, key=lambda item: item[1])
        typer.echo(f"best {eval_set} Acc@1 {score:.4f} at step {step:,} (kept in {path})", err=True)


@app.command("student")
def train_student(
    teacher: Annotated[str, typer.Option(
        "--teacher", help="The encoder to distil: `default` (the bundled e5), a checkpoint directory (train sap "
                          "--out) or a packaged trained encoder's name.")],
    kb: Annotated[Path, typer.Option("--kb", help="KB whose names the student learns to place as the teacher does.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output checkpoint directory (resumes from out/resume/ when present).")],
    kb_format: KbFormatOption = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="Read only these KB languages.")] = None,
    layers: Annotated[int, typer.Option("--layers", min=1, help="Layers the student keeps.")] = 3,
    batch_size: Annotated[int, typer.Option("--batch-size", min=2, help="Names per step.")] = 512,
    learning_rate: EncoderRateOption = 1e-4,
    epochs: EpochsOption = 1,
    max_minutes: MaxMinutesOption = None,
    max_steps: MaxStepsOption = None,
    device: DeviceOption = None,
    seed: SeedOption = 0,
) -> None:
    """Distil a shallower, faster student from a trained encoder on a KB's names."""
    from babelink.encoders import resolve_checkpoint
    from babelink.kb.readers import read_kb
    from babelink.progress import progress_bar
    from babelink.text import normalize_name
    from babelink.train.student import StudentConfig, StudentTrainer

    refuse_same_file(out, [kb], "--out")
    knowledge_base = read_kb(kb, kb_format, languages=parse_languages(lang))
    names = [name for name in map(normalize_name, knowledge_base.names.column("name").to_pylist()) if name]
    config = StudentConfig(layers=layers, batch_size=batch_size, learning_rate=learning_rate, epochs=epochs,
                           max_steps=max_steps, max_minutes=max_minutes, seed=seed)
    teacher_path, teacher_settings = resolve_checkpoint(teacher)
    trainer = StudentTrainer(teacher_path, names, out, config, device=device, settings=teacher_settings)
    typer.echo(f"distilling {layers} layers on {len(trainer.items):,} names, {trainer.total_steps:,} steps", err=True)
    with progress_bar("training") as progress:
        report = _progress(progress)
        trainer.train(lambda state, _: report(state.step, trainer.total_steps, state.loss_history[-1]))
    typer.echo(f"wrote {out} after {trainer.state.step:,} steps", err=True)


@app.command("pack")
def train_pack(
    data: Annotated[Path, typer.Option(
        "--data", help="The benchmark data directory (kb/, bench/, translations/), e.g. ../shared/data.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Pack directory to write.")],
    wheels: Annotated[list[Path] | None, typer.Option(
        "--wheel", exists=True, dir_okay=False,
        help="A pure-Python wheel the GPU machine lacks (the one-pass stage's stop-word and abbreviation "
             "libraries); repeatable.")] = None,
) -> None:
    """Build the training pack a GPU job trains from (`python -m babelink.train.job`): ≤ 60 MiB."""
    from babelink.encoders.e5_bundled import base_sha256, bundled_e5_path, bundled_model_file
    from babelink.train.pack import build_pack, shared_sources

    refuse_same_file(out, [data], "--out")
    sources = shared_sources(data)
    sources.wheels = list(wheels or [])
    manifest = build_pack(sources, out, bundled_model_file()[0], bundled_e5_path(), base_sha256(),
                          "multilingual-e5-small")
    typer.echo(f"wrote {out}: {manifest['bytes'] / 2**20:.1f} MiB, {manifest['base']['pieces']:,} pieces of the "
               f"base kept, in {manifest['seconds']:.0f} s", err=True)


@app.command("filter")
def train_filter(
    train: Annotated[
        Path, typer.Option("--train", help="Annotated training documents (PubTator, BioC or a brat directory).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output filter directory (written atomically).")],
    bundle: BundleOption = None,
    dev: Annotated[
        Path | None,
        typer.Option("--dev", help="Annotated dev documents: the keep-threshold is tuned on them for strict F1."),
    ] = None,
    init: Annotated[
        str | None, typer.Option("--init", help="Checkpoint to start from; the bundle's encoder when omitted.")
    ] = None,
    window: Annotated[
        int, typer.Option("--window", min=0, help="Context words on each side of a span (Ws, 000 §4.4).")
    ] = 2,
    epochs: EpochsOption = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=2, help="Examples per step.")] = 32,
    learning_rate: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 2e-5,
    negatives: Annotated[
        float,
        typer.Option(
            "--negatives-per-positive",
            min=0.1,
            help="Subsample the matcher's wrong proposals to at most this many per right one.",
        ),
    ] = 4.0,
    layers: Annotated[
        int | None,
        typer.Option("--layers", min=1, help="Keep only the encoder's first N transformer layers (faster on CPU)."),
    ] = None,
    max_minutes: MaxMinutesOption = None,
    seed: SeedOption = 0,
) -> None:
    """Train the contextual relevance filter (000 §4.4) on the documents the bundle's DFT did not consume."""
    from babelink.formats import read_documents
    from babelink.linker import Linker
    from babelink.progress import progress_bar
    from babelink.train.context_filter import FilterTrainingConfig, fit_filter

    refuse_same_file(out, [train, dev], "--out")
    config = FilterTrainingConfig(window=window, learning_rate=learning_rate, epochs=epochs, batch_size=batch_size,
                                  max_negatives_per_positive=negatives, layers=layers, max_minutes=max_minutes,
                                  seed=seed)
    with progress_bar("training") as progress:
        fitted = fit_filter(Linker.open(bundle), list(read_documents(train)), out, config,
                            dev=list(read_documents(dev)) if dev is not None else (), init=init,
                            progress=_progress(progress))
    typer.echo(f"{fitted.documents:,} documents ({fitted.left_out:,} left out: DFT), {fitted.proposals:,} proposals, "
               f"{fitted.relevant:,} relevant; trained on {fitted.trained_on:,}", err=True)
    if fitted.dev_f1 is not None:
        typer.echo(f"dev strict F1 {fitted.dev_f1:.4f} at threshold {fitted.context_filter.settings.threshold}",
                   err=True)
    typer.echo(f"wrote {out}", err=True)


@app.command("calibrator")
def train_calibrator(
    dev: Annotated[list[Path], typer.Option(
        "--dev", help="Annotated documents whose concepts are in the bundle's KB (PubTator, BioC or a brat "
                      "directory; repeat for several corpora and languages).")],
    bundle: Annotated[Path, typer.Option(
        "--bundle", "-b", help="Bundle to calibrate (the probabilities are stored in it; not the embedded default, "
                               "which babelink rebuilds).")],
    types: LearnTypesOption = None,
) -> None:
    """Fit a bundle's own calibrated probabilities on annotated documents, stored in the bundle.

    For an encoder, KB or language the calibrator babelink ships was not fitted on."""
    from dataclasses import replace

    from babelink.bundle.update import store_calibrator
    from babelink.formats import read_documents
    from babelink.linker import Linker
    from babelink.train.calibration import fit_calibrator

    documents = []
    for path in dev:
        found = [replace(document, annotations=tuple(a for a in document.annotations if not types or a.type in types))
                 for document in read_documents(path)]
        if not any(annotation.concept_ids for document in found for annotation in document.annotations):
            kept = f" of the types {', '.join(types)}" if types else ""
            raise InvalidInputError(f"{path}: {len(found):,} documents and no annotation{kept} with a concept id "
                                    "to learn from")
        documents += found
    linker = Linker.open(bundle)
    calibrator = fit_calibrator(linker, documents)
    path = store_calibrator(linker.bundle.path, calibrator)
    seen = calibrator.trained_on
    typer.echo(f"fitted on {seen['mentions']:,} mentions and {seen['spans']:,} proposed spans of "
               f"{seen['documents']:,} documents; stored in {path}", err=True)


@app.command("ner")
def train_ner(
    train: Annotated[Path, typer.Option(
        "--train", help="Annotated training documents (PubTator, BioC or a brat directory).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output detector directory (written atomically).")],
    dev: Annotated[Path | None, typer.Option(
        "--dev", help="Annotated dev documents: strict span F1 is reported on them.")] = None,
    init: InitOption = "default",
    types: LearnTypesOption = None,
    epochs: EpochsOption = 3,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Windows per step.")] = 16,
    learning_rate: EncoderRateOption = 5e-5,
    head_learning_rate: Annotated[float, typer.Option(
        "--head-lr", help="Learning rate of the fresh emission layer and CRF.")] = 1e-3,
    as_type: Annotated[str | None, typer.Option(
        "--as-type", help="Label every annotation with this one type (when types do not matter downstream).")] = None,
    max_length: Annotated[int, typer.Option("--max-length", min=8, help="Sub-tokens per window.")] = 256,
    max_minutes: MaxMinutesOption = None,
    freeze_embeddings: Annotated[bool, typer.Option(
        "--freeze-embeddings", help="Keep the word embeddings fixed (CPU training).")] = False,
    seed: SeedOption = 0,
) -> None:
    """Train the learned mention detector (encoder + CRF BIO tagger, 002 §4.2) for `link --ner`."""
    from babelink.encoders import resolve_checkpoint
    from babelink.formats import read_documents
    from babelink.progress import progress_bar
    from babelink.train import ner

    refuse_same_file(out, [train, dev], "--out")
    documents = list(read_documents(train))
    config = ner.NerTrainingConfig(types=tuple(types) if types else None, learning_rate=learning_rate,
                                   head_learning_rate=head_learning_rate, as_type=as_type, epochs=epochs,
                                   batch_size=batch_size, max_length=max_length, freeze_embeddings=freeze_embeddings,
                                   max_minutes=max_minutes, seed=seed)
    mentions = sum(len(ner.selected(d.annotations, config.types)) for d in documents)
    typer.echo(f"training on {len(documents):,} documents, {mentions:,} mentions", err=True)
    with progress_bar("training") as progress:
        detector = ner.train_ner(resolve_checkpoint(init)[0], documents, out, config, _progress(progress))
    typer.echo(f"wrote {out}: labels {', '.join(detector.settings.labels)}", err=True)
    if dev is not None:
        scores = ner.evaluate_ner(detector, list(read_documents(dev)), config.types)
        strict, partial = scores["strict"], scores["partial"]
        typer.echo(f"dev strict P {strict['precision']:.4f} R {strict['recall']:.4f} F1 {strict['f1']:.4f} "
                   f"(partial F1 {partial['f1']:.4f})", err=True)


@app.command("interpolate")
def train_interpolate(
    trained: Annotated[Path, typer.Option(
        "--trained", help="Fine-tuned checkpoint directory (e.g. babelink train sap --out).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output checkpoint directory (written atomically).")],
    weight: Annotated[float, typer.Option(
        "--weight", min=0.0, max=1.0, help="Share of the fine-tuned weights (1: all of them).")] = 0.5,
    init: Annotated[str, typer.Option(
        "--init", help="'default' (bundled multilingual-e5-small) or the checkpoint the training started from.")
    ] = "default",
) -> None:
    """Mix a fine-tuned encoder's weights with its starting point's (WiSE-FT), to keep what fine-tuning forgot."""
    from babelink.encoders import resolve_checkpoint
    from babelink.train.interpolate import interpolate_checkpoints

    refuse_same_file(out, [trained], "--out")
    typer.echo(f"wrote {interpolate_checkpoints(resolve_checkpoint(init)[0], trained, weight, out)}", err=True)


@app.command("dual")
def train_dual(
    bundle: Annotated[Path, typer.Option(
        "--bundle", "-b", help="Bundle whose KB the annotations name and whose name vectors the model links to.")],
    train: Annotated[list[Path], typer.Option(
        "--train", help="Annotated training documents (PubTator, BioC, brat directory; repeat for several).")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output model directory (resumes from out/resume/ when present).")],
    dev: Annotated[list[Path] | None, typer.Option(
        "--dev", help="Annotated dev documents (repeat): choose the checkpoint and mention threshold.")] = None,
    init: Annotated[str, typer.Option("--init", help=(
        "'default' (bundled multilingual-e5-small), a checkpoint directory, a packaged trained encoder, or a "
        "dual encoder to go on training, a directory or a packaged one-pass model (its span scorer is kept)."
    ))] = "default",
    types: LearnTypesOption = None,
    epochs: EpochsOption = 5,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Segments per step.")] = 4,
    learning_rate: EncoderRateOption = 1e-4,
    head_learning_rate: Annotated[float, typer.Option("--head-lr", help="Span scorer learning rate.")] = 1e-3,
    hard_negatives: Annotated[int, typer.Option(
        "--hard-negatives", min=0, help="Nearest wrong names per mention (004 §3.2).")] = 8,
    random_negatives: Annotated[int, typer.Option(
        "--random-negatives", min=0, help="Random names per mention (004 §3.2).")] = 8,
    pooling: Annotated[str, typer.Option(
        "--pooling", help="Mention vector: mean (004 §3.4) or boundary (Eq. 1).")] = "mean",
    max_span_words: Annotated[int, typer.Option("--max-span-words", min=1, help="L: longest span, in words.")] = 10,
    max_minutes: MaxMinutesOption = None,
    max_steps: MaxStepsOption = None,
    eval_every: Annotated[int | None, typer.Option(
        "--eval-every", min=1, help="Steps between dev evaluations (default: once per epoch).")] = None,
    train_embeddings: Annotated[bool, typer.Option(
        "--train-embeddings", help="Also train the word embeddings (frozen by default: CPU training).")] = False,
    lora_rank: LoraRankOption = 0,
    device: DeviceOption = None,
    seed: SeedOption = 0,
) -> None:
    """Train the one-pass dual encoder (004): detects and links every mention of a segment at once (`link --model`)."""
    from babelink.bundle.store import load_bundle
    from babelink.dual.artefact import dual_init
    from babelink.formats import read_documents
    from babelink.progress import progress_bar
    from babelink.train.dual import DualTrainer, DualTrainingConfig

    refuse_same_file(out, [bundle, *train, *(dev or [])], "--out")
    if pooling not in ("mean", "boundary"):
        raise InvalidInputError(f"--pooling must be mean or boundary, got {pooling!r}")
    config = DualTrainingConfig(
        learning_rate=learning_rate, head_learning_rate=head_learning_rate, epochs=epochs, batch_size=batch_size,
        max_span_words=max_span_words, pooling=pooling, hard_negatives=hard_negatives,
        random_negatives=random_negatives, freeze_embeddings=not train_embeddings,
        types=tuple(types) if types else None, max_steps=max_steps, max_minutes=max_minutes, eval_every=eval_every,
        lora_rank=lora_rank, seed=seed)
    documents = [document for path in train for document in read_documents(path)]
    dev_documents = [document for path in dev or [] for document in read_documents(path)]
    trainer = DualTrainer(dual_init(init), load_bundle(bundle), documents, out, config, device=device)
    mentions = sum(len(example.mentions) for example in trainer.examples)
    typer.echo(f"training on {len(documents):,} documents: {len(trainer.examples):,} segments, {mentions:,} "
               f"mentions of KB concepts; {trainer.total_steps:,} steps", err=True)
    started = time.monotonic()
    with progress_bar("training") as progress:
        report = _progress(progress)
        trainer.train(dev_documents, lambda state, _: report(state.step, trainer.total_steps, state.loss_history[-1]))
    for step, f1, threshold, *weight in trainer.state.evaluations:  # runs resumed from before w record none
        chosen = f"mention threshold {threshold}" + (f", TF-IDF weight {weight[0]}" if weight else "")
        typer.echo(f"dev strict F1 {f1:.4f} at step {step:,} ({chosen})", err=True)
    typer.echo(f"wrote {out} in {time.monotonic() - started:,.0f} s", err=True)
