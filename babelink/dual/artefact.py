"""One-pass models shipped as `dual` artefacts (`encoders.artefacts`): the GPU job's adapters and
head, applied to the bundled e5 on first use, bound to the packaged encoder whose name vectors
they were trained against.

That encoder is named, not fingerprinted, in the artefact: the job trained it on a vocabulary-
pruned base whose checkpoint fingerprint no user has. Applied here, the model records the
fingerprint of that encoder as applied here, which is what a bundle built with `--encoder NAME`
records too, so `DualModel.check_bundle` compares like with like.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from babelink.dual.model import HEAD_FILE, SETTINGS_FILE, DualSettings
from babelink.encoders import artefacts, resolve_checkpoint
from babelink.encoders.artefacts import DUAL_HEAD, packaged_checkpoint, read_manifest
from babelink.encoders.transformer import checkpoint_fingerprint
from babelink.errors import BabelinkError


def model_path(model: str | Path) -> Path:
    """A one-pass model directory, or the name of a packaged `dual` artefact (applied on first use)."""
    available = artefacts.packaged()
    if Path(model).is_dir() or str(model) not in available:
        if not Path(model).exists():
            known = ", ".join(name for name, file in available.items() if read_manifest(file)["kind"] == "dual")
            raise BabelinkError(f"{model}: no such model directory, nor a packaged one-pass model of that name "
                                f"(packaged: {known or 'none in this installation'}); "
                                "train one with `babelink train dual`")
        return Path(model)
    manifest = read_manifest(available[str(model)])
    if manifest["kind"] != "dual":
        raise BabelinkError(f"{model}: a packaged {manifest['kind']} encoder, not a one-pass model; "
                            f"build a bundle with --encoder {model} instead")
    entity = manifest["entity_encoder"]
    identity = {**manifest["dual"]["entity_encoder"], "name": entity,
                "fingerprint": checkpoint_fingerprint(packaged_checkpoint(entity))}
    return packaged_checkpoint(str(model),
                               lambda staging, found, tensors: write_head(staging, found, tensors, identity))


def dual_init(init: str | Path) -> Path:
    """What `train dual --init` starts from: a packaged one-pass model with its span scorer
    (`model_path`), else the checkpoint `encoders.resolve_checkpoint` names."""
    available = artefacts.packaged()
    if not Path(init).is_dir() and str(init) in available and read_manifest(available[str(init)])["kind"] == "dual":
        return model_path(init)
    return resolve_checkpoint(init)[0]


def write_head(directory: Path, manifest: dict, tensors: dict, entity_encoder: dict) -> None:
    """Write a `dual` artefact's head and settings beside its applied encoder: a `DualModel` directory."""
    from safetensors.torch import save_file

    save_file({name.removeprefix(DUAL_HEAD): tensor.contiguous() for name, tensor in tensors.items()
               if name.startswith(DUAL_HEAD)}, str(directory / HEAD_FILE))
    settings = DualSettings(**{**manifest["dual"], "entity_encoder": entity_encoder})
    (directory / SETTINGS_FILE).write_text(json.dumps(asdict(settings), indent=2))
