"""A shallower student distilled from a trained entity encoder, for speed on a CPU.

An encoder's cost is its layers: e5-small spends 12 of them on a five-token name. The student
keeps a few of the teacher's layers, evenly spaced from the first to the last (so it starts as a
coarse copy of the whole network rather than of its bottom), and learns to put every name where
the teacher puts it: `1 − cos(student, teacher)` plus an in-batch contrastive term (each name's
student vector must be nearer its own teacher vector than any other name's in the batch), so
nearest neighbours, not only directions, carry over. The word embeddings stay the teacher's and
frozen, which keeps the student small to ship (`encoders.artefacts`) and its vocabulary whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from babelink.checkpoint import write_settings
from babelink.encoders.transformer import SETTINGS_FILE, EncoderSettings, TransformerEncoder
from babelink.errors import BabelinkError
from babelink.train.optim import adamw_with_linear_schedule
from babelink.train.resume import RESUME_DIR, STATE_FILE, ScaledTrainer, TrainingState, seed_everything

CONFIG_FILE = "student_config.json"


@dataclass(frozen=True)
class StudentConfig:
    layers: int = 3
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 512  # names per step: the in-batch contrastive term wants many
    scale: float = 20.0  # contrastive logits: scale × cosine
    epochs: int = 1
    max_steps: int | None = None
    max_minutes: float | None = None
    warmup_ratio: float = 0.05
    grad_clip: float = 1.0
    seed: int = 0
    checkpoint_every: int = 1000


def kept_layers(total: int, keep: int) -> list[int]:
    """`keep` layer indexes of `total`, evenly spaced, first and last included."""
    if not 1 <= keep <= total:
        raise BabelinkError(f"a student keeps 1 to {total} layers of its teacher, not {keep}")
    if keep == 1:
        return [total - 1]
    return sorted({round(index * (total - 1) / (keep - 1)) for index in range(keep)})


class StudentTrainer(ScaledTrainer):
    def __init__(self, teacher: str | Path, names: Sequence[str], out: str | Path,
                 config: StudentConfig = StudentConfig(), device: str | None = None,
                 settings: EncoderSettings | None = None):
        """`settings`: how the teacher encodes (None: its checkpoint's own; the bundled e5 has none)."""
        if not names:
            raise BabelinkError("no names to distil on")
        self.config, self.out = config, Path(out)
        self.items, self.batch_size = list(dict.fromkeys(names)), config.batch_size
        self.teacher = TransformerEncoder(teacher, settings, device=device)
        self.teacher.model.requires_grad_(False)
        resume = self.out / RESUME_DIR
        resuming = (resume / STATE_FILE).is_file()
        self.student = TransformerEncoder(resume if resuming else teacher, self.teacher.settings, device=device)
        if not resuming:
            _keep_layers(self.student.model, kept_layers(self.student.model.config.num_hidden_layers, config.layers))
        self.model = self.student.model
        self.model.get_input_embeddings().weight.requires_grad_(False)
        seed_everything(config.seed)
        self.optimizer, self.scheduler = adamw_with_linear_schedule(
            self.model, config.learning_rate, config.weight_decay, self.total_steps, config.warmup_ratio)
        self.scaler = torch.amp.GradScaler(self.student.device.type, enabled=self.student.precision == "float16")
        self.state = TrainingState()
        if resuming:
            self.load_resume_point(resume)

    def loss(self, names: Sequence[str]) -> torch.Tensor:
        with torch.no_grad():
            target = self.teacher.embed(names)
        vectors = self.student.embed(names)
        agreement = (vectors * target).sum(dim=1)
        logits = self.config.scale * vectors @ target.T
        labels = torch.arange(len(names), device=logits.device)
        return (1 - agreement).mean() + torch.nn.functional.cross_entropy(logits, labels)

    def train(self, progress: Callable[[TrainingState, float], None] | None = None) -> Path:
        """Train until the epochs, `max_steps` or `max_minutes` run out; returns `out`."""
        return self.run(self.model, progress)

    def save_model(self, directory: Path, evaluation: tuple | None) -> None:
        self.model.save_pretrained(directory)
        self.student.tokenizer.save_pretrained(directory)
        write_settings(directory, SETTINGS_FILE, replace(self.teacher.settings, precision="auto"))
        write_settings(directory, CONFIG_FILE, {**asdict(self.config), "steps": self.state.step,
                                                "teacher": str(self.teacher.path)})

    def data_identity(self) -> dict[str, int]:
        return {"names": len(self.items)}


def _keep_layers(model: torch.nn.Module, layers: list[int]) -> None:
    model.encoder.layer = torch.nn.ModuleList(model.encoder.layer[index] for index in layers)
    model.config.num_hidden_layers = len(layers)
