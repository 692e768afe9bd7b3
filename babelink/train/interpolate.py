"""Weight-space interpolation of a fine-tuned encoder with the checkpoint it started from.

θ = (1 − w)·θ_init + w·θ_trained (WiSE-FT, Wortsman et al., CVPR 2022). Self-alignment
pretraining on KB synonyms (003 §2) teaches the encoder the KB's naming and, over thousands of
steps, wears away some of what the pretrained model knew about everyday phrasing: after 3,000
all_syn steps XL-BEL English (Wikipedia anchors) lost 1.1 points Acc@1 while the other
languages gained 4–9 (BENCHMARKS.md). Interpolating keeps most of the gain and returns the rest;
`w` is chosen on dev data (benchmarks/log/tuning.md).

The output directory is the trained checkpoint's (tokenizer, config, encoder settings, training
record) with the mixed weights, written atomically, plus `interpolation.json` saying how it was
made. Both checkpoints must have the same parameters, name for name and shape for shape.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from babelink.checkpoint import write_settings
from babelink.errors import BabelinkError
from babelink.fsutil import write_directory

RECORD_FILE = "interpolation.json"
WEIGHTS_FILE = "model.safetensors"


def interpolate_checkpoints(init: Path, trained: Path, weight: float, out: Path) -> Path:
    """Write the interpolated checkpoint to `out` and return it; `weight` is the trained share."""
    if not 0.0 <= weight <= 1.0:
        raise BabelinkError(f"--weight must be between 0 and 1, got {weight}")
    mixed = interpolated_state(_weights(init), _weights(trained), weight, f"{init} and {trained}")

    def write(staging: Path) -> None:
        for item in Path(trained).iterdir():
            if (
                item.is_file()
                and not item.name.endswith(".safetensors")
                and not item.name.endswith(".safetensors.index.json")
            ):
                shutil.copy2(item, staging / item.name)
        save_file({name: value.contiguous() for name, value in mixed.items()}, staging / WEIGHTS_FILE, {"format": "pt"})
        record = {"init": str(Path(init).absolute()), "trained": str(Path(trained).absolute()), "weight": weight}
        write_settings(staging, RECORD_FILE, record)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_directory(out, write)
    return out


def interpolated_state(start: dict[str, torch.Tensor], end: dict[str, torch.Tensor], weight: float,
                       names: str) -> dict[str, torch.Tensor]:
    """(1 − weight)·start + weight·end for floating-point tensors; others (position ids) from `end`."""
    if start.keys() != end.keys():
        differing = sorted(start.keys() ^ end.keys())
        raise BabelinkError(f"{names}: not the same architecture (parameter {differing[0]!r} is in only one)")
    mixed = {}
    for name, value in end.items():
        if start[name].shape != value.shape:
            raise BabelinkError(f"{names}: parameter {name!r} has shape {tuple(start[name].shape)} in one "
                                f"and {tuple(value.shape)} in the other")
        mixed[name] = torch.lerp(start[name].to(value.dtype), value, weight) if value.is_floating_point() else value
    return mixed


def _weights(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint's safetensors files (one file or shards)."""
    files = sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else []
    if not files:
        raise BabelinkError(f"{path}: not a checkpoint directory with safetensors weights")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            tensors.update(load_file(file))
        except (OSError, SafetensorError) as error:
            raise BabelinkError(f"{file}: cannot read the weights: {error}") from None
    return tensors
