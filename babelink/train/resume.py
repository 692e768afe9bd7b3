"""What resumable trainers share (SAP, the dual encoder): seeded epoch orders and a position within
the epoch, every RNG's state, resume points in `out/resume/` replaced atomically, and the
checkpoint with the best dev score copied to `out/`.

A resumed run continues bit-identically: the data order depends only on the seed and the epoch,
and the model, optimiser, scheduler, RNG states and position are saved together.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from babelink.errors import BabelinkError
from babelink.fsutil import staging_directory, write_directory

RESUME_DIR = "resume"
BEST_DIR = "best"
STATE_FILE = "trainer_state.pt"


@dataclass
class TrainingState:
    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of the current epoch already used
    loss_history: list[float] = field(default_factory=list)
    evaluations: list[tuple] = field(default_factory=list)  # (step, dev score, …): higher is better
    seconds: float = 0.0  # training time so far, across resumes


class ResumableTrainer:
    """The training loop. A subclass sets `config` (with `epochs`, `max_steps`, `max_minutes`,
    `checkpoint_every`, `seed`), `out`, `items` and `batch_size`, and implements `optimise` (one
    step on a batch, returning its loss), `save_model`, `evaluation` (when it evaluates) and the
    resume hooks `extra_state`, `restore_extra_state` and `data_identity`."""

    config: object
    out: Path
    items: Sequence
    batch_size: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    state: TrainingState

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.items) // self.batch_size)

    @property
    def total_steps(self) -> int:
        steps = self.config.epochs * self.batches_per_epoch
        return min(steps, self.config.max_steps) if self.config.max_steps else steps

    def optimise(self, batch: list) -> float:
        raise NotImplementedError

    def save_model(self, directory: Path, evaluation: tuple | None) -> None:
        """Write the model as `out/` holds it; `evaluation` is the dev result it was chosen by."""
        raise NotImplementedError

    def evaluation(self) -> tuple:
        """The dev result of the model as it is now: (score, …), higher is better."""
        raise NotImplementedError

    def extra_state(self) -> dict:
        return {}

    def restore_extra_state(self, saved: dict) -> None:
        pass

    def data_identity(self) -> dict[str, int]:
        """Counts a resumed run's data must match, by name."""
        return {"items": len(self.items)}

    def run(self, model: torch.nn.Module, progress: Callable[[TrainingState, float], None] | None = None,
            evaluating: bool = False, eval_every: int | None = None) -> Path:
        """Train `model` until the epochs, `max_steps` or `max_minutes` run out; with `evaluating`,
        every `eval_every` steps and at the end the dev result decides what `out/` receives."""
        config, state = self.config, self.state
        started, resumed_at = time.monotonic(), state.seconds
        model.train()
        while state.step < self.total_steps:
            order = np.random.default_rng([config.seed, state.epoch]).permutation(len(self.items))
            while state.position < self.batches_per_epoch and state.step < self.total_steps:
                start = state.position * self.batch_size
                state.loss_history.append(self.optimise([self.items[i] for i in order[start: start + self.batch_size]]))
                state.step += 1
                state.position += 1
                state.seconds = resumed_at + time.monotonic() - started
                if progress:
                    progress(state, time.monotonic() - started)
                if evaluating and eval_every and state.step % eval_every == 0:
                    self.evaluate(model)
                if state.step % config.checkpoint_every == 0:
                    self.save_resume_point()
                if config.max_minutes is not None and time.monotonic() - started > 60 * config.max_minutes:
                    return self._finish(model, evaluating)
            if state.position >= self.batches_per_epoch:
                state.epoch, state.position = state.epoch + 1, 0
        return self._finish(model, evaluating)

    def evaluate(self, model: torch.nn.Module) -> None:
        """Score the model on dev; when it beats every earlier score, keep it in `out/best/`."""
        model.eval()
        result = tuple(self.evaluation())
        model.train()
        best = max((evaluation[1] for evaluation in self.state.evaluations), default=float("-inf"))
        self.state.evaluations.append((self.state.step, *result))
        if result[0] > best:
            self.out.mkdir(parents=True, exist_ok=True)
            write_directory(self.out / BEST_DIR, lambda staging: self.save_model(staging, result))

    def _finish(self, model: torch.nn.Module, evaluating: bool) -> Path:
        if evaluating and (not self.state.evaluations or self.state.evaluations[-1][0] != self.state.step):
            self.evaluate(model)
        self.save_resume_point()
        model.eval()
        if self.state.evaluations:
            write_files(self.out, lambda staging: copy_files(self.out / BEST_DIR, staging))
        else:
            write_files(self.out, lambda staging: self.save_model(staging, None))
        return self.out

    def save_resume_point(self) -> None:
        def save(directory: Path) -> None:
            self.save_model(directory, None)
            torch.save({"state": asdict(self.state), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "rng": rng_states(), "data": self.data_identity(),
                        **self.extra_state()}, directory / STATE_FILE)

        self.out.mkdir(parents=True, exist_ok=True)
        write_directory(self.out / RESUME_DIR, save)

    def load_resume_point(self, directory: Path) -> None:
        saved = torch.load(directory / STATE_FILE, weights_only=False)
        if saved["data"] != self.data_identity():
            was = ", ".join(f"{count:,} {name}" for name, count in saved["data"].items())
            now = ", ".join(f"{count:,} {name}" for name, count in self.data_identity().items())
            raise BabelinkError(f"{directory}: was trained on {was}, this run has {now}; "
                                "resume with the same data or use a new --out")
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        self.restore_extra_state(saved)
        self.state = TrainingState(**saved["state"])
        set_rng_states(saved["rng"])


class ScaledTrainer(ResumableTrainer):
    """A trainer whose step minimises `loss(batch)` through a gradient scaler (fp16 autocast on a
    GPU needs loss scaling; bf16 and fp32 run it disabled), clipped to `config.grad_clip`; the
    scaler's state is part of the resume point. A subclass sets `model` and `scaler`."""

    model: torch.nn.Module
    scaler: torch.amp.GradScaler

    def loss(self, batch: list) -> torch.Tensor:
        raise NotImplementedError

    def optimise(self, batch: list) -> float:
        loss = self.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return float(loss.detach())

    def extra_state(self) -> dict:
        return {"scaler": self.scaler.state_dict()}

    def restore_extra_state(self, saved: dict) -> None:
        self.scaler.load_state_dict(saved["scaler"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_states() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def copy_files(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        shutil.copy2(entry, target / entry.name)


def write_files(target: Path, write: Callable[[Path], None]) -> None:
    """Write into a temporary sibling, then move each file into `target` (each rename atomic;
    the `resume/` directory beside them is left alone)."""
    staging = staging_directory(target)
    try:
        write(staging)
        for entry in staging.iterdir():
            os.replace(entry, target / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
