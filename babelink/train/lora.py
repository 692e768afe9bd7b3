"""Low-rank adapters (LoRA, through peft) for training the entity encoder into a file small
enough to ship: rank 16 on every linear layer of e5-small is 1.3M values (5 MB) against the
base's 118M. The word embeddings stay frozen, so an adapter trained on a vocabulary-pruned base
applies unchanged to the full one.

Adapters leave here as plain tensors, `<module>.lora_A` (rank × in) and `<module>.lora_B`
(out × rank, scale folded in), so applying one (`encoders.artefacts.merge_lora`) needs no peft.
"""

from __future__ import annotations

import copy

import torch

from babelink.encoders.artefacts import LORA_A, LORA_B, merge_lora
from babelink.errors import BabelinkError

#: The adapters beside a trained checkpoint's merged weights: what an artefact ships, what a resumed run restores.
LORA_FILE = "lora_adapters.safetensors"

#: Every linear layer of a BERT-style encoder's layers: attention projections and both feed-forward
#: layers; not the pooler a checkpoint may carry, which nothing of babelink reads.
TARGET_MODULES = r"encoder\.layer\.\d+\..*\.(query|key|value|dense)"


def with_lora(model: torch.nn.Module, rank: int, alpha: float | None = None):
    """`model` wrapped with fresh adapters (B = 0: the wrapped model computes what `model` did);
    only the adapters train. `alpha` defaults to twice the rank."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise BabelinkError("LoRA training needs peft, a dependency of babelink: reinstall babelink") from None
    config = LoraConfig(r=rank, lora_alpha=alpha or 2 * rank, target_modules=TARGET_MODULES, lora_dropout=0.0,
                        bias="none")
    return get_peft_model(model, config)


def _adapted_layers(peft_model):
    """(module name in the base model, LoRA layer) of every adapted linear layer."""
    prefix = "base_model.model."
    for name, module in peft_model.named_modules():
        if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
            yield name.removeprefix(prefix), module


def lora_tensors(peft_model) -> dict[str, torch.Tensor]:
    """The adapters as plain float32 tensors, scale folded into B."""
    tensors = {}
    for name, layer in _adapted_layers(peft_model):
        tensors[name + LORA_A] = layer.lora_A["default"].weight.detach().float().cpu().contiguous()
        tensors[name + LORA_B] = (layer.lora_B["default"].weight.detach().float() * layer.scaling["default"]
                                  ).cpu().contiguous()
    return tensors


def load_lora_tensors(peft_model, tensors: dict[str, torch.Tensor]) -> None:
    """Set the adapters from `lora_tensors` output (resuming a run)."""
    layers = dict(_adapted_layers(peft_model))
    if {name + suffix for name in layers for suffix in (LORA_A, LORA_B)} != set(tensors):
        raise BabelinkError("the saved adapters do not match this model's layers; resume with the same --lora-rank")
    with torch.no_grad():
        for name, layer in layers.items():
            layer.lora_A["default"].weight.copy_(tensors[name + LORA_A])
            layer.lora_B["default"].weight.copy_(tensors[name + LORA_B] / layer.scaling["default"])


def merged_encoder(peft_model) -> torch.nn.Module:
    """A plain copy of the adapted model with its adapters merged in (what `save_pretrained` writes as a checkpoint)."""
    return copy.deepcopy(peft_model).merge_and_unload()


def merged_state(peft_model) -> dict[str, torch.Tensor]:
    """The base model's float32 state dict with the adapters merged in, under the base's own names."""
    state = {name.replace(".base_layer", ""): tensor.detach().float().cpu().contiguous()
             for name, tensor in peft_model.get_base_model().state_dict().items() if "lora_" not in name}
    merge_lora(state, lora_tensors(peft_model))
    return state
