"""The GPU training job: one command that trains, distils, evaluates and exports the encoder
artefacts from a training pack (`train.pack`) within a time budget.

    python -m babelink.train.job --pack PACK --out OUT [--minutes 8.5] [--device cuda]
        [--stages NAME,… [--starts DIR]]

Built for a lent GPU (one command of at most 10 minutes, no package registry, 16 MiB per file
back): the SAP and student stages need torch, transformers, peft, safetensors and numpy; the
one-pass stage also reads a KB and documents (pyarrow, scikit-learn, and two pure-Python libraries
the pack carries as wheels). The plan (`PLAN`):

1. the untrained base, evaluated first: the same-run baseline;
2. SAP (003 §2) with LoRA on every synonym source and the MUSE translation pairs (001 §2.2) with
   German and Japanese left out of training entirely, evaluated only: how the method carries to a
   language it never saw;
3. the same on every language: a research artefact (MUSE is CC BY-NC 4.0);
4. SAP on the sources a default may be trained on (open-umls synonyms, QUAERO train mentions),
   with Czech, Greek and Vietnamese left out (`DEFAULT_HOLD_OUT`);
5. the one-pass model (004, `train.dual`) from 4 with LoRA on NCBI-disease and BC5CDR train, against
   a CTD MEDIC bundle built here with 4's encoder, scored end to end on their test sets;
6. a 3-layer student distilled from 4 (`train.student`) on 4's names, for CPU speed.

Each SAP stage keeps its best checkpoint by a dev score (QUAERO, NCBI-disease and BC5CDR dev
against a sample of their KB, never XL-BEL or Mantra); the one-pass stage its γ and w chosen on the
NCBI-disease and BC5CDR dev documents. Stages share the time left after the
baseline in fixed proportions; steps per second are measured once per trainer kind, so each
learning-rate schedule runs to its end within its share. Every model is evaluated on every set of
the pack (Acc@1 and Acc@5 per language, the KB's full name list; a KB's own names in one language
against the KB without that language), and `results.json` in OUT is
rewritten after each stage, so a run cut short still reports what it finished. A failing stage
is recorded and the job goes on; `--stages` runs some of the plan again (with what they start
from, trained again or given by `--starts`) in the time a second try has left.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from babelink.checkpoint import write_settings
from babelink.encoders.artefacts import (
    DUAL_HEAD,
    SUFFIX,
    WORD_EMBEDDINGS,
    apply_artefact,
    read_manifest,
    stacked_lora,
    write_artefact,
)
from babelink.encoders.transformer import SETTINGS_FILE, EncoderSettings, TransformerEncoder, settings_for
from babelink.fsutil import write_text_atomic
from babelink.train import pack as packs
from babelink.train.lora import LORA_FILE
from babelink.train.pairs import MAX_PAIRS_PER_CONCEPT, PositivePair, positive_pairs
from babelink.train.sap import SapConfig, SapTrainer
from babelink.train.student import StudentConfig, StudentTrainer

RESULTS = "results.json"
DEV_SETS = ("quaero-dev", "ncbi-dev", "bc5cdr-dev")
#: Concepts besides the dev gold ones in the dictionary of the dev score.
DEV_DISTRACTORS = 2000
#: Seconds kept free at the end of the budget (writing results, the process's exit).
MARGIN_SECONDS = 20


@dataclass(frozen=True)
class SapStage:
    name: str
    names: tuple[str, ...]  # the pack's name sources
    translations: bool  # the pack's translation pairs
    hold_out: tuple[str, ...]  # languages left out of training
    share: float  # of the training time
    ship: bool
    lora_rank: int = 16
    learning_rate: float = 2e-4
    batch_pairs: int = 256


@dataclass(frozen=True)
class StudentStage:
    name: str
    teacher: str
    layers: int
    share: float
    ship: bool
    batch_size: int = 512
    learning_rate: float = 1e-4


@dataclass(frozen=True)
class DualStage:
    """The one-pass model (004): `init`'s encoder, adapted by LoRA on the `train` documents to
    detect and link every mention in one pass against a bundle of `kb` whose names `init` encodes."""

    name: str
    init: str  # the SAP stage it starts from and links against
    kb: str
    train: tuple[str, ...]  # the pack's document sets
    dev: tuple[str, ...]  # choose the checkpoint, γ and w
    test: tuple[str, ...]  # scored end to end
    share: float
    ship: bool
    lora_rank: int = 16
    learning_rate: float = 5e-4
    head_learning_rate: float = 1e-3
    batch_size: int = 16


EVERY_SOURCE = ("open-umls", "ctd-medic", "quaero-train", "ncbi-train", "bc5cdr-train")
DEFAULT_SOURCES = ("open-umls", "quaero-train")
#: KB languages a default candidate never trains on, so that the pack's held-out names in them say
#: how it reads a language it never saw, as it must read those the KB lacks: no MUSE lexicon and no
#: XL-BEL set in them, one in Greek script, and together a tenth of open-umls's names.
DEFAULT_HOLD_OUT = ("cs", "el", "vi")
PLAN = (
    SapStage("e5-sap-loo-de-ja", EVERY_SOURCE, True, ("de", "ja"), 0.24, ship=False),
    SapStage("e5-sap-muse", EVERY_SOURCE, True, (), 0.26, ship=True),
    SapStage("e5-sap", DEFAULT_SOURCES, False, DEFAULT_HOLD_OUT, 0.24, ship=True),
    # before the student: its bundle, dev and test linking take the longest beside training, and
    # what it overruns is taken from the last stage's share rather than from the job's deadline
    DualStage("e5-sap-dual", "e5-sap", "ctd-medic", ("ncbi-train", "bc5cdr-train"), ("ncbi-dev", "bc5cdr-dev"),
              ("ncbi-test", "bc5cdr-test"), 0.24, ship=True),
    StudentStage("e5-sap-student3", "e5-sap", 3, 0.22, ship=True),
)


class PackEvaluator:
    """Concept-level Acc@1 / Acc@5 of an encoder on the pack's sets against their KB's names: all
    of them (but a held-out language's, for a set of that language's names), or (`distractors`)
    the gold concepts' and that many others' (a quick dev score, or a smoke run on a CPU)."""

    def __init__(self, pack: Path, manifest: dict, device: torch.device, distractors: int | None = None):
        self.device, self.distractors = device, distractors
        self.names: dict[str, list[str]] = {}
        #: Per KB name, its (concept, language) senses, first seen first.
        self.senses: dict[str, list[tuple[tuple[str, str], ...]]] = {}
        for key, entry in manifest["names"].items():
            if key != entry["kb"]:  # a corpus's mentions are training data, not KB names
                continue
            by_name: dict[str, dict[tuple[str, str], None]] = defaultdict(dict)
            for concept, lang, name in packs.read_rows(pack, entry):
                by_name[name][concept, lang] = None
            self.names[key] = list(by_name)
            self.senses[key] = [tuple(senses) for senses in by_name.values()]
        self.sets = {key: (entry["kb"], entry.get("without_lang"), packs.read_rows(pack, entry))
                     for key, entry in manifest["eval"].items()}
        self._searched: dict[tuple[str, str | None], tuple[list[int], list[tuple[str, ...]]]] = {}
        #: What the last `evaluate` spent encoding each KB's names, {kb: {names, seconds}}: with the
        #: whole KB, how fast this device encodes a KB as `build` does (`TransformerEncoder.encode`).
        self.kb_encoding: dict[str, dict] = {}

    def evaluate(self, encoder: TransformerEncoder, sets: tuple[str, ...] | None = None,
                 distractors: int | None = None) -> dict:
        """set -> language -> {n, acc1, acc5}, `all` pooling the set's languages."""
        distractors = self.distractors if distractors is None else distractors
        results, encoded = {}, {}
        self.kb_encoding = {}
        for key, (kb, without, rows) in self.sets.items():
            if sets is not None and key not in sets:
                continue
            indexes, concepts = self._dictionary(kb, without, rows, distractors)
            if distractors is None:  # every name encoded once; a set searches those of its dictionary
                if kb not in encoded:
                    encoded[kb] = self._encode_kb(encoder, kb, self.names[kb])
                vectors = encoded[kb]
                if without is not None:
                    vectors = vectors[torch.as_tensor(indexes, device=vectors.device)]
            else:
                vectors = self._encode_kb(encoder, kb, [self.names[kb][i] for i in indexes])
            ranked = self._ranked(encoder, [row[1] for row in rows], vectors, concepts)
            results[key] = _accuracy(rows, ranked)
        return results

    def dev_score(self, encoder: TransformerEncoder) -> float:
        """Mean Acc@1 over the dev sets, each against its gold concepts and `DEV_DISTRACTORS` others."""
        results = self.evaluate(encoder, DEV_SETS, self._dev_distractors)
        return float(np.mean([value["all"]["acc1"] for value in results.values()])) if results else 0.0

    def dev_strings(self) -> int:
        """How many strings `dev_score` encodes: each dev set's queries and its dictionary's names."""
        return sum(len(rows) + len(self._dictionary(kb, without, rows, self._dev_distractors)[0])
                   for key, (kb, without, rows) in self.sets.items() if key in DEV_SETS)

    @property
    def _dev_distractors(self) -> int:
        return DEV_DISTRACTORS if self.distractors is None else min(DEV_DISTRACTORS, self.distractors)

    def _dictionary(self, kb: str, without: str | None, rows: list[list[str]], distractors: int | None
                    ) -> tuple[list[int], list[tuple[str, ...]]]:
        """The names a set searches (indexes into the KB's) and the concepts each names: all but
        those only `without` gives, the concepts they name in other languages; with `distractors`,
        only those of the gold concepts and of that many others (a seeded sample)."""
        if (kb, without) not in self._searched:
            named = ((i, tuple(dict.fromkeys(c for c, lang in senses if lang != without)))
                     for i, senses in enumerate(self.senses[kb]))
            kept = [(i, concepts) for i, concepts in named if concepts]
            self._searched[kb, without] = ([i for i, _ in kept], [concepts for _, concepts in kept])
        indexes, concepts_of = self._searched[kb, without]
        if distractors is None:
            return indexes, concepts_of
        gold = {concept for row in rows for concept in row[2].split("|")}
        others = sorted({c for concepts in concepts_of for c in concepts} - gold)
        keep = gold | set(random.Random(0).sample(others, min(distractors, len(others))))
        chosen = [j for j, concepts in enumerate(concepts_of) if keep.intersection(concepts)]
        return [indexes[j] for j in chosen], [concepts_of[j] for j in chosen]

    def _encode_kb(self, encoder: TransformerEncoder, kb: str, names: list[str]) -> torch.Tensor:
        """`names` of `kb` encoded, the time it took added to `kb_encoding`."""
        began = time.monotonic()
        vectors = self._encode(encoder, names)
        spent = self.kb_encoding.setdefault(kb, {"names": 0, "seconds": 0.0})
        spent["names"] += len(names)
        spent["seconds"] = round(spent["seconds"] + time.monotonic() - began, 2)
        return vectors

    def _encode(self, encoder: TransformerEncoder, texts: list[str]) -> torch.Tensor:
        dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        return torch.from_numpy(encoder.encode(texts)).to(self.device, dtype)

    def _ranked(self, encoder, queries: list[str], names: torch.Tensor, concepts_of: list[tuple[str, ...]],
                depth: int = 5, shortlist: int = 32) -> list[list[str]]:
        """Each query's first `depth` concepts, in the order of their best name among the `shortlist` nearest."""
        ranked = []
        query_vectors = self._encode(encoder, queries)
        for start in range(0, len(queries), 1024):
            scores = query_vectors[start : start + 1024] @ names.T
            top = scores.topk(min(shortlist, names.shape[0]), dim=1).indices.cpu().tolist()
            for indexes in top:
                concepts = dict.fromkeys(c for index in indexes for c in concepts_of[index])
                ranked.append(list(concepts)[:depth])
        return ranked


