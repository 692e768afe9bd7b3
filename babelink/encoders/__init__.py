"""Dense encoders: text → L2-normalised float32 vectors.

A bundle records which encoder built its dense index (`describe()`); `encoder_from_manifest`
reopens the same one and refuses a different checkpoint, since vectors from another model would
be silently meaningless against the index. A checkpoint runs in one of two runtimes giving the
same vectors: `torch` (training, and the fastest on large batches) or `onnx` (no torch import:
what a short CLI call needs; `encoders.onnx`). Precision `int8` (quantised linear layers) runs in
ONNX Runtime whichever runtime is asked for: its vectors form a space of their own, so a bundle
built in int8 is queried in int8.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from babelink.errors import BabelinkError, BundleError

if TYPE_CHECKING:
    from babelink.encoders.transformer import EncoderSettings

#: The `--encoder` value naming the bundled multilingual-e5-small.
DEFAULT = "default"
RUNTIMES = ("torch", "onnx")


class Encoder(Protocol):
    dimension: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32, rows L2-normalised."""
        ...

    def describe(self) -> dict:
        """JSON-serialisable identity and settings, stored in the bundle manifest."""
        ...


def open_encoder(name: str | Path = DEFAULT, runtime: str = "torch", **settings) -> Encoder:
    """`default` (the bundled e5) or a checkpoint directory, run by `runtime`; `settings` that are
    not None override its `EncoderSettings`."""
    settings = {key: value for key, value in settings.items() if value is not None}
    if runtime not in RUNTIMES:
        raise BabelinkError(f"encoder runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "onnx" or settings.get("precision") == "int8":  # int8 exists in ONNX Runtime only
        from babelink.encoders.onnx import onnx_encoder

        return onnx_encoder(*resolve_checkpoint(name, **settings))
    if str(name) == DEFAULT:
        from babelink.encoders.e5_bundled import bundled_encoder

        return bundled_encoder(**settings)
    from babelink.encoders.transformer import TransformerEncoder, settings_for

    path = checkpoint_path(name)
    return TransformerEncoder(path, settings_for(path, **settings) if path.is_dir() else None)


def checkpoint_path(name: str | Path) -> Path:
    """A checkpoint directory, or the name of a trained encoder shipped with babelink
    (`encoders.artefacts`), applied to the bundled e5 on first use."""
    from babelink.encoders.artefacts import packaged, packaged_checkpoint, read_manifest

    if not Path(name).is_dir() and str(name) in packaged():
        manifest = read_manifest(packaged()[str(name)])
        if manifest["kind"] == "dual":  # its encoder scores spans; the bundle it links against is its entity encoder's
            raise BabelinkError(f"{name} is a one-pass model, not an encoder: give it to `link --model {name}`, "
                                f"over a bundle built with --encoder {manifest['entity_encoder']}")
        return packaged_checkpoint(str(name))
    return Path(name)


def resolve_checkpoint(name: str | Path, **overrides) -> tuple[Path, EncoderSettings]:
    """The checkpoint directory an `--init` value names, and how to encode with it: `default` is
    the bundled multilingual-e5-small (converted into the cache on first use) with e5's pooling
    and prefix; a packaged trained encoder's name or a directory comes with its own
    `babelink_encoder.json` or defaults.
    `overrides` that are not None win."""
    from babelink.encoders.transformer import settings_for

    if str(name) == DEFAULT:
        from babelink.encoders.e5_bundled import E5_SETTINGS, bundled_e5_path

        return bundled_e5_path(), settings_for(bundled_e5_path(), **{**E5_SETTINGS, **overrides})
    path = checkpoint_path(name)
    return path, settings_for(path, **overrides)


def manifest_entry(name: str | Path, encoder: Encoder) -> dict:
    """A bundle names the bundled and the packaged encoders by name (they live in each machine's
    cache), a checkpoint directory by its absolute path."""
    from babelink.encoders.artefacts import packaged

    by_name = str(name) == DEFAULT or (not Path(name).is_dir() and str(name) in packaged())
    return {"name": str(name) if by_name else str(Path(name).absolute()), **encoder.describe()}


def encoder_from_manifest(entry: dict, bundle: Path, runtime: str = "torch") -> Encoder:
    from babelink.encoders.transformer import EncoderSettings

    settings = {key: entry[key] for key in EncoderSettings.__dataclass_fields__ if key in entry}
    encoder = open_encoder(entry["name"], runtime, **settings)
    found = encoder.describe()
    if found["fingerprint"] != entry.get("fingerprint"):
        raise BundleError(
            f"{bundle}: the encoder at {found['path']} is not the checkpoint this bundle was built with "
            "(fingerprint differs); rebuild the bundle or restore the checkpoint"
        )
    return encoder
