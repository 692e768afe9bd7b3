"""Training the collective dual encoder (004 §3.3–3.4, §4.3) on annotated documents of any
language whose concept ids are in a bundle's KB.

Each step encodes a batch of segments once. The loss is the sum of
- mention detection: binary cross-entropy of Eq. 4 over every span of up to L words, gold
  spans positive and the others negative (§3.4), focal and normalised by the gold spans
  (`focal_span_loss`). A gold mention whose ids are not in the KB is
  neither: the model is not taught to ignore it. A mention ending inside a word is learned as
  the words it covers;
- entity disambiguation: cross-entropy of each gold mention's concept (any of its names, up to
  `NAMES_PER_CONCEPT`) against the other candidates of the batch: for every mention, random
  names and the hard negatives nearest to its current vector (§3.2; 1:1 as in §4.3). The KB
  vectors are the bundle's fixed index, so hard negatives are exact under the current model at
  every step, with no refresh to schedule.
AdamW with linear warm-up and decay (§4.3), a faster rate for the fresh head, bf16 autocast on
CPUs that compute it natively, word embeddings frozen by default (the largest matrix, and the
vocabulary's cross-lingual alignment). Training is deterministic for a seed and resumable
bit-identically from `out/resume/`; with dev documents, the checkpoint with the best dev strict F1
(its γ tuned on the same documents) is what `out/` receives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from babelink.augment import gold_resolver
from babelink.bundle.store import Bundle
from babelink.checkpoint import load_pretrained, load_with_head, write_settings
from babelink.detect.overlaps import resolve_overlaps
from babelink.detect.tokenize import tokenize
from babelink.dual.linker import DualLinker, word_range
from babelink.dual.model import HEAD_FILE, DualEncoder, DualModel, DualSettings, save_dual
from babelink.errors import BabelinkError, InvalidInputError
from babelink.eval.linking import in_kb_gold
from babelink.eval.metrics import span_scores
from babelink.formats.document import Document
from babelink.fsutil import write_directory
from babelink.train.lora import LORA_FILE, load_lora_tensors, lora_tensors, merged_encoder, with_lora
from babelink.train.optim import adamw_with_linear_schedule
from babelink.train.resume import RESUME_DIR, STATE_FILE, ResumableTrainer, TrainingState, seed_everything

TRAINING_FILE = "training.json"
#: The model a LoRA run's adapters adapt, written once: its resume point keeps only what trains.
START_DIR = "start"
#: Names of a gold concept that count as right in the disambiguation loss.
NAMES_PER_CONCEPT = 32
#: Mention thresholds γ and TF-IDF weights w tried on dev at every evaluation.
THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
SPARSE_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: Spans per dev document above a threshold beyond which dev tuning skips it (memory: each is a
#: vector); NCBI-disease and BC5CDR have about 8 gold mentions per document.
MAX_HITS_PER_DOCUMENT = 200


@dataclass(frozen=True)
class DualTrainingConfig:
    """Defaults: 004 §4.3 (AdamW, linear schedule, 1:1 hard and random negatives, L = 10, 512-token
    segments); the encoder rate is that of the NER detector (1e-4, 002 recipe, BENCHMARKS.md) rather
    than §4.3's 1e-5, because a CPU run sees few epochs."""

    learning_rate: float = 1e-4
    head_learning_rate: float = 1e-3
    weight_decay: float = 0.01
    epochs: int = 5
    batch_size: int = 4  # segments per step
    max_length: int = 512
    max_span_words: int = 10
    pooling: str = "mean"
    hard_negatives: int = 8  # per mention
    random_negatives: int = 8  # per mention
    scale: float = 20.0
    warmup_ratio: float = 0.1
    freeze_embeddings: bool = True
    lora_rank: int = 0  # > 0: the encoder trains low-rank adapters only (`train.lora`), a shippable file
    types: tuple[str, ...] | None = None  # learn only annotations of these types
    max_steps: int | None = None
    max_minutes: float | None = None
    eval_every: int | None = None  # steps between dev evaluations; None: once per epoch
    checkpoint_every: int = 100
    seed: int = 0


@dataclass(frozen=True)
class DualExample:
    """One segment: its words; gold spans (first, last word) with their KB concept rows; spans of
    mentions of no KB concept, left out of the detection loss."""

    words: tuple[str, ...]
    mentions: tuple[tuple[int, int, tuple[int, ...]], ...]
    ignored: tuple[tuple[int, int], ...]


