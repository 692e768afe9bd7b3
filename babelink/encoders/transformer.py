"""Dense name encoder over any Hugging Face checkpoint directory.

A name or mention is encoded as in SapBERT (003 §2) and e5: the checkpoint's last hidden states,
pooled at `[CLS]` or averaged over the attention mask, L2-normalised, so inner product is cosine.
Inputs are tokenised once, sorted by length and batched, so a batch pads only to its own longest
name (short biomedical names dominate KBs; this is 1.8× faster than KB order, BENCHMARKS.md).
Nothing is ever downloaded: the path must be a local checkpoint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from babelink.cancel import check as check_cancelled
from babelink.checkpoint import autocast_dtype, inference_device, read_json_object
from babelink.errors import BabelinkError

#: Optional file in a checkpoint directory giving its `EncoderSettings` (written by `babelink train`).
SETTINGS_FILE = "babelink_encoder.json"
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


@dataclass(frozen=True)
class EncoderSettings:
    pooling: str = "cls"  # "cls" (SapBERT) or "mean" (e5, sentence-transformers)
    prefix: str = ""  # prepended to every input, e.g. e5's "query: "
    max_length: int = 25  # tokens; 003 App. A.2 truncates names at 25
    batch_size: int = 128  # short names: larger batches amortise per-call overhead
    # "fp32", "bf16" or "auto" (bf16 where the CPU computes it natively, fp16 on GPU): one vector space;
    # "int8": ONNX Runtime with quantised linear layers (`encoders.onnx`), a space of its own
    precision: str = "auto"

    def __post_init__(self):
        if self.pooling not in ("cls", "mean"):
            raise BabelinkError(f"encoder pooling must be 'cls' or 'mean', got {self.pooling!r}")
        if self.precision not in ("auto", "fp32", "bf16", "fp16", "int8"):
            raise BabelinkError(f"encoder precision must be auto, fp32, bf16, fp16 or int8, got {self.precision!r}")
        if self.max_length < 2 or self.batch_size < 1:
            raise BabelinkError("encoder max_length must be at least 2 and batch_size at least 1")


def settings_for(path: Path, **overrides) -> EncoderSettings:
    """Settings stored beside a checkpoint (`babelink_encoder.json`), else sentence-transformers'
    pooling config, else the defaults; explicit `overrides` (not None) win."""
    stored: dict = {}
    if (path / SETTINGS_FILE).is_file():
        stored = read_json_object(path / SETTINGS_FILE)
        unknown = set(stored) - set(EncoderSettings.__dataclass_fields__)
        if unknown:
            raise BabelinkError(f"{path / SETTINGS_FILE}: unknown field(s) {sorted(unknown)}")
    elif (path / "1_Pooling" / "config.json").is_file():
        pooling = read_json_object(path / "1_Pooling" / "config.json")
        stored = {"pooling": "mean" if pooling.get("pooling_mode_mean_tokens") else "cls"}
    return replace(EncoderSettings(**stored), **{key: value for key, value in overrides.items() if value is not None})


def require_checkpoint(path: str | Path) -> Path:
    """`path` made absolute; a clear error where it is not a local checkpoint directory."""
    path = Path(path).absolute()
    if not (path / "config.json").is_file():
        from babelink.encoders.artefacts import packaged, read_manifest

        encoders = [name for name, file in packaged().items() if read_manifest(file)["kind"] != "dual"]
        raise BabelinkError(f"{path}: not a transformers checkpoint directory (no config.json); babelink never "
                            "downloads models, pass a local directory or the name of a packaged trained encoder "
                            f"({', '.join(encoders) or 'none in this installation'})")
    return path


class TransformerEncoder:
    """`encode(texts) -> float32 (n, dim)` with L2-normalised rows."""

    def __init__(self, path: str | Path, settings: EncoderSettings | None = None, *, device: str | None = None):
        self.path = require_checkpoint(path)
        self.settings = settings or settings_for(self.path)
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as error:
            raise BabelinkError(
                f"dense encoders need {error.name}: pip install babelink (with its dependencies)"
            ) from None
        self._torch = torch
        self.device = inference_device(device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
            self.model = _load_model(AutoModel, self.path).to(self.device).eval()
        except (OSError, ValueError) as error:
            raise BabelinkError(f"{self.path}: cannot load the checkpoint: {error}") from None
        self.dimension = int(self.model.config.hidden_size)
        self._autocast_dtype = self._choose_autocast()

    def _choose_autocast(self):
        torch, precision = self._torch, self.settings.precision
        if precision == "int8":
            raise BabelinkError("int8 encoding runs in ONNX Runtime: open the encoder with runtime='onnx'")
        if precision == "auto":
            return torch.float16 if self.device.type == "cuda" else autocast_dtype(self.device)
        return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]

    @property
    def precision(self) -> str:
        return {None: "fp32"}.get(self._autocast_dtype, str(self._autocast_dtype).removeprefix("torch."))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in input order; batches are formed over inputs sorted by token count."""
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return vectors
        encoded = self._tokenize(texts)
        order = np.argsort([len(ids) for ids in encoded], kind="stable")
        with self._torch.inference_mode():
            for start in range(0, len(order), self.settings.batch_size):
                check_cancelled()
                batch = order[start : start + self.settings.batch_size]
                vectors[batch] = self._pooled([encoded[i] for i in batch]).cpu().numpy()
        return vectors

    def embed(self, texts: Sequence[str]):
        """One batch as a (len(texts), dim) tensor that keeps the autograd graph, for training."""
        return self._pooled(self._tokenize(texts))

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids as `encode` reads it, without the prefix and special tokens."""
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=True,
                              max_length=self.settings.max_length)["input_ids"]

    def encode_tokens(self, ids: Sequence[int]) -> np.ndarray:
        """One vector per token id, the token encoded alone as a text is (prefix and special
        tokens around it, pooled): what `index.approximate` builds name vectors from."""
        prefix = self.tokenizer(self.settings.prefix, add_special_tokens=False)["input_ids"]
        head, tail = _special_tokens_around(self.tokenizer)
        inputs = [[*head, *prefix, int(token), *tail] for token in ids]
        vectors = np.zeros((len(inputs), self.dimension), dtype=np.float32)
        with self._torch.inference_mode():
            for start in range(0, len(inputs), self.settings.batch_size):
                vectors[start : start + self.settings.batch_size] = (
                    self._pooled(inputs[start : start + self.settings.batch_size]).cpu().numpy())
        return vectors

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        prefix = self.settings.prefix
        return self.tokenizer([prefix + text for text in texts], truncation=True,
                              max_length=self.settings.max_length)["input_ids"]

    def _pooled(self, input_ids: list[list[int]]):
        torch = self._torch
        inputs = self.tokenizer.pad({"input_ids": input_ids}, return_tensors="pt")
        inputs = {key: value.to(self.device) for key, value in inputs.items()}
        with torch.autocast(self.device.type, dtype=self._autocast_dtype or torch.float32,
                            enabled=self._autocast_dtype is not None):
            hidden = self.model(**inputs).last_hidden_state.float()
        pooled = hidden[:, 0] if self.settings.pooling == "cls" else _mean_pool(hidden, inputs["attention_mask"])
        return torch.nn.functional.normalize(pooled, dim=-1)

    def describe(self) -> dict:
        """What a bundle records to check later that it is queried with the encoder that built it."""
        return {"path": str(self.path), "fingerprint": checkpoint_fingerprint(self.path), "dimension": self.dimension,
                **asdict(self.settings)}


def _special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after a text ([CLS] … [SEP], <s> … </s>)."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    start = next((i for i in range(len(full) - len(bare) + 1) if full[i : i + len(bare)] == bare), None)
    if start is None:
        raise BabelinkError("the tokenizer changes a text's own tokens when it adds special tokens")
    return full[:start], full[start + len(bare) :]


def _load_model(auto_model, path: Path):
    """Without the pooler head where the architecture has one: pooling is ours, and checkpoints
    saved without it (e5, SapBERT exports) would otherwise load a randomly initialised pooler.

    A single float32 `model.safetensors` whose keys are exactly the model's is read straight into
    a model built without weight initialisation: 0.1 s instead of `from_pretrained`'s 1.5 s for
    e5-small, most of a CLI call's start-up (BENCHMARKS.md, first run). Anything else takes
    `from_pretrained`."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # a per-load bar of weight names is noise in a CLI's output
    return _load_safetensors_directly(auto_model, path) or _from_pretrained(auto_model, path)


