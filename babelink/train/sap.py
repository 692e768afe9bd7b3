"""Self-alignment pretraining (SAP) of the entity encoder (003 §2, App. A.3; 001 §2).

Mini-batches are drawn from the positive-pair list (so every batch holds synonyms), encoded as
inference encodes (`EncoderSettings`: pooling, prefix, max length), and trained with online
hard-triplet mining + the Multi-Similarity loss (`babelink.train.losses`). AdamW with weight
decay, linear warm-up and decay, gradient clipping; optionally frozen word embeddings (the
largest matrix of a multilingual model: freezing it makes CPU training affordable and keeps the
vocabulary's cross-lingual alignment). bf16 autocast on CPUs that compute it natively, fp16 AMP
on GPU.

Training is deterministic for a seed and resumable: `out/resume/` holds the model, optimiser,
scheduler, RNG states and the position in the data, replaced atomically every
`checkpoint_every` steps, so a resumed run continues bit-identically. The trained encoder is
written to `out/` as a standard transformers checkpoint with its `babelink_encoder.json`, which
`babelink build --encoder out/` loads directly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from babelink.checkpoint import write_settings
from babelink.encoders.transformer import SETTINGS_FILE, EncoderSettings, TransformerEncoder
from babelink.errors import BabelinkError
from babelink.fsutil import write_directory
from babelink.train.losses import hard_pairs, multi_similarity_loss
from babelink.train.optim import adamw_with_linear_schedule
from babelink.train.pairs import PositivePair
from babelink.train.resume import copy_files, rng_states, set_rng_states, write_files

RESUME_DIR = "resume"
BEST_DIR = "best"
STATE_FILE = "trainer_state.pt"
CONFIG_FILE = "sap_config.json"


@dataclass(frozen=True)
class SapConfig:
    """Defaults: 003 App. A.3 (optimiser, learning rate, weight decay) and 001 Tab. 9 (λ, α, β, ε)."""

    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    batch_pairs: int = 128  # positive pairs per batch: 2 × this many names
    margin: float = 0.2  # λ of the mining condition
    alpha: float = 2.0
    beta: float = 50.0
    epsilon: float = 1.0
    epochs: int = 1
    max_steps: int | None = None
    max_minutes: float | None = None
    warmup_ratio: float = 0.05
    grad_clip: float = 1.0
    freeze_embeddings: bool = False
    seed: int = 0
    checkpoint_every: int = 200


@dataclass
class TrainingState:
    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of the current epoch already used
    loss_history: list[float] | None = None
    evaluations: list[tuple[int, float]] | None = None  # (step, dev score)


class SapTrainer:
    def __init__(
        self,
        init: str | Path,
        pairs: Sequence[PositivePair],
        out: str | Path,
        config: SapConfig = SapConfig(),
        settings: EncoderSettings | None = None,
        device: str | None = None,
    ):
        if not pairs:
            raise BabelinkError("no positive pairs to train on")
        self.config = config
        self.out = Path(out)
        self.pairs = list(pairs)
        self.labels = {label: index for index, label in enumerate(dict.fromkeys(p.label for p in self.pairs))}
        resume = self.out / RESUME_DIR
        start_from = resume if (resume / STATE_FILE).is_file() else Path(init)
        self.encoder = TransformerEncoder(start_from, settings, device=device)
        self.model, self.tokenizer = self.encoder.model, self.encoder.tokenizer
        self._seed_everything(config.seed)
        if config.freeze_embeddings:
            self.model.get_input_embeddings().weight.requires_grad_(False)
        self.optimizer, self.scheduler = adamw_with_linear_schedule(
            self.model, config.learning_rate, config.weight_decay, self.total_steps, config.warmup_ratio)
        # fp16 autocast (GPU) needs loss scaling; bf16 (CPU) and fp32 do not
        self.scaler = torch.amp.GradScaler(self.encoder.device.type, enabled=self.encoder.precision == "float16")
        self.state = TrainingState(loss_history=[], evaluations=[])
        if start_from == resume:
            self._load_state(resume)

    @property
    def batches_per_epoch(self) -> int:
        return max(1, len(self.pairs) // self.config.batch_pairs)

    @property
    def total_steps(self) -> int:
        steps = self.config.epochs * self.batches_per_epoch
        return min(steps, self.config.max_steps) if self.config.max_steps else steps

    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        """The pair order of an epoch depends only on the seed and the epoch: resumable."""
        return np.random.default_rng([self.config.seed, epoch]).permutation(len(self.pairs))

    def loss(self, batch: Sequence[PositivePair]) -> torch.Tensor:
        names = [p.first for p in batch] + [p.second for p in batch]
        labels = torch.tensor([self.labels[p.label] for p in batch] * 2, device=self.encoder.device)
        vectors = self.encoder.embed(names)
        similarity = vectors @ vectors.T
        positives, negatives = hard_pairs(similarity.detach(), labels, self.config.margin)
        return multi_similarity_loss(similarity, positives, negatives, self.config.alpha, self.config.beta,
                                     self.config.epsilon)

    def train(
        self,
        progress: Callable[[TrainingState, float], None] | None = None,
        evaluate: Callable[[TransformerEncoder], float] | None = None,
        eval_every: int | None = None,
    ) -> Path:
        """Train until the epochs, `max_steps` or `max_minutes` run out; returns `out`.

        With `evaluate` (encoder → dev score, higher is better), the encoder is scored before the
        first step, every `eval_every` steps and at the end, and `out/` receives the best-scoring
        weights (the starting checkpoint's, when training never beat it).
        """
        config, state = self.config, self.state
        started = time.monotonic()
        if evaluate and state.step == 0:  # the starting point's score: the baseline every later step must beat
            self._evaluate(evaluate)
        self.model.train()
        while state.step < self.total_steps:
            order = self._epoch_order(state.epoch)
            while state.position < self.batches_per_epoch and state.step < self.total_steps:
                start = state.position * config.batch_pairs
                batch = [self.pairs[i] for i in order[start : start + config.batch_pairs]]
                loss = self.loss(batch)
                self.optimizer.zero_grad(set_to_none=True)
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.scheduler.step()
                state.step += 1
                state.position += 1
                state.loss_history.append(float(loss.detach()))
                if progress:
                    progress(state, time.monotonic() - started)
                if evaluate and eval_every and state.step % eval_every == 0:
                    self._evaluate(evaluate)
                if state.step % config.checkpoint_every == 0:
                    self.save_resume_point()
                if config.max_minutes is not None and time.monotonic() - started > 60 * config.max_minutes:
                    return self._finish(evaluate)
            if state.position >= self.batches_per_epoch:
                state.epoch, state.position = state.epoch + 1, 0
        return self._finish(evaluate)

    def _evaluate(self, evaluate: Callable[[TransformerEncoder], float]) -> None:
        self.model.eval()
        score = float(evaluate(self.encoder))
        self.model.train()
        best = max((s for _, s in self.state.evaluations), default=float("-inf"))
        self.state.evaluations.append((self.state.step, score))
        if score > best:
            self.out.mkdir(parents=True, exist_ok=True)
            write_directory(self.out / BEST_DIR, self._save_encoder)

    def _finish(self, evaluate: Callable[[TransformerEncoder], float] | None) -> Path:
        if evaluate and (not self.state.evaluations or self.state.evaluations[-1][0] != self.state.step):
            self._evaluate(evaluate)
        self.save_resume_point()
        self.model.eval()
        if self.state.evaluations:
            write_files(self.out, lambda staging: copy_files(self.out / BEST_DIR, staging))
        else:
            write_files(self.out, self._save_encoder)
        return self.out

    def _save_encoder(self, directory: Path) -> None:
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        settings = replace(self.encoder.settings, precision="auto")
        write_settings(directory, SETTINGS_FILE, settings)
        write_settings(directory, CONFIG_FILE, {**asdict(self.config), "steps": self.state.step,
                                                "evaluations": self.state.evaluations})

    def save_resume_point(self) -> None:
        def save(directory: Path) -> None:
            self._save_encoder(directory)
            torch.save(
                {
                    "state": asdict(self.state),
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "scaler": self.scaler.state_dict(),
                    "rng": rng_states(),
                    "labels": len(self.labels),
                    "pairs": len(self.pairs),
                },
                directory / STATE_FILE,
            )

        self.out.mkdir(parents=True, exist_ok=True)
        write_directory(self.out / RESUME_DIR, save)

    def _load_state(self, directory: Path) -> None:
        saved = torch.load(directory / STATE_FILE, weights_only=False)
        if (saved["pairs"], saved["labels"]) != (len(self.pairs), len(self.labels)):
            raise BabelinkError(
                f"{directory}: was trained on {saved['pairs']:,} pairs, this run has {len(self.pairs):,}; "
                "resume with the same data or use a new --out"
            )
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        self.scaler.load_state_dict(saved["scaler"])
        self.state = TrainingState(**saved["state"])
        set_rng_states(saved["rng"])
