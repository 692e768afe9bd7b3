"""What the trainers share: AdamW without decay on biases and LayerNorm, linear warm-up then
linear decay to zero (003 App. A.3; 000 Tab. 9 for the filter), and the epoch loop of the
supervised trainers (contextual filter, NER)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from babelink.batching import batched


def adamw_with_linear_schedule(model: torch.nn.Module, learning_rate: float, weight_decay: float, total_steps: int,
                               warmup_ratio: float, learning_rate_of: Callable[[str], float] | None = None
                               ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """`learning_rate_of(parameter name)`, when given, sets per-parameter rates (a freshly
    initialised head learns faster than the pretrained encoder under it)."""
    groups: dict[tuple[float, float], list[torch.nn.Parameter]] = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            rate = learning_rate_of(name) if learning_rate_of else learning_rate
            groups.setdefault((rate, 0.0 if _no_decay(name) else weight_decay), []).append(parameter)
    optimizer = torch.optim.AdamW([{"params": params, "lr": rate, "weight_decay": decay}
                                   for (rate, decay), params in groups.items()], lr=learning_rate)
    warmup = int(warmup_ratio * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / max(1, warmup), max(0.0, (total_steps - step) / max(1, total_steps - warmup))))
    return optimizer, scheduler


def _no_decay(name: str) -> bool:
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def train_epochs(model: torch.nn.Module, items: Sequence, loss_of: Callable[[list], torch.Tensor], config,
                 progress: Callable[[int, int, float], None] | None = None,
                 learning_rate_of: Callable[[str], float] | None = None) -> None:
    """Minimise `loss_of(batch)` over `config.epochs` seeded shuffles of `items`, stopping early
    after `config.max_minutes`; `config` has the fields the filter and NER configs share.
    Gradients are clipped to norm 1; `progress(step, total, loss)` follows every step."""
    total = config.epochs * -(-len(items) // config.batch_size)
    optimizer, scheduler = adamw_with_linear_schedule(model, config.learning_rate, config.weight_decay, total,
                                                      config.warmup_ratio, learning_rate_of)
    started, step = time.monotonic(), 0
    model.train()
    try:
        for epoch in range(config.epochs):
            order = np.random.default_rng([config.seed, epoch]).permutation(len(items))
            for batch in batched([items[i] for i in order], config.batch_size):
                loss = loss_of(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                step += 1
                if progress:
                    progress(step, total, float(loss.detach()))
                if config.max_minutes is not None and time.monotonic() - started > 60 * config.max_minutes:
                    return
    finally:
        model.eval()