def examples(model: DualModel, bundle: Bundle, documents: Sequence[Document],
             types: Sequence[str] | None = None) -> list[DualExample]:
    """The segments of `documents` (as the model reads them at inference) with their gold spans."""
    resolve = gold_resolver(bundle.kb)
    row_of = {concept: row for row, concept in enumerate(bundle.kb.concepts.column("concept_id").to_pylist())}
    found = []
    for document in documents:
        tokens = tokenize(document.text)
        annotations = [a for a in document.annotations if types is None or a.type in types]
        for first, end in model.segments(document.text, tokens):
            window = tokens[first:end]
            mentions, ignored = [], []
            for annotation in annotations:
                words = word_range(window, annotation.start, annotation.end)
                if words is not None:
                    rows = tuple(sorted({row_of[c] for c in map(resolve, annotation.concept_ids) if c}))
                    if rows:
                        mentions.append((*words, rows))
                    else:
                        ignored.append(words)
            found.append(DualExample(tuple(t.text for t in window), tuple(mentions), tuple(ignored)))
    return found


class DualTrainer(ResumableTrainer):
    """Trains `out/` against `bundle` from the checkpoint `init` (or resumes `out/resume/`)."""

    def __init__(self, init: str | Path, bundle: Bundle, documents: Sequence[Document], out: str | Path,
                 config: DualTrainingConfig = DualTrainingConfig(), device: str | None = None):
        if bundle.dense is None:
            raise InvalidInputError(f"{bundle.path}: the dual encoder links against name vectors; "
                                    f"build the bundle with a dense index (--retriever dense or hybrid)")
        self.config, self.bundle, self.out = config, bundle, Path(out)
        resume = self.out / RESUME_DIR
        resuming = (resume / STATE_FILE).is_file()
        seed_everything(config.seed)
        # adapters resume on the model they adapt (`START_DIR`); a full fine-tuning from its own weights
        start = self.out / START_DIR if config.lora_rank else resume
        if not resuming or not (start / HEAD_FILE).is_file():
            initial_model(Path(init), bundle, start, config)
        self.dual = DualModel(start, device)
        if config.lora_rank:
            self.dual.model.encoder = with_lora(self.dual.model.encoder, config.lora_rank)
            if resuming:
                self._restore_adapters(resume)
        elif config.freeze_embeddings:
            self.dual.model.encoder.get_input_embeddings().weight.requires_grad_(False)
        self.items, self.batch_size = examples(self.dual, bundle, documents, config.types), config.batch_size
        if not any(example.mentions for example in self.items):
            raise InvalidInputError("no annotation of the training documents names a concept of the bundle's KB")
        self._dense = bundle.dense.searchable(str(self.dual.device))
        self._names = _names_of_concepts(bundle, {row for e in self.items for *_, rows in e.mentions for row in rows})
        self.optimizer, self.scheduler = adamw_with_linear_schedule(
            self.dual.model, config.learning_rate, config.weight_decay, self.total_steps, config.warmup_ratio,
            lambda name: config.learning_rate if name.startswith("encoder.") else config.head_learning_rate)
        self.state = TrainingState()
        self._dev: Sequence[Document] = ()
        if resuming:
            self.load_resume_point(resume)

    @property
    def examples(self) -> list[DualExample]:
        return self.items

    def loss(self, batch: Sequence[DualExample], step: int) -> torch.Tensor:
        """Detection BCE + disambiguation cross-entropy of one batch; the random negatives depend
        only on the seed and the step (resumable)."""
        dual = self.dual
        encoded = dual.encode([example.words for example in batch])
        spans = dual.score_spans(encoded)
        labels = torch.zeros_like(spans.logits)
        counted = spans.valid.clone()
        position = {(a, b): i for i, (a, b) in enumerate(zip(spans.starts.tolist(), spans.ends.tolist()))}
        for row, example in enumerate(batch):
            for a, b, *_ in example.mentions:
                if (a, b) in position:
                    labels[row, position[a, b]] = 1.0
            for a, b in example.ignored:
                if (a, b) in position and labels[row, position[a, b]] == 0:
                    counted[row, position[a, b]] = False
        detection = focal_span_loss(spans.logits[counted], labels[counted])
        linked = [(row, a, b, rows) for row, example in enumerate(batch) for a, b, rows in example.mentions]
        if not linked:
            return detection
        rows, first, last, gold = zip(*linked)
        vectors = dual.mention_vectors(encoded, *(torch.tensor(c, device=dual.device) for c in (rows, first, last)))
        return detection + self._disambiguation(vectors, gold, np.random.default_rng([self.config.seed, step]))

    def _disambiguation(self, vectors: torch.Tensor, gold: Sequence[tuple[int, ...]],
                        rng: np.random.Generator) -> torch.Tensor:
        config, names, dense = self.config, self.bundle.names, self._dense
        gold_names = [np.unique(np.concatenate([self._names[row] for row in rows])) for rows in gold]
        found, _ = dense.search(vectors.detach().float().cpu().numpy(),
                                config.hard_negatives + max(len(g) for g in gold_names))
        hard = [[r for r in hits if r >= 0 and r not in own][: config.hard_negatives]
                for hits, own in zip(found.tolist(), map(set, gold_names))]
        random_rows = rng.integers(0, len(names), size=config.random_negatives * len(gold)).tolist()
        candidates = np.unique(np.concatenate([*gold_names, np.array([r for h in hard for r in h], dtype=np.int64),
                                               np.array(random_rows, dtype=np.int64)]))
        stored = torch.from_numpy(dense.vectors(candidates)).to(vectors.device)
        logits = config.scale * vectors @ stored.T
        named = [set(names.concepts_of(candidate).tolist()) for candidate in candidates.tolist()]
        positive = torch.tensor([[not concepts.isdisjoint(rows) for concepts in named] for rows in gold],
                                device=logits.device)  # any name of a gold concept, wherever it came from
        return (torch.logsumexp(logits, dim=1) - torch.logsumexp(logits.masked_fill(~positive, -1e4), dim=1)).mean()

    def optimise(self, batch: list[DualExample]) -> float:
        loss = self.loss(batch, self.state.step)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.dual.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return float(loss.detach())

    def train(self, dev: Sequence[Document] = (),
              progress: Callable[[TrainingState, float], None] | None = None) -> Path:
        """Train until the epochs, `max_steps` or `max_minutes` run out; with `dev` documents, every
        `eval_every` steps (default: each epoch) and at the end the best dev strict F1 decides what
        `out/` receives, with its mention threshold. Returns `out`."""
        self._dev = dev
        return self.run(self.dual.model, progress, bool(dev), self.config.eval_every or self.batches_per_epoch)

    def evaluation(self) -> tuple[float, float, float]:
        return tune_decision(DualLinker(self.dual, self.bundle), self._dev, self.config.types)

    def save_model(self, directory: Path, evaluation: tuple | None) -> None:
        """A dual encoder directory `DualModel` loads; with LoRA, the adapters merged into the
        encoder and also kept apart in `LORA_FILE` (what an artefact ships, what a resumed run restores)."""
        settings = self.dual.settings
        if evaluation is not None:  # (dev F1, γ, w)
            settings = replace(settings, threshold=evaluation[1], sparse_weight=evaluation[2])
        model = self.dual.model
        adapted = model.encoder
        if self.config.lora_rank:
            save_file(lora_tensors(adapted), str(directory / LORA_FILE))
            model.encoder = merged_encoder(adapted)  # the same head, over the encoder with its adapters merged
        try:
            save_dual(directory, self.dual.tokenizer, model, settings)
        finally:
            model.encoder = adapted
        write_settings(directory, TRAINING_FILE, {**asdict(self.config), "steps": self.state.step,
                                                  "seconds": round(self.state.seconds, 1),
                                                  "evaluations": self.state.evaluations})

    def data_identity(self) -> dict[str, int]:
        return {"segments": len(self.items)}

    def _restore_adapters(self, resume: Path) -> None:
        self.dual.model.load_state_dict(load_file(str(resume / HEAD_FILE)), strict=False)
        load_lora_tensors(self.dual.model.encoder, load_file(str(resume / LORA_FILE)))