def _from_pretrained(auto_model, path: Path):
    try:
        return auto_model.from_pretrained(path, local_files_only=True, add_pooling_layer=False)
    except TypeError:
        return auto_model.from_pretrained(path, local_files_only=True)


def _load_safetensors_directly(auto_model, path: Path):
    """The model with the weights of `path/model.safetensors`, or None where that path does not apply."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        return None
    weights = path / "model.safetensors"
    if not weights.is_file():
        return None
    state = load_file(weights)
    if any(tensor.dtype != torch.float32 for tensor in state.values()):
        return None
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    with no_init_weights():
        try:
            model = auto_model.from_config(config, add_pooling_layer=False)
        except TypeError:
            model = auto_model.from_config(config)
    if set(model.state_dict()) != set(state):
        return None
    model.load_state_dict(state, assign=True)
    return model


def _mean_pool(hidden, mask):
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def checkpoint_fingerprint(path: Path) -> str:
    """SHA-256 over the config, tokenizer files and weight files' names, sizes and first/last MiB.

    Hashing whole weight files would cost seconds on every load; a retrained or swapped model
    changes its sizes or head/tail bytes, which is what the bundle check needs to catch.
    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        digest.update(file.name.encode())
        if file.suffix in _WEIGHT_SUFFIXES:
            size = file.stat().st_size
            digest.update(str(size).encode())
            with open(file, "rb") as stream:
                digest.update(stream.read(1 << 20))
                stream.seek(max(0, size - (1 << 20)))
                digest.update(stream.read(1 << 20))
        else:
            digest.update(file.read_bytes())
    return digest.hexdigest()
