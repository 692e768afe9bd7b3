"""What every babelink model directory shares: its settings file (read and written here), its device, its precision.

The encoder, the NER detector and the context filter are each a transformers checkpoint plus a
small JSON settings file; they read that file, pick a device and choose an autocast precision
the same way, here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from babelink.errors import BabelinkError

Settings = TypeVar("Settings")


def read_json_object(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BabelinkError(f"{path}: unreadable ({error})") from None
    if not isinstance(value, dict):
        raise BabelinkError(f"{path}: expected a JSON object")
    return value


def read_settings(
    directory: Path, file_name: str, make: Callable[[dict], Settings], kind: str, trainer: str
) -> Settings:
    """`make(fields)` of `directory/file_name`; a missing file says which command makes a `kind`,
    and fields `make` rejects name the file."""
    path = directory / file_name
    if not path.is_file():
        raise BabelinkError(f"{directory}: not a babelink {kind} (no {file_name}); train one with `{trainer}`")
    fields = read_json_object(path)
    try:
        return make(fields)
    except (TypeError, ValueError, KeyError) as error:
        raise BabelinkError(f"{path}: invalid {kind} settings ({error})") from None


def write_settings(directory: Path, file_name: str, settings) -> None:
    """Write a settings dataclass (or a plain dict) as the JSON `read_settings` reads back."""
    fields = settings if isinstance(settings, dict) else asdict(settings)
    (directory / file_name).write_text(json.dumps(fields, indent=2), encoding="utf-8")


def inference_device(device: str | None = None):
    """`device` if given, else the GPU where one is present, else the CPU."""
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def autocast_dtype(device):
    """bf16 on GPUs that support it and on CPUs that compute it natively (3× faster there than
    fp32), else None: full precision."""
    import torch

    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    return (
        torch.bfloat16
        if device.type == "cpu" and cpu_has_native_bf16() and torch.backends.mkldnn.is_available()
        else None
    )


def cpu_has_native_bf16() -> bool:
    """bf16 autocast is 3× faster than fp32 on CPUs with AVX512-BF16/AMX and slower on the rest,
    including such a CPU whose kernels torch is told to cap at AVX2 (`ATEN_CPU_CAPABILITY=avx2`)."""
    import torch

    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    capped = not torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return not capped and (" avx512_bf16" in flags or " amx_bf16" in flags)


def load_pretrained(path: str | Path, auto_class=None, fresh: frozenset[str] = frozenset({"pooler"}), **options):
    """The transformers model at `path` (`auto_class`, default `AutoModel`), loaded without
    transformers' load report: weights under a `fresh` module may be missing (e5 and most sentence
    encoders ship no pooler; a classifier head starts untrained), while any other missing weight
    means the directory is not the checkpoint it claims to be, an error naming it rather than a
    half-random model to train or link with."""
    from transformers import AutoModel
    from transformers.utils import logging

    logging.disable_progress_bar()  # a per-load bar of weight names is noise in a CLI's output
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        model, info = (auto_class or AutoModel).from_pretrained(path, local_files_only=True,
                                                                output_loading_info=True, **options)
    except (OSError, ValueError, RuntimeError) as error:
        raise BabelinkError(f"{path}: cannot load the checkpoint: {error}") from None
    finally:
        logging.set_verbosity(verbosity)
    missing = sorted(key for key in info["missing_keys"] if not fresh & set(key.split(".")))
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise BabelinkError(f"{path}: an incomplete checkpoint, missing {', '.join(missing[:3])}{more}")
    return model


def load_with_head(path: Path, build: Callable, head_file: str, kind: str):
    """`(tokenizer, model)`: the transformers checkpoint at `path` wrapped by `build(encoder)` (a
    module whose encoder is `model.encoder`), with the rest of its weights read from `head_file`.
    A file that does not fit is an error naming it, not a half-initialised model."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    model = build(load_pretrained(path))
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        loaded = model.load_state_dict(load_file(path / head_file), strict=False)
    except (OSError, ValueError, RuntimeError) as error:
        raise BabelinkError(f"{path}: cannot load the {kind}: {error}") from None
    if loaded.unexpected_keys or any(not key.startswith("encoder.") for key in loaded.missing_keys):
        missing = [key for key in loaded.missing_keys if not key.startswith("encoder.")]
        raise BabelinkError(f"{path / head_file}: not the head of this {kind} (missing {missing}, "
                            f"unexpected {loaded.unexpected_keys})")
    return tokenizer, model


def save_with_head(directory: Path, tokenizer, model, head_file: str, settings_file: str, settings) -> None:
    """Write what `load_with_head` reads: the encoder as a transformers checkpoint with its
    tokenizer, the other weights as safetensors, and the settings file."""
    from safetensors.torch import save_file

    model.encoder.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    save_file({name: value.contiguous() for name, value in model.state_dict().items()
               if not name.startswith("encoder.")}, directory / head_file)
    write_settings(directory, settings_file, settings)