def focal_span_loss(logits: torch.Tensor, labels: torch.Tensor, gamma: float = 2.0,
                    alpha: float = 0.25) -> torch.Tensor:
    """Focal binary cross-entropy summed over spans and divided by the number of gold spans
    (Lin et al. 2017, as for dense object detection): a segment holds a few mentions among
    thousands of spans. The plain mean of 004 §3.4 teaches little more than "no" on a CPU budget
    (after one epoch on NCBI-disease + BC5CDR, gold spans scored p(m) 0.05–0.25, dev strict F1
    0.08); weighing the two classes equally lifts recall but leaves near-miss boundaries
    ("ataxia-telangiectasia gene (ATM") at p(m) ≈ 1 (dev F1 0.38, precision 0.2–0.5). The focal
    term keeps the weight on such hard negatives and takes it off the easy ones."""
    losses = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none")
    probability = torch.sigmoid(logits)
    right = labels * probability + (1 - labels) * (1 - probability)
    weights = (labels * alpha + (1 - labels) * (1 - alpha)) * (1 - right) ** gamma
    return (weights * losses).sum() / labels.sum().clamp(min=1.0)


def initial_model(init: Path, bundle: Bundle, out: Path, config: DualTrainingConfig = DualTrainingConfig()) -> Path:
    """Write (atomically) an untrained dual encoder at `out`: the checkpoint `init` with a fresh
    head, bound to `bundle`'s name vectors. When `init` is itself a dual encoder, its span scorer
    and Eq. 1 projection are kept: a model trained on one corpus, KB or language goes on learning
    another (its γ is chosen again on the new dev documents)."""
    write_directory(out, lambda staging: _initialise(staging, init, bundle, config))
    return out


