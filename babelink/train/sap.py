"""Self-alignment pretraining (SAP) of the entity encoder (003 §2, App. A.3; 001 §2).

Mini-batches are drawn from the positive-pair list (so every batch holds synonyms), encoded as
inference encodes (`EncoderSettings`: pooling, prefix, max length), and trained with online
hard-triplet mining + the Multi-Similarity loss (`babelink.train.losses`). AdamW with weight
decay, linear warm-up and decay, gradient clipping; optionally frozen word embeddings (the
largest matrix of a multilingual model: freezing it makes CPU training affordable and keeps the
vocabulary's cross-lingual alignment), or low-rank adapters only (`lora_rank`: a shippable file,
the embeddings frozen). bf16 autocast on CPUs that compute it natively, fp16 AMP
on GPU.

Training is deterministic for a seed and resumable: `out/resume/` holds the model, optimiser,
scheduler, RNG states and the position in the data, replaced atomically every
`checkpoint_every` steps, so a resumed run continues bit-identically. The trained encoder is
written to `out/` as a standard transformers checkpoint with its `babelink_encoder.json`, which
`babelink build --encoder out/` loads directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from babelink.checkpoint import write_settings
from babelink.encoders.transformer import SETTINGS_FILE, EncoderSettings, TransformerEncoder
from babelink.errors import BabelinkError
from babelink.train.lora import LORA_FILE, load_lora_tensors, lora_tensors, merged_state, with_lora
from babelink.train.losses import hard_pairs, multi_similarity_loss
from babelink.train.optim import adamw_with_linear_schedule
from babelink.train.pairs import PositivePair
from babelink.train.resume import RESUME_DIR, STATE_FILE, ScaledTrainer, TrainingState, seed_everything

CONFIG_FILE = "sap_config.json"


@dataclass(frozen=True)
class SapConfig:
    """Defaults: 003 App. A.3 (optimiser, learning rate, weight decay) and 001 Tab. 9 (λ, α, β), but ε.

    ε = 0.5, not the seed's 1: the bundled e5 puts unrelated names at cosines of 0.75–0.9, where
    the negative term `exp(β (S − 1))` (β = 50) is nearly zero and training only pulls synonyms
    together. On the CPU at the same budget ε = 1 lowered the training job's dev score from 0.797 to
    0.776, ε = 0.5 raised it to 0.812 (benchmarks/log/notes.md, 2026-11-29)."""

    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    batch_pairs: int = 128  # positive pairs per batch: 2 × this many names
    margin: float = 0.2  # λ of the mining condition
    alpha: float = 2.0
    beta: float = 50.0
    epsilon: float = 0.5
    epochs: int = 1
    max_steps: int | None = None
    max_minutes: float | None = None
    warmup_ratio: float = 0.05
    grad_clip: float = 1.0
    freeze_embeddings: bool = False
    lora_rank: int = 0  # > 0: train low-rank adapters of every linear layer only (`train.lora`), a small file
    seed: int = 0
    checkpoint_every: int = 200


class SapTrainer(ScaledTrainer):
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
        self.items, self.batch_size = list(pairs), config.batch_pairs
        self.labels = {label: index for index, label in enumerate(dict.fromkeys(p.label for p in self.items))}
        resume = self.out / RESUME_DIR
        resuming = (resume / STATE_FILE).is_file()
        # adapters resume on the base they adapt; a full fine-tuning resumes from its own weights
        start_from = resume if resuming and not config.lora_rank else Path(init)
        self.encoder = TransformerEncoder(start_from, settings, device=device)
        self.tokenizer = self.encoder.tokenizer
        seed_everything(config.seed)
        if config.lora_rank:
            self.encoder.model = with_lora(self.encoder.model, config.lora_rank)
            if resuming:
                load_lora_tensors(self.encoder.model, load_file(str(resume / LORA_FILE)))
        elif config.freeze_embeddings:
            self.encoder.model.get_input_embeddings().weight.requires_grad_(False)
        self.model = self.encoder.model
        self.optimizer, self.scheduler = adamw_with_linear_schedule(
            self.model, config.learning_rate, config.weight_decay, self.total_steps, config.warmup_ratio)
        # fp16 autocast (GPU) needs loss scaling; bf16 (CPU) and fp32 do not
        self.scaler = torch.amp.GradScaler(self.encoder.device.type, enabled=self.encoder.precision == "float16")
        self.state = TrainingState()
        self._evaluate_with: Callable[[TransformerEncoder], float] | None = None
        if resuming:
            self.load_resume_point(resume)

    @property
    def batches_per_epoch(self) -> int:
        return max(1, len(self.items) // self.config.batch_pairs)

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
        self._evaluate_with = evaluate
        if evaluate and self.state.step == 0:  # the starting point's score: the baseline every later step must beat
            self.evaluate(self.model)
        return self.run(self.model, progress, evaluate is not None, eval_every)

    def evaluation(self) -> tuple:
        return (float(self._evaluate_with(self.encoder)),)

    def save_model(self, directory: Path, evaluation: tuple | None) -> None:
        """A checkpoint `build --encoder` loads; with LoRA, the adapters merged in and also kept
        apart in `LORA_FILE` (what an artefact ships, and what a resumed run restores)."""
        if self.config.lora_rank:
            self.model.get_base_model().config.save_pretrained(directory)
            save_file(merged_state(self.model), str(directory / "model.safetensors"), metadata={"format": "pt"})
            save_file(lora_tensors(self.model), str(directory / LORA_FILE))
        else:
            self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        settings = replace(self.encoder.settings, precision="auto")
        write_settings(directory, SETTINGS_FILE, settings)
        write_settings(directory, CONFIG_FILE, {**asdict(self.config), "steps": self.state.step,
                                                "evaluations": self.state.evaluations})

    def data_identity(self) -> dict[str, int]:
        return {"pairs": len(self.items), "labels": len(self.labels)}