def _accuracy(rows: list[list[str]], ranked: list[list[str]]) -> dict:
    hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for (lang, _, gold), concepts in zip(rows, ranked):
        gold_ids = set(gold.split("|"))
        hit = (bool(concepts) and concepts[0] in gold_ids, bool(gold_ids.intersection(concepts)))
        hits[lang].append(hit)
        hits["all"].append(hit)
    return {lang: {"n": len(values), "acc1": round(float(np.mean([v[0] for v in values])), 4),
                   "acc5": round(float(np.mean([v[1] for v in values])), 4)} for lang, values in hits.items()}


class Job:
    def __init__(self, pack: Path, out: Path, minutes: float, device: str, max_steps: int | None = None,
                 plan=PLAN, distractors: int | None = None, given: dict[str, Path] | None = None):
        """`given`: artefacts of an earlier run that stand for stages of the plan (not trained
        again, not evaluated again) as the start of others."""
        self.started = time.monotonic()
        self.pack, self.out, self.plan, self.max_steps = Path(pack), Path(out), plan, max_steps
        self.given = dict(given or {})
        self.distractors = distractors
        self.deadline = self.started + 60 * minutes
        self.device = torch.device(device)
        self.manifest = packs.read_manifest(self.pack)
        self.work = Path(tempfile.mkdtemp(prefix="babelink-job-"))
        self.out.mkdir(parents=True, exist_ok=True)
        self.results: dict = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": _device_name(self.device), "torch": torch.__version__,
            "pack": {k: self.manifest[k] for k in ("commit", "created", "base", "bytes")},
            "code": self._code(),
            "budget": {"minutes": minutes, "max_steps": max_steps, "distractors": distractors},
            # each stage with the languages its model never trained on (`hold_out_of`), for the publisher
            "plan": [{**asdict(stage), "left_out": list(self.hold_out_of(stage))} for stage in plan],
            "stages": {}, "evaluation": {},
            "kb_encoding": {}}
        self.checkpoints: dict[str, Path] = {}
        self.rates: dict[str, float] = {}

    def log(self, message: str) -> None:
        line = f"[{time.monotonic() - self.started:7.1f}s] {message}"
        print(line, flush=True)
        with open(self.out / "job.log", "a", encoding="utf-8") as stream:
            stream.write(line + "\n")

    def save(self) -> None:
        self.results["seconds"] = round(time.monotonic() - self.started, 1)
        write_text_atomic(self.out / RESULTS, json.dumps(self.results, indent=1, ensure_ascii=False))

    def run(self) -> dict:
        try:
            self.base = self.work / "base"
            from babelink.encoders.e5_bundled import convert_e5_file

            convert_e5_file(self.pack / self.manifest["base"]["file"], self.base)
            # encoded as the bundled e5 is (`E5_SETTINGS`); trained and applied checkpoints inherit it
            write_settings(self.base, SETTINGS_FILE, EncoderSettings(**self.manifest["base"]["settings"]))
            self.evaluator = PackEvaluator(self.pack, self.manifest, self.device, self.distractors)
            self.log(f"device {self.results['device']}; base converted, {len(self.evaluator.sets)} evaluation sets")
            if self.results["code"]["as_packed"] is False:
                self.log(f"WARNING: this code is not the code that built the pack ({self.manifest['commit']}): "
                         "the run's commit is unknown (rebuild the pack with `make pack` before a run)")
            began = time.monotonic()
            self.evaluate("base", self.base)
            # besides training, a stage evaluates its model, scores dev three times, loads, probes and exports;
            # the estimate is replaced by what each stage measures
            self.overhead = 1.5 * (time.monotonic() - began) + 15
            self.dev_seconds = self._dev_seconds()
            for name, artefact in self.given.items():
                try:
                    self.adopt(name, artefact)
                except Exception as error:  # noqa: BLE001 — recorded as the stage's failure; those after it fail too
                    self.failed(name, error)
            for index, stage in enumerate(self.plan):
                if stage.name in self.given:
                    continue
                began, seconds = time.monotonic(), self.stage_seconds(index)
                try:
                    self.run_stage(stage, seconds)
                    self.overhead = max(time.monotonic() - began - seconds, 0.0)
                except Exception as error:  # noqa: BLE001 — one failed stage must not cost the others
                    self.failed(stage.name, error)
                self.save()
        finally:
            self.save()
            shutil.rmtree(self.work, ignore_errors=True)
        return self.results

    def _dev_seconds(self) -> float:
        """What a dev score should take here: its strings at the rate the base's evaluation just
        encoded names (seconds on a GPU; minutes on a CPU, where it must come out of a stage's steps)."""
        spent = self.evaluator.kb_encoding.values()
        names, seconds = sum(kb["names"] for kb in spent), sum(kb["seconds"] for kb in spent)
        if not names:  # a pack without evaluation sets: no dev score either
            return 0.0
        strings = self.evaluator.dev_strings()
        estimate = strings * seconds / names
        self.log(f"a dev score: {strings:,} strings, about {estimate:.0f}s")
        return estimate

    def failed(self, name: str, error: Exception) -> None:
        self.results["stages"][name] = {"error": f"{type(error).__name__}: {error}",
                                        "traceback": traceback.format_exc(limit=8)}
        self.log(f"{name} FAILED: {error}")

    def evaluate(self, name: str, checkpoint: Path) -> None:
        began = time.monotonic()
        encoder = self.encoder(checkpoint)
        self.results["evaluation"][name] = evaluation = self.evaluator.evaluate(encoder)
        self.results["kb_encoding"][name] = self.evaluator.kb_encoding
        headline = {key: value["all"]["acc1"] for key, value in evaluation.items()}
        self.log(f"evaluated {name} in {time.monotonic() - began:.1f}s: {headline}")
        self.save()

    def encoder(self, checkpoint: Path) -> TransformerEncoder:
        """The checkpoint as `normalize` would encode with it, in larger batches on a GPU."""
        batch_size = 1024 if self.device.type == "cuda" else None
        return TransformerEncoder(checkpoint, settings_for(checkpoint, batch_size=batch_size), device=str(self.device))

    def _code(self) -> dict:
        """The running code's fingerprint, and whether it is the code that built the pack (None: a
        pack that does not say)."""
        fingerprint, packed = packs.code_fingerprint(), self.manifest.get("code")
        return {"fingerprint": fingerprint, "as_packed": None if packed is None else packed == fingerprint}

    def commit(self) -> str | None:
        """The pack's commit, marked `+code-changed` when other code runs: the run's own commit is unknown."""
        commit = self.manifest["commit"]
        return f"{commit or 'unknown'}+code-changed" if self.results["code"]["as_packed"] is False else commit

    def stage_seconds(self, index: int) -> float:
        """Training seconds of stage `index`: its share of what is left once every stage still to
        run has had its overhead."""
        rest = [stage for stage in self.plan[index:] if stage.name not in self.given]
        available = self.deadline - time.monotonic() - MARGIN_SECONDS - len(rest) * self.overhead
        return self.plan[index].share / sum(stage.share for stage in rest) * available

    def adopt(self, name: str, artefact: Path) -> None:
        """An earlier run's artefact of stage `name`, applied to the base as the start of the
        stages after it."""
        kept = self.work / (name + SUFFIX)
        shutil.copyfile(artefact, kept)
        checkpoint = self.work / f"{name}-applied"
        apply_artefact(kept, self.base, self.manifest["base"]["sha256"], checkpoint)
        self.checkpoints[name] = checkpoint
        training = read_manifest(kept)["training"]
        self.results["stages"][name] = {"given": Path(artefact).name, "commit": training["commit"],
                                        "device": training["device"], "steps": training["steps"]}
        self.log(f"{name}: the artefact {artefact} of an earlier run ({training['steps']:,} steps)")

    def run_stage(self, stage, seconds: float) -> None:
        if seconds < 10 and self.max_steps is None:
            raise RuntimeError(f"{max(seconds, 0):.0f}s of training left for it within --minutes (a stage's "
                               f"evaluation and export take about {self.overhead:.0f}s)")
        sap, dual = isinstance(stage, SapStage), isinstance(stage, DualStage)
        trainer = (self.sap_trainer(stage, seconds) if sap else self.dual_trainer(stage, seconds) if dual
                   else self.student_trainer(stage, seconds))
        self.log(f"{stage.name}: {len(trainer.items):,} items, {trainer.total_steps:,} steps in "
                 f"{max(seconds, 0):.0f}s")
        began = time.monotonic()
        if sap:
            # halfway and at the end (`_finish`), not also a step before the end of an odd count
            trainer.train(evaluate=self.evaluator.dev_score, eval_every=max(1, (trainer.total_steps + 1) // 2))
        elif dual:
            trainer.train(dev=self.documents(stage.dev))
        else:
            trainer.train()
        trained = time.monotonic() - began
        state = trainer.state
        record = {"steps": state.step, "seconds": round(trained, 1), "items": len(trainer.items),
                  "default_eligible": self.default_eligible(stage),
                  "config": asdict(trainer.config), "dev_scores": state.evaluations,
                  "loss": [round(v, 4) for v in state.loss_history[:: max(1, len(state.loss_history) // 50)]]}
        self.results["stages"][stage.name] = record
        artefact = self.work / (stage.name + SUFFIX)
        self.export(stage, trainer, record, artefact)
        if dual:
            self.evaluate_dual(stage, trainer.out, trainer.bundle)
        else:
            checkpoint = self.work / f"{stage.name}-applied"
            apply_artefact(artefact, self.base, self.manifest["base"]["sha256"], checkpoint)
            self.checkpoints[stage.name] = checkpoint
            self.evaluate(stage.name, checkpoint)
        self.ship(stage, artefact, record)
        del trainer
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def ship(self, stage, artefact: Path, record: dict) -> None:
        """Copy a shipped stage's artefact to OUT with its evaluation in the manifest."""
        if stage.ship:
            manifest = read_manifest(artefact)
            manifest["evaluation"] = self.results["evaluation"][stage.name]
            write_artefact(self.out / artefact.name, manifest, load_file(str(artefact)))
            record["artefact"] = artefact.name

    def documents(self, keys: tuple[str, ...]) -> list:
        return [document for key in keys for document in packs.read_pack_documents(self.pack,
                                                                                    self.manifest["documents"][key])]

    def evaluate_dual(self, stage: DualStage, model_dir: Path, bundle) -> None:
        """End-to-end strict and partial P/R/F1 of the one-pass model on each test set."""
        from babelink.dual.linker import DualLinker
        from babelink.dual.model import DualModel
        from babelink.train.dual import link_scores

        began = time.monotonic()
        linker = DualLinker(DualModel(model_dir, str(self.device)), bundle)
        self.results["evaluation"][stage.name] = evaluation = {key: link_scores(linker, self.documents((key,)))
                                                               for key in stage.test}
        headline = {key: round(value["strict"]["f1"], 4) for key, value in evaluation.items()}
        self.log(f"evaluated {stage.name} in {time.monotonic() - began:.1f}s: strict F1 {headline}")
        self.save()

    def steps(self, kind: str, seconds: float, probe) -> int:
        """Steps that fit `seconds`, from a rate measured once per trainer kind (`probe()` builds a
        throwaway trainer); `max_steps` (toy runs) caps it."""
        if self.max_steps is not None:
            return self.max_steps
        if kind not in self.rates:
            times: list[float] = []
            probe().train(progress=lambda state, elapsed: times.append(elapsed))
            self.rates[kind] = (len(times) - 3) / max(times[-1] - times[2], 1e-6)
            self.results.setdefault("steps_per_second", {})[kind] = round(self.rates[kind], 2)
            self.log(f"{kind}: {self.rates[kind]:.1f} steps/s")
        return max(1, int(0.92 * self.rates[kind] * seconds))

    def sap_trainer(self, stage: SapStage, seconds: float) -> SapTrainer:
        pairs = self.sap_pairs(stage)

        def config(steps: int) -> SapConfig:
            return SapConfig(learning_rate=stage.learning_rate, batch_pairs=stage.batch_pairs,
                             lora_rank=stage.lora_rank, max_steps=steps, checkpoint_every=10**9, epochs=10**6,
                             max_minutes=seconds / 60 if steps > 20 else None)

        def probe() -> SapTrainer:
            return SapTrainer(self.base, pairs, self.work / "probe-sap", config(20), device=str(self.device))

        # the dev score halfway through counts inside `max_minutes`: the steps planned leave it room
        steps = self.steps("sap", seconds - self.dev_seconds, probe)
        return SapTrainer(self.base, pairs, self.work / stage.name, config(steps), device=str(self.device))

    def student_trainer(self, stage: StudentStage, seconds: float) -> StudentTrainer:
        teacher = self.checkpoints[stage.teacher]
        taught, hold_out = self.stage_named(stage.teacher), self.hold_out_of(stage)
        names = [name for key in taught.names
                 for _, lang, name in packs.read_rows(self.pack, self.manifest["names"][key]) if lang not in hold_out]

        def config(steps: int) -> StudentConfig:
            return StudentConfig(layers=stage.layers, batch_size=stage.batch_size, learning_rate=stage.learning_rate,
                                 max_steps=steps, max_minutes=seconds / 60 if steps > 20 else None,
                                 checkpoint_every=10**9, epochs=10**6)

        steps = self.steps("student", seconds, lambda: StudentTrainer(teacher, names, self.work / "probe-student",
                                                                      config(20), device=str(self.device)))
        return StudentTrainer(teacher, names, self.work / stage.name, config(steps), device=str(self.device))

    def dual_trainer(self, stage: DualStage, seconds: float):
        """A trainer against a lazy bundle of `stage.kb` built here with `stage.init`'s encoder: its
        names are encoded once, on this device, and searched exactly (`index.exact`)."""
        install_wheels(self.pack, self.manifest, self.work / "wheels")
        from babelink.bundle.store import build_bundle, load_bundle
        from babelink.index.dense import DenseParams
        from babelink.kb.readers import read_kb
        from babelink.train.dual import DualTrainer, DualTrainingConfig

        init = self.checkpoints[stage.init]
        kb = read_kb(self.pack / self.manifest["kb"][stage.kb]["file"])
        # The one-pass model searches every name (`searchable`): no approximate vectors, which need FAISS.
        bundle = load_bundle(build_bundle(kb, self.work / f"bundle-{stage.name}", retriever="hybrid", encoder=init,
                                          dense_params=DenseParams(kind="lazy", approximate=False)))
        documents = self.documents(stage.train)

        def config(steps: int) -> DualTrainingConfig:
            return DualTrainingConfig(learning_rate=stage.learning_rate, head_learning_rate=stage.head_learning_rate,
                                      batch_size=stage.batch_size, lora_rank=stage.lora_rank, max_steps=steps,
                                      max_minutes=seconds / 60 if steps > 20 else None, epochs=10**6,
                                      eval_every=max(1, steps // 2), checkpoint_every=10**9)

        steps = self.steps("dual", seconds, lambda: DualTrainer(init, bundle, documents, self.work / "probe-dual",
                                                                config(20), device=str(self.device)))
        return DualTrainer(init, bundle, documents, self.work / stage.name, config(steps), device=str(self.device))

    def sap_pairs(self, stage: SapStage) -> list[PositivePair]:
        hold_out = set(stage.hold_out)
        names = [(name, f"{entry['kb']}:{concept}")
                 for key in stage.names for entry in [self.manifest["names"][key]]
                 for concept, lang, name in packs.read_rows(self.pack, entry) if lang not in hold_out]
        pairs = positive_pairs(names, MAX_PAIRS_PER_CONCEPT)
        if stage.translations:
            for lang, entry in self.manifest["pairs"].items():
                if lang not in hold_out:
                    pairs += [PositivePair(english, foreign, f"muse-{lang}#{index}")
                              for index, (english, foreign) in enumerate(packs.read_rows(self.pack, entry))]
        return pairs

    def export(self, stage, trainer, record: dict, path: Path) -> None:
        trained = trainer.out
        dual = isinstance(stage, DualStage)
        # a one-pass model encodes names as the encoder it links against does
        settings = read_manifest(self.work / (stage.init + SUFFIX))["settings"] if dual else json.loads(
            (trained / SETTINGS_FILE).read_text())
        sources = self.sources_of(stage)
        manifest = {"name": stage.name, "base": {k: self.manifest["base"][k] for k in ("name", "sha256")},
                    "settings": settings,
                    "training": {"sources": {s: self.manifest["licences"][s] for s in sources},
                                 "default_eligible": self.default_eligible(stage),
                                 "hold_out": list(self.hold_out_of(stage)),
                                 "steps": record["steps"], "seconds": record["seconds"], "items": record["items"],
                                 "config": record["config"], "device": self.results["device"],
                                 "commit": self.commit(), "pack_created": self.manifest["created"]}}
        if isinstance(stage, SapStage):
            write_artefact(path, {**manifest, "kind": "lora"}, load_file(str(trained / LORA_FILE)))
        elif dual:  # the init's adapters and the stage's, one LoRA of their summed ranks, and the head
            from babelink.dual.model import HEAD_FILE
            from babelink.dual.model import SETTINGS_FILE as DUAL_SETTINGS_FILE

            tensors = stacked_lora(load_file(str(self.work / (stage.init + SUFFIX))),
                                   load_file(str(trained / LORA_FILE)))
            tensors |= {DUAL_HEAD + name: tensor for name, tensor in load_file(str(trained / HEAD_FILE)).items()}
            write_artefact(path, {**manifest, "kind": "dual", "entity_encoder": stage.init,
                                  "dual": json.loads((trained / DUAL_SETTINGS_FILE).read_text())}, tensors)
        else:
            state = load_file(str(trained / "model.safetensors"))
            base = load_file(str(self.base / "model.safetensors"))
            if not torch.equal(state[WORD_EMBEDDINGS], base[WORD_EMBEDDINGS]):
                raise RuntimeError("the student's word embeddings are not the base's; it cannot ship without them")
            tensors = {name: tensor.half() for name, tensor in state.items() if name != WORD_EMBEDDINGS}
            write_artefact(path, {**manifest, "kind": "student", "layers": trainer.config.layers}, tensors)

    def sources_of(self, stage) -> list[str]:
        if isinstance(stage, StudentStage):
            return self.sources_of(self.stage_named(stage.teacher))
        if isinstance(stage, DualStage):
            documents = {self.manifest["documents"][key]["source"] for key in stage.train + stage.dev}
            kb = {self.manifest["kb"][stage.kb]["source"]}
            return sorted(set(self.sources_of(self.stage_named(stage.init))) | documents | kb)
        named = {self.manifest["names"][key]["source"] for key in stage.names}
        return sorted(named | ({"muse"} if stage.translations and self.manifest["pairs"] else set()))

    def default_eligible(self, stage) -> bool:
        """Whether every source of the stage allows what is derived from it to be the default."""
        return all(self.manifest["default_eligible"][source] for source in self.sources_of(stage))

    def hold_out_of(self, stage) -> tuple[str, ...]:
        """The languages a stage's model never trained on: a SAP stage's own, or those of the
        stage it starts from (a student's names are its teacher's; a one-pass model's documents
        are English)."""
        if isinstance(stage, SapStage):
            return stage.hold_out
        return self.hold_out_of(self.stage_named(stage.teacher if isinstance(stage, StudentStage) else stage.init))

    def stage_named(self, name: str):
        return next(stage for stage in self.plan if stage.name == name)


def select_stages(plan: tuple, names: list[str]) -> tuple:
    """The stages of `plan` named, and those they start from (a student's teacher, a one-pass
    model's init), in the plan's order: a rerun of what failed, within what a second try has left."""
    by_name = {stage.name: stage for stage in plan}
    unknown = [name for name in names if name not in by_name]
    if unknown or not names:
        raise ValueError(f"--stages: {', '.join(unknown) or 'none given'}: not a stage of the plan "
                         f"({', '.join(by_name)})")
    chosen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        chosen.add(name)
        start = getattr(by_name[name], "teacher", None) or getattr(by_name[name], "init", None)
        if start and start not in chosen:
            pending.append(start)
    return tuple(stage for stage in plan if stage.name in chosen)


def install_wheels(pack: Path, manifest: dict, target: Path) -> None:
    """Make the pack's wheels importable where their libraries are missing (a bare GPU machine)."""
    missing = [wheel for wheel in manifest.get("wheels", ())
               if importlib.util.find_spec(Path(wheel).name.split("-")[0]) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                        str(target), *(str(pack / wheel) for wheel in missing)], check=True)
        sys.path.insert(0, str(target))
        importlib.invalidate_caches()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    import platform

    return f"CPU {platform.processor() or platform.machine()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", type=Path, required=True, help="training pack (babelink train pack)")
    parser.add_argument("--out", type=Path, required=True, help="folder for results.json, job.log and artefacts")
    parser.add_argument("--minutes", type=float, default=8.5, help="wall-clock budget of the whole job")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-steps", type=int, default=None, help="cap every stage's steps (a toy run)")
    parser.add_argument("--distractors", type=int, default=None,
                        help="evaluate against the gold concepts and this many others, not the whole KB (a CPU run)")
    parser.add_argument("--stages", help="comma-separated stages of the plan to run, with those they start from "
                                         f"(default: all of {', '.join(stage.name for stage in PLAN)})")
    parser.add_argument("--starts", type=Path, help="with --stages, an earlier run's artefacts (NAME.safetensors): "
                                                    "a stage needed only as a start is taken from there, not trained")
    args = parser.parse_args(argv)
    plan, given = PLAN, {}
    if args.stages is not None:
        names = [name.strip() for name in args.stages.split(",") if name.strip()]
        try:
            plan = select_stages(PLAN, names)
        except ValueError as error:
            parser.error(str(error))
        if args.starts is not None:
            if not args.starts.is_dir():
                parser.error(f"--starts {args.starts}: no such folder")
            given = {stage.name: args.starts / (stage.name + SUFFIX) for stage in plan
                     if stage.name not in names and (args.starts / (stage.name + SUFFIX)).is_file()}
    elif args.starts is not None:
        parser.error("--starts goes with --stages: it gives the starts of the stages named there")
    results = Job(args.pack, args.out, args.minutes, args.device, args.max_steps, plan=plan,
                  distractors=args.distractors, given=given).run()
    failed = [name for name, stage in results["stages"].items() if "error" in stage]
    print(json.dumps({name: value["all"]["acc1"] for name, value in results["evaluation"].get("base", {}).items()}))
    return 1 if failed or not results["stages"] else 0


if __name__ == "__main__":
    sys.exit(main())
