"""The optimiser both trainers use: AdamW without decay on biases and LayerNorm, linear
warm-up then linear decay to zero (003 App. A.3; 000 Tab. 9 for the filter)."""

from __future__ import annotations

import torch


def adamw_with_linear_schedule(model: torch.nn.Module, learning_rate: float, weight_decay: float, total_steps: int,
                               warmup_ratio: float) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    trained = [(name, parameter) for name, parameter in model.named_parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in trained if not _no_decay(n)], "weight_decay": weight_decay},
         {"params": [p for n, p in trained if _no_decay(n)], "weight_decay": 0.0}], lr=learning_rate)
    warmup = int(warmup_ratio * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / max(1, warmup), max(0.0, (total_steps - step) / max(1, total_steps - warmup))))
    return optimizer, scheduler


def _no_decay(name: str) -> bool:
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name
