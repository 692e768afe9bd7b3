"""One-pass dual encoder benchmark (004): end-to-end linking, detection, entity disambiguation,
speed, and the transfer to languages without training data.

    python benchmarks/dual_encoder.py [--data ../shared/data] [--no-write]
        [--medic-model DIR [--ablation DIR]] [--ner ncbi=DIR bc5cdr=DIR]
        [--mantra [--mantra-minutes 6]]

`--medic-model`: a model trained on the CTD MEDIC benchmark bundle (`babelink train dual`, the
command is in the log), or a packaged one-pass model's name (the GPU job's `e5-sap-dual`, whose
bundle is built with the packaged encoder it links against). NCBI-disease and BC5CDR-Disease test are linked by
- the dual encoder (`link --model`), its mention threshold γ chosen here on NCBI-disease +
  BC5CDR dev for the mention vector alone, and again with the TF-IDF weight w of the span text
  (`DualSettings.sparse_weight`) chosen with it (a row of its own when w > 0);
- the default span pipeline (`Linker.open(bundle)`, default `LinkParams`, no labeled spans);
- with `--ner`, the NER + CRF pipeline (`link --ner`, hybrid ranking, every training mention in the
  labeled-span index, link threshold 0.96: the configuration of `end-to-end.md`);
each in its own process, so documents/s, mentions/s and peak RSS are its own. Strict and partial
P/R/F1 against in-KB gold, and detection-only strict P/R/F1 (spans alone). Entity
disambiguation: NCBI-disease test gold spans, Acc@1 of `Linker.disambiguate` (one pass per
segment; each model and w as above) against the hybrid `normalize` of the same mention strings.
`--ablation DIR`: a model trained the same way with random negatives only (`--hard-negatives 0
--random-negatives 16`).

`--mantra`: leave-one-language-out on Mantra GSC (open-umls). Each language's documents are split
in halves (seeded); a model is trained on the first halves of all three languages (80% train,
20% dev for γ) plus QUAERO train (French), and one per language X without X's documents (for
French: without QUAERO too); every model is tested on the second halves, next to the default
span pipeline on the same documents.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from end_to_end import (
    CORPORA,
    NER_SYSTEM,
    _in_child,
    _peak_rss_mb,
    documents,
    gold,
    make_linker,
    ner_tune_step,
    predictions,
)
from report import arguments, cached_bundle, commit, machine, portable, publish

from babelink.augment import gold_resolver
from babelink.bundle.store import load_bundle
from babelink.detect.ner import NerDetector
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.link.documents import LinkParams
from babelink.linker import Linker

MANTRA = {"en": "English", "es": "Spanish", "fr": "French"}
QUAERO_TRAIN = ("quaero/corpus/train/EMEA", "quaero/corpus/train/MEDLINE")


def link_step(data: str, corpus_key: str, system: str, model: str | None, link_threshold: float | None = None,
              decision: tuple[float, float] | None = None) -> dict:
    """Link a corpus's test split with one system in this (child) process; a dual encoder with
    `decision` (γ, w) chosen on dev instead of its own."""
    corpus = CORPORA[corpus_key]
    with tempfile.TemporaryDirectory() as scratch:
        if system == NER_SYSTEM:  # as in end-to-end.md: every training mention in the labeled-span index
            linker = make_linker(Path(data), corpus, system, 1.0, LinkParams(link_threshold=link_threshold),
                                 Path(scratch), detector=NerDetector(model))
        else:
            bundle = load_bundle(_bundle_for(data, corpus.kb, model))
            linker = Linker(bundle, model=_dual(model, decision)) if model else Linker(bundle)
        test = documents(Path(data), corpus, "test")
        linker.link("warm-up text with asthma")
        started = time.perf_counter()
        predicted = predictions(linker, test)
        seconds = time.perf_counter() - started
    reference = gold(test, linker.bundle.kb)
    detection = span_scores([(d, s, e, "") for d, s, e, _ in predicted], [(d, s, e, ("",)) for d, s, e, _ in reference])
    return {"scores": span_scores(predicted, reference), "detection": detection["strict"], "documents": len(test),
            "docs_per_s": len(test) / seconds, "mentions_per_s": len(predicted) / seconds, "rss_mb": _peak_rss_mb()}


def _bundle_for(data: str, kb: str, model: str | None = None) -> Path:
    """The KB's benchmark bundle, its names encoded by the encoder `model` links against: the
    bundled one, or a packaged trained one (the GPU job's `e5-sap-dual` links against `e5-sap`)."""
    from babelink.dual.artefact import model_path
    from babelink.encoders import checkpoint_path
    from babelink.encoders.artefacts import packaged

    entity = json.loads((model_path(model) / "babelink_dual.json").read_text())["entity_encoder"] if model else {}
    if entity.get("name") in packaged():
        return cached_bundle(Path(data), kb, encoder=str(checkpoint_path(entity["name"])))
    return cached_bundle(Path(data), kb)


def _dual(path: str, decision: tuple[float, float] | None = None):
    from babelink.dual.artefact import model_path
    from babelink.dual.model import DualModel

    model = DualModel(model_path(path))
    if decision is not None:
        model.settings = replace(model.settings, threshold=decision[0], sparse_weight=decision[1])
    return model


def tune_step(data: str, model: str) -> dict:
    """The mention threshold γ chosen on NCBI-disease + BC5CDR dev with the mention vector alone
    (w = 0), and γ with the TF-IDF weight w chosen together (`train.dual.tune_decision`)."""
    from babelink.dual.linker import DualLinker
    from babelink.train.dual import tune_decision

    bundle = load_bundle(_bundle_for(data, "ctd-medic", model))
    dev = [d for key in ("ncbi", "bc5cdr") for d in documents(Path(data), CORPORA[key], "dev")]
    linker = DualLinker(_dual(model), bundle)
    plain, fused = tune_decision(linker, dev, weights=(0.0,)), tune_decision(linker, dev)
    return {"plain": {"f1": plain[0], "decision": (plain[1], 0.0)},
            "fused": {"f1": fused[0], "decision": (fused[1], fused[2])}}


def disambiguation_step(data: str, model: str, sparse_weight: float = 0.0) -> dict:
    """NCBI-disease test gold spans: the dual encoder in one pass per segment (its names scored with
    the TF-IDF weight `sparse_weight`) against hybrid `normalize`."""
    bundle = load_bundle(_bundle_for(data, "ctd-medic", model))
    resolve = gold_resolver(bundle.kb)
    test = [replace(d, annotations=tuple(a for a in d.annotations if any(map(resolve, a.concept_ids))))
            for d in documents(Path(data), CORPORA["ncbi"], "test")]
    wanted = [{resolve(c) for c in a.concept_ids} - {None} for d in test for a in d.annotations]
    dual_model = _dual(model)
    dual = Linker(bundle, model=_dual(model, (dual_model.settings.threshold, sparse_weight)))
    started = time.perf_counter()
    answers = [candidates for found in dual.disambiguate(test, top_k=1) for candidates in found]
    dual_seconds = time.perf_counter() - started
    hybrid = Linker(bundle)
    started = time.perf_counter()
    normalized = hybrid.normalize([a.text for d in test for a in d.annotations], top_k=1)
    hybrid_seconds = time.perf_counter() - started

    def accuracy(ranked):
        return sum(bool(found) and found[0].concept_id in ids for found, ids in zip(ranked, wanted)) / len(wanted)

    return {"mentions": len(wanted), "dual": accuracy(answers), "hybrid": accuracy(normalized),
            "dual_per_s": len(wanted) / dual_seconds, "hybrid_per_s": len(wanted) / hybrid_seconds}


def mantra_split(data: Path, lang: str) -> tuple[list, list]:
    """(first half, second half) of a Mantra GSC language's documents, shuffled with a fixed seed."""
    docs = [replace(d, lang=lang) for d in read_documents(data / "bench/mantra_gsc/Mantra-GSC" / MANTRA[lang])]
    random.Random(0).shuffle(docs)
    return docs[: len(docs) // 2], docs[len(docs) // 2:]


def quaero_train(data: Path) -> list:
    """QUAERO train (French MEDLINE titles and EMEA leaflets), the recipe's extra French documents."""
    return [replace(d, lang="fr") for part in QUAERO_TRAIN for d in read_documents(data / "bench" / part)]


def mantra_step(data: str, left_out: str | None, minutes: float) -> dict:
    """Train on the first halves of every language but `left_out` (None: all) and, unless French is
    left out, on QUAERO train; test on every second half."""
    from babelink.encoders import resolve_checkpoint
    from babelink.train.dual import DualTrainer, DualTrainingConfig

    bundle = load_bundle(cached_bundle(Path(data), "open-umls"))
    halves = {lang: mantra_split(Path(data), lang) for lang in MANTRA}
    train, dev = [], []
    for lang, (first, _) in halves.items():
        if lang != left_out:
            cut = int(0.8 * len(first))
            train, dev = train + first[:cut], dev + first[cut:]
    train += quaero_train(Path(data)) if left_out != "fr" else []
    config = DualTrainingConfig(epochs=20, batch_size=8, max_minutes=minutes, eval_every=50)
    with tempfile.TemporaryDirectory() as scratch:
        started = time.monotonic()
        trainer = DualTrainer(resolve_checkpoint("default")[0], bundle, train, Path(scratch) / "model", config)
        trainer.train(dev)
        seconds = time.monotonic() - started
        linker = Linker(bundle, model=_dual(str(Path(scratch) / "model")))
        scores = {lang: span_scores(predictions(linker, second), gold(second, bundle.kb))["strict"]
                  for lang, (_, second) in halves.items()}
        threshold = linker.documents.threshold
    return {"scores": scores, "steps": trainer.state.step, "seconds": seconds, "threshold": threshold,
            "train_documents": len(train)}


def mantra_baseline_step(data: str) -> dict:
    bundle = load_bundle(cached_bundle(Path(data), "open-umls"))
    linker = Linker(bundle)
    return {lang: span_scores(predictions(linker, second), gold(second, bundle.kb))["strict"]
            for lang, (_, second) in ((lang, mantra_split(Path(data), lang)) for lang in MANTRA)}


#: The MEDIC recipe's data; `_command` adds the options a model's `training.json` says differed from the defaults.
MEDIC_RECIPE = ("babelink train dual --bundle <ctd-medic bundle> --train NCBItrainset_corpus.txt "
                "--train CDR_TrainingSet.PubTator.txt --dev NCBIdevelopset_corpus.txt "
                "--dev CDR_DevelopmentSet.PubTator.txt")
TRAINING_OPTIONS = {"epochs": "--epochs", "batch_size": "--batch-size", "learning_rate": "--lr",
                    "head_learning_rate": "--head-lr", "hard_negatives": "--hard-negatives",
                    "random_negatives": "--random-negatives", "pooling": "--pooling",
                    "max_span_words": "--max-span-words", "max_minutes": "--max-minutes", "max_steps": "--max-steps",
                    "eval_every": "--eval-every", "seed": "--seed"}


#: How the NER + CRF baselines are trained (end-to-end.md): `--ner ncbi=DIR bc5cdr=DIR` names their outputs.
NER_RECIPES = {
    "ncbi": "babelink train ner --train NCBItrainset_corpus.txt --dev NCBIdevelopset_corpus.txt --as-type Disease "
            "--epochs 5 --lr 1e-4 --head-lr 1e-3 --max-minutes 30",
    "bc5cdr": "babelink train ner --train CDR_TrainingSet.PubTator.txt --dev CDR_DevelopmentSet.PubTator.txt "
              "--types Disease --as-type Disease --epochs 5 --lr 1e-4 --head-lr 1e-3 --max-minutes 30",
}


def _training_note(model: str) -> str:
    """Steps, time, negatives, the dev choice, and the command that trained the model; a packaged
    one-pass model's manifest says where and on what it was trained."""
    from babelink.encoders.artefacts import packaged, read_manifest

    if not Path(model).is_dir() and model in packaged():
        training = read_manifest(packaged()[model])["training"]
        return (f"packaged `{model}`: {training['steps']:,} steps in {training['seconds'] / 60:.1f} min on "
                f"{training['device']} (commit {training['commit']}), trained on {', '.join(training['sources'])}")
    found = json.loads((Path(model) / "training.json").read_text())
    best = max(found["evaluations"], key=lambda e: e[1]) if found["evaluations"] else None
    chosen = f"; best dev strict F1 {best[1]:.3f} at step {best[0]:,}, γ = {best[2]}" if best else ""
    return (f"{found['steps']:,} steps in {found.get('seconds', 0) / 60:.0f} min, lr {found['learning_rate']}, "
            f"{found['hard_negatives']} hard + {found['random_negatives']} random negatives per mention{chosen}; "
            f"`{_command(found)}`")


def _command(found: dict) -> str:
    from babelink.train.dual import DualTrainingConfig

    defaults = asdict(DualTrainingConfig())
    options = [f"{option} {found[field]:g}" if isinstance(found[field], float) else f"{option} {found[field]}"
               for field, option in TRAINING_OPTIONS.items() if found.get(field) != defaults[field]]
    options += [f"--types {entity_type}" for entity_type in found["types"] or ()]
    return " ".join([MEDIC_RECIPE, *options])


def medic_report(data: Path, args) -> list[str]:
    systems = [("dual encoder", args.medic_model)] + ([("dual encoder, random negatives only", args.ablation)]
                                                      if args.ablation else [])
    ner = dict(spec.split("=", 1) for spec in args.ner or [])
    notes = [f"- dual encoder: {_training_note(args.medic_model)}"]
    if args.ablation:
        notes.append(f"- random negatives only: {_training_note(args.ablation)}")
    variants = []  # (row name, model, (γ, w) chosen on dev)
    for name, path in systems:
        tuned = _in_child(tune_step, str(data), path)
        (plain_gamma, _), (gamma, weight) = tuned["plain"]["decision"], tuned["fused"]["decision"]
        notes.append(f"- {name}, chosen on NCBI-disease + BC5CDR dev: mention vector alone γ = {plain_gamma} "
                     f"(strict F1 {tuned['plain']['f1']:.3f}); with the span's TF-IDF γ = {gamma}, w = {weight} "
                     f"(strict F1 {tuned['fused']['f1']:.3f})")
        variants.append((name, path, (plain_gamma, 0.0)))
        if weight > 0:
            variants.append((f"{name} + span TF-IDF (w = {weight})", path, (gamma, weight)))
    rows = []
    for corpus_key in ("ncbi", "bc5cdr"):
        runs = [(name, "dual encoder", path, None, decision) for name, path, decision in variants]
        runs += [("default span pipeline", "spans", None, None, None)]
        if corpus_key in ner:
            grid = _in_child(ner_tune_step, str(data), corpus_key, ner[corpus_key], {})
            threshold, dev_f1 = max(((float(link), f1) for link, f1 in grid.items()), key=lambda item: item[1])
            notes.append(f"- NER + CRF of {CORPORA[corpus_key].name}: link threshold {threshold} chosen on dev "
                         f"(strict F1 {dev_f1:.3f}); `{NER_RECIPES[corpus_key]}`")
            runs.append(("NER + CRF, hybrid + training spans", NER_SYSTEM, ner[corpus_key], threshold, None))
        for name, system, path, threshold, decision in runs:
            result = _in_child(link_step, str(data), corpus_key, system, path, threshold, decision)
            s, p, d = result["scores"]["strict"], result["scores"]["partial"], result["detection"]
            rows.append(f"| {CORPORA[corpus_key].name} | {name} | {s['precision']:.3f} | {s['recall']:.3f} | "
                        f"**{s['f1']:.3f}** | {p['f1']:.3f} | {d['precision']:.3f} | {d['recall']:.3f} | "
                        f"{d['f1']:.3f} | {result['docs_per_s']:.1f} | {result['mentions_per_s']:.0f} | "
                        f"{result['rss_mb']:.0f} |")
    lines = notes + ["", ("| corpus | system | strict P | strict R | strict F1 | partial F1 | detection P | "
                          "detection R | detection F1 | docs/s | mentions/s | peak RSS MB |"),
                     "|---|---|" + "---:|" * 10, *rows]
    hybrid = None
    disambiguation = []
    for name, path, (_, weight) in variants:
        ed = _in_child(disambiguation_step, str(data), path, weight)
        hybrid = hybrid or ed
        disambiguation.append(f"| {name} | **{ed['dual']:.3f}** | {ed['dual_per_s']:.0f} |")
    lines += ["", (f"Entity disambiguation, NCBI-disease test gold spans ({hybrid['mentions']:,} in-KB mentions), "
              "one pass per segment:"), "", "| system | Acc@1 | mentions/s |", "|---|---:|---:|", *disambiguation,
              f"| hybrid `normalize` (baseline) | {hybrid['hybrid']:.3f} | {hybrid['hybrid_per_s']:.0f} |"]
    return lines


def mantra_report(data: Path, minutes: float) -> list[str]:
    baseline = _in_child(mantra_baseline_step, str(data))
    folds = {left_out: _in_child(mantra_step, str(data), left_out, minutes) for left_out in (None, *MANTRA)}
    lines = ["", ("Mantra GSC, second halves (strict F1; open-umls): the model trained on every language, the "
             "model trained without the language, and the default span pipeline."), "",
             "| language | gold | dual, language in training | dual, language left out | default span pipeline |",
             "|---|---:|---:|---:|---:|"]
    for lang in MANTRA:
        lines.append(f"| {lang} | {baseline[lang]['gold']} | {folds[None]['scores'][lang]['f1']:.3f} | "
                     f"**{folds[lang]['scores'][lang]['f1']:.3f}** | {baseline[lang]['f1']:.3f} |")
    lines += [""] + [f"- model {'on all' if left_out is None else 'without ' + left_out}: "
                     f"{fold['train_documents']} training documents, {fold['steps']} steps in "
                     f"{fold['seconds'] / 60:.1f} min, γ = {fold['threshold']}" for left_out, fold in folds.items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--medic-model", help="dual encoder trained on the CTD MEDIC benchmark bundle")
    parser.add_argument("--ablation", help="the same trained with random negatives only")
    parser.add_argument("--ner", nargs="*", help="CORPUS=DIR learned detectors for the NER + CRF baseline")
    parser.add_argument("--mantra", action="store_true", help="leave-one-language-out on Mantra GSC")
    parser.add_argument("--mantra-minutes", type=float, default=6.0, help="training budget per Mantra model")
    args = arguments(__doc__.splitlines()[0], parser)
    command = portable(" ".join(["python benchmarks/dual_encoder.py", *sys.argv[1:]]))
    lines = [f"## {time.strftime('%Y-%m-%d')} — dual encoder, one pass per segment (commit `{commit()}`)", "",
             f"Command: `{command}` · machine: {machine()}", ""]
    if args.medic_model:
        lines += medic_report(args.data, args)
    if args.mantra:
        lines += mantra_report(args.data, args.mantra_minutes)
    publish("\n".join(lines) + "\n", not args.no_write, "dual-encoder")


if __name__ == "__main__":
    main()
