"""Trained encoders as artefacts: one safetensors file of at most 16 MiB holding what training
changed, with its manifest (data and licences, steps, seconds, device, commit, base fingerprint)
in the file's metadata.

Three kinds, each applied to the base it was trained from:
- `lora`: low-rank adapters of every linear layer (`<module>.lora_A`, `<module>.lora_B` with the
  scale folded in); the base's weights plus `B @ A`;
- `student`: a shallower encoder distilled from a trained one, every tensor but the word
  embeddings (float16), which it shares with the base;
- `dual`: a one-pass model (004, `babelink.dual`): adapters as `lora`, its head's tensors under
  `head.`, its settings, and the name of the packaged encoder whose name vectors it links against.

Applying one writes a plain transformers checkpoint that `TransformerEncoder` loads; the packaged
artefacts (`babelink/encoders/trained/`) are applied to the bundled e5 once and cached, as the
bundled encoder itself is converted once. An artefact trained on another base is refused: its
adapters or layers would compute something else without a word of warning.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from babelink.errors import BabelinkError
from babelink.fsutil import sha256_file, write_bytes_atomic, write_directory

LORA_A, LORA_B = ".lora_A", ".lora_B"
KINDS = ("lora", "student", "dual")
#: Prefix of a `dual` artefact's head tensors.
DUAL_HEAD = "head."
MAX_BYTES = 16 * 2**20
METADATA_KEY = "babelink"
SUFFIX = ".safetensors"
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
_REQUIRED = ("name", "kind", "base", "settings", "training")
#: A base checkpoint's files that an applied artefact replaces rather than copies.
_REPLACED = ("config.json", "model.safetensors", "babelink_encoder.json")


def merge_lora(state: dict, adapters: dict) -> None:
    """Add each adapter's `B @ A` to its linear layer's weight in `state` (in place)."""
    for key, down in adapters.items():
        if not key.endswith(LORA_A):
            continue
        module = key.removesuffix(LORA_A)
        weight = state.get(module + ".weight")
        delta = adapters[module + LORA_B].float() @ down.float()
        if weight is None or weight.shape != delta.shape:
            raise BabelinkError(f"adapter {module}: no {tuple(delta.shape)} weight of that name in the base model")
        state[module + ".weight"] = weight + delta


def stacked_lora(first: dict, second: dict) -> dict:
    """One set of adapters computing `first`'s and `second`'s together: per module, A stacked by
    rows and B by columns, so `B @ A = B₁A₁ + B₂A₂` (ranks add)."""
    import torch

    if {k for k in first if k.endswith((LORA_A, LORA_B))} != {k for k in second if k.endswith((LORA_A, LORA_B))}:
        raise BabelinkError("the two sets of adapters adapt different layers")
    return {key: torch.cat([first[key], second[key]], dim=0 if key.endswith(LORA_A) else 1)
            for key in first if key.endswith((LORA_A, LORA_B))}


def write_artefact(path: Path, manifest: dict, tensors: dict) -> None:
    """Write an artefact atomically; refused over `MAX_BYTES`, the most a package file may weigh."""
    from safetensors.torch import save

    missing = [field for field in _REQUIRED if field not in manifest]
    if missing or manifest["kind"] not in KINDS:
        raise BabelinkError(f"{path}: an artefact manifest needs {list(_REQUIRED)} and a kind in {KINDS}")
    data = save({name: tensor.contiguous() for name, tensor in tensors.items()},
                metadata={METADATA_KEY: json.dumps(manifest, sort_keys=True)})
    if len(data) > MAX_BYTES:
        raise BabelinkError(f"{path}: {len(data) / 2**20:.1f} MiB, over the {MAX_BYTES // 2**20} MiB an artefact "
                            "may weigh; train a lower LoRA rank or fewer student layers")
    write_bytes_atomic(Path(path), data)


def read_manifest(path: Path) -> dict:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "numpy") as stream:  # the metadata only: "pt" would import torch (1.3 s)
            text = (stream.metadata() or {}).get(METADATA_KEY)
    except (OSError, SafetensorError) as error:
        raise BabelinkError(f"{path}: not a readable safetensors file: {error}") from None
    try:
        manifest = json.loads(text) if text else None
    except json.JSONDecodeError as error:
        raise BabelinkError(f"{path}: its babelink manifest is not JSON ({error})") from None
    if not isinstance(manifest, dict) or any(field not in manifest for field in _REQUIRED):
        raise BabelinkError(f"{path}: not a babelink encoder artefact (no manifest with {list(_REQUIRED)})")
    if manifest["kind"] not in KINDS:
        raise BabelinkError(f"{path}: kind {manifest['kind']!r}, expected one of {KINDS}")
    return manifest


def apply_artefact(path: Path, base_dir: Path, base_sha256: str, target: Path,
                   write_more: Callable[[Path, dict, dict], None] | None = None) -> None:
    """Write the checkpoint of artefact `path` applied to the base checkpoint `base_dir`, whose
    model file's SHA-256 (`e5_bundled.base_sha256`) is `base_sha256`, into `target` (atomically).
    `write_more(staging, manifest, tensors)` adds files of its own (a one-pass model's head)."""
    from safetensors.torch import load_file, save_file

    manifest = read_manifest(path)
    trained_on = manifest["base"].get("sha256")
    if trained_on != base_sha256:
        raise BabelinkError(f"{path}: trained on base encoder {str(trained_on)[:12]} ({manifest['base'].get('name')}), "
                            f"not on {base_sha256[:12]} at {base_dir}; apply it to the base it was trained on")
    tensors = load_file(str(path))
    state = load_file(str(Path(base_dir) / "model.safetensors"))
    config = json.loads((Path(base_dir) / "config.json").read_text())
    if manifest["kind"] in ("lora", "dual"):
        merge_lora(state, {name: tensor for name, tensor in tensors.items() if not name.startswith(DUAL_HEAD)})
    else:
        state = {name: tensor.float() for name, tensor in tensors.items()} | {WORD_EMBEDDINGS: state[WORD_EMBEDDINGS]}
        config["num_hidden_layers"] = manifest["layers"]

    def write(staging: Path) -> None:
        for file in Path(base_dir).iterdir():
            if file.is_file() and file.name not in _REPLACED:
                shutil.copy2(file, staging / file.name)
        (staging / "config.json").write_text(json.dumps(config, indent=2))
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        (staging / "babelink_encoder.json").write_text(json.dumps(manifest["settings"], indent=2))
        if write_more is not None:
            write_more(staging, manifest, tensors)

    target.parent.mkdir(parents=True, exist_ok=True)
    write_directory(target, write)


def artefact_file(name: str | Path) -> Path:
    """An artefact file given as a path, or the packaged artefact of that name."""
    if Path(name).is_file():
        return Path(name)
    return _packaged_file(str(name), "and no artefact file at that path")


def terms(manifest: dict) -> str:
    """What an artefact's training data allow, in one line: `info` and the docs say it so."""
    training = manifest["training"]
    sources = "; ".join(f"{source} ({licence})" for source, licence in training.get("sources", {}).items())
    if training.get("default_eligible"):
        return f"trained on sources a default may be trained on: {sources}"
    noncommercial = any("NC" in licence.replace("-", " ").split() for licence in training.get("sources", {}).values())
    return (f"opt-in: its training data's terms restrict its use{' to non-commercial ends' if noncommercial else ''}: "
            f"{sources}")


def packaged() -> dict[str, Path]:
    """name -> file of every artefact shipped in the package."""
    folder = Path(str(resources.files("babelink.encoders") / "trained"))
    return {file.name.removesuffix(SUFFIX): file for file in sorted(folder.glob("*" + SUFFIX))} if folder.is_dir() \
        else {}


def _packaged_file(name: str, otherwise: str) -> Path:
    """The packaged artefact `name`; else an error listing those packaged, and what else `name` may be."""
    available = packaged()
    if name not in available:
        known = ", ".join(available) or "none in this installation"
        raise BabelinkError(f"no trained encoder named {name!r} (packaged: {known}); {otherwise}")
    return available[name]


def packaged_checkpoint(name: str, write_more: Callable[[Path, dict, dict], None] | None = None) -> Path:
    """The checkpoint of packaged artefact `name` applied to the bundled e5, applying it into the
    cache on first use (named after the artefact's SHA-256, so an upgrade applies afresh);
    `write_more` as for `apply_artefact`, its directory kept apart from the bare encoder's (a
    one-pass model's head is never missing because its encoder was applied first)."""
    from babelink.encoders.e5_bundled import base_sha256, bundled_e5_path
    from babelink.home import babelink_home

    artefact = _packaged_file(name, "or give a checkpoint directory")
    digest = sha256_file(artefact)[:12]
    target = babelink_home() / "encoders" / f"{name}-{digest}{'-model' if write_more else ''}"
    if not (target / "config.json").is_file():
        apply_artefact(artefact, bundled_e5_path(), base_sha256(), target, write_more)
    return target