def _initialise(staging: Path, init: Path, bundle: Bundle, config: DualTrainingConfig) -> None:
    from transformers import AutoTokenizer

    built = bundle.manifest["dense"]["encoder"]
    settings = DualSettings(max_span_words=config.max_span_words, max_length=config.max_length,
                            pooling=config.pooling, scale=config.scale,
                            entity_encoder={"name": built.get("name"), "fingerprint": built.get("fingerprint"),
                                            "dimension": bundle.dense.dimension})
    if (Path(init) / HEAD_FILE).is_file():
        tokenizer, model = load_with_head(Path(init), DualEncoder, HEAD_FILE, "dual encoder")
        save_dual(staging, tokenizer, model, settings)
        return
    encoder = load_pretrained(init)
    try:
        tokenizer = AutoTokenizer.from_pretrained(init, local_files_only=True)
    except (OSError, ValueError) as error:
        raise BabelinkError(f"{init}: cannot load the checkpoint: {error}") from None
    save_dual(staging, tokenizer, DualEncoder(encoder), settings)


def _names_of_concepts(bundle: Bundle, concept_rows: set[int]) -> dict[int, np.ndarray]:
    """Name-table rows of each wanted concept (at most `NAMES_PER_CONCEPT`, in table order)."""
    names = bundle.names
    strings = np.repeat(np.arange(len(names)), np.diff(names.offsets))
    wanted = np.isin(names.concept_rows, list(concept_rows))
    found: dict[int, list[int]] = {row: [] for row in concept_rows}
    for string, concept in zip(strings[wanted].tolist(), names.concept_rows[wanted].tolist()):
        if len(found[concept]) < NAMES_PER_CONCEPT:
            found[concept].append(string)
    return {row: np.array(rows, dtype=np.int64) for row, rows in found.items()}


def link_scores(linker: DualLinker, documents: Sequence[Document]) -> dict:
    """Strict and partial P/R/F1 (`eval.metrics.span_scores`) of the mentions `linker` links in
    `documents` against their in-KB gold mentions."""
    predicted = [(d.id, m.start, m.end, m.candidates[0].concept_id)
                 for d in linker.link(documents) for m in d.mentions]
    return span_scores(predicted, _in_kb_gold(linker, documents))


def _in_kb_gold(linker: DualLinker, documents: Sequence[Document],
                types: Sequence[str] | None = None) -> list[tuple[str, int, int, frozenset[str]]]:
    """(doc id, start, end, KB ids) of the documents' gold mentions (of `types`) naming a KB concept."""
    return [(*span, ids) for span, ids in in_kb_gold(documents, gold_resolver(linker.kb), types).items()]


def tune_decision(linker: DualLinker, documents: Sequence[Document], types: Sequence[str] | None = None,
                  weights: Sequence[float] = SPARSE_WEIGHTS) -> tuple[float, float, float]:
    """(best strict F1, its γ, its w) over `THRESHOLDS` × `weights`, against the documents' in-KB
    gold mentions; the spans are scored once, at the lowest threshold, and ranked once per w. A tie
    goes to the smaller w (no TF-IDF search per span at w = 0). Thresholds above which more than
    `MAX_HITS_PER_DOCUMENT` spans per document lie are not tried: scoring starts at the lowest
    other (an early checkpoint that finds most spans likely mentions)."""
    gold = _in_kb_gold(linker, documents, types)
    for floor in THRESHOLDS:
        hits = linker.span_hits(documents, floor, MAX_HITS_PER_DOCUMENT * max(len(documents), 1))
        if hits is not None:
            break
    else:
        hits, floor = [], THRESHOLDS[-1]
    best = (-1.0, -weights[0], floor)  # max of (F1, -w, γ): a tie in F1 goes to the smaller w, then the higher γ
    for weight in weights:
        proposals = linker.ranked(hits, len(documents), weight)
        for threshold in (t for t in THRESHOLDS if t >= floor):
            predicted = [(d.id, p.start, p.end, p.candidates[0].concept_id) for d, found in zip(documents, proposals)
                         for p in resolve_overlaps([p for p in found if p.score > threshold], "best")]
            best = max(best, (span_scores(predicted, gold)["strict"]["f1"], -weight, threshold))
    return best[0], best[2], -best[1]
