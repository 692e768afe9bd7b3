"""ONNX Runtime encoding of a checkpoint: `TransformerEncoder`'s vectors without importing torch.

A CLI call that normalises a few mentions spent most of its 10 s importing torch and
transformers and parsing the tokenizer through them (BENCHMARKS.md, start-up). Each checkpoint
is therefore exported once, by torch, into `<home>/encoders/onnx/<fingerprint>/`:

- `body.onnx`: the transformer from input embeddings to last hidden states;
- `word_embeddings.npy`: the word-embedding matrix, memory-mapped, so a call reads only the
  rows its tokens need (e5's 250k × 384 matrix is 80% of the model: the session starts in
  0.2 s instead of 0.9 s);
- `tokenizer.json`, run by `tokenizers` alone; `export.json`, the fingerprint it came from.

Pooling, prefix and truncation follow the bundle's `EncoderSettings`, as in `TransformerEncoder`;
the vectors agree with its fp32 and bf16 ones to a cosine above 0.9999 (tests), so one index
serves both. Throughput on large batches is lower than torch's bf16 (BENCHMARKS.md): bulk jobs
(builds, files, the service) keep torch, short calls take this runtime.

Precision `int8` runs `body-int8.onnx`, the body with its linear layers' weights quantised to
int8 and activations quantised per batch (ONNX Runtime's dynamic quantisation, made on first use);
the word embeddings stay fp32. Faster on CPUs with int8 dot products (BENCHMARKS.md), but the
vectors move (cosine to fp32 about 0.99), so it is a precision to build a bundle with, not to
query an fp32 one; and since an activation scale covers a whole batch, a text's vector depends a
little on the texts batched with it (cosine 0.995–0.997 to the text encoded alone, notes.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from babelink.cancel import check as check_cancelled
from babelink.encoders.transformer import (
    EncoderSettings,
    TransformerEncoder,
    checkpoint_fingerprint,
    require_checkpoint,
)
from babelink.errors import BabelinkError
from babelink.fsutil import replace_directory, staging_directory
from babelink.home import babelink_home

#: Bump when the export's files or graph change, so cached exports are made afresh.
EXPORT_VERSION = 1
TOKENIZER_FILE = "tokenizer.json"
_FILES = ("word_embeddings.npy", TOKENIZER_FILE, "export.json")
INT8_GRAPH = "body-int8.onnx"


def export_directory(checkpoint: Path) -> Path:
    """Where the export of `checkpoint` lives (named by its fingerprint: a retrained model gets its own)."""
    return babelink_home() / "encoders" / "onnx" / f"{checkpoint_fingerprint(checkpoint)[:24]}-v{EXPORT_VERSION}"


def export_encoder(encoder: TransformerEncoder, out: Path) -> Path:
    """Write the ONNX export of a loaded torch encoder to `out`, atomically."""
    import torch

    if not getattr(encoder.tokenizer, "is_fast", False):
        raise BabelinkError(f"{encoder.path}: ONNX export needs a fast tokenizer (tokenizer.json)")
    model = encoder.model.eval()

    class Body(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, inputs_embeds, attention_mask):
            return self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state

    embeddings = model.get_input_embeddings().weight.detach().cpu()
    sample = embeddings[torch.tensor([[0, 1, 2], [2, 1, 0]])]
    axes = {0: "batch", 1: "tokens"}
    staging = staging_directory(out)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes: none varies in this graph
            torch.onnx.export(Body(), (sample, torch.ones((2, 3), dtype=torch.int64)), str(staging / "body.onnx"),
                              input_names=["inputs_embeds", "attention_mask"], output_names=["last_hidden_state"],
                              dynamic_axes={"inputs_embeds": axes, "attention_mask": axes, "last_hidden_state": axes},
                              opset_version=17, dynamo=False)
        np.save(staging / "word_embeddings.npy", embeddings.numpy())
        encoder.tokenizer.backend_tokenizer.save(str(staging / TOKENIZER_FILE))
        (staging / "export.json").write_text(json.dumps(
            {"fingerprint": checkpoint_fingerprint(encoder.path), "version": EXPORT_VERSION}))
        replace_directory(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


class OnnxEncoder:
    """`encode(texts) -> float32 (n, dim)` with L2-normalised rows, from an export directory."""

    def __init__(self, checkpoint: Path, export: Path, settings: EncoderSettings):
        try:
            import onnxruntime
            import tokenizers  # noqa: F401 — checked here, used by `_tokenizer`
        except ImportError as error:
            raise BabelinkError(f"the ONNX runtime needs {error.name}: pip install babelink") from None
        self.path = checkpoint
        self.settings = settings
        self._export = export
        graph = INT8_GRAPH if settings.precision == "int8" else "body.onnx"
        with self._damage_reported():
            # the checkpoint's fingerprint, computed once when the export was named and written
            self._fingerprint = json.loads((export / "export.json").read_text())["fingerprint"]
            self._embeddings = np.load(export / "word_embeddings.npy", mmap_mode="r")
            self._session = onnxruntime.InferenceSession(str(export / graph), providers=["CPUExecutionProvider"])
            if not (export / TOKENIZER_FILE).is_file():
                raise FileNotFoundError(f"no {TOKENIZER_FILE}")
        self.dimension = int(self._embeddings.shape[1])

    @functools.cached_property
    def _tokenizer(self):
        """Parsed on first use, not at load: parsing holds the GIL for 0.7 s, which would stall a
        bundle loading beside the encoder (`load_bundle_with_encoder`) while the session builds."""
        from tokenizers import Tokenizer

        with self._damage_reported():
            tokenizer = Tokenizer.from_file(str(self._export / TOKENIZER_FILE))
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.settings.max_length)
        return tokenizer

    @contextlib.contextmanager
    def _damage_reported(self):
        try:
            yield
        except Exception as error:  # noqa: BLE001 — tokenizers and ONNX Runtime raise bare Exception subclasses
            raise BabelinkError(f"{self._export}: damaged ONNX export ({error}); remove that directory and the next "
                                "call exports the checkpoint again") from None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in input order; batches are formed over inputs sorted by token count."""
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        prefix = self.settings.prefix
        encoded = [item.ids for item in self._tokenizer.encode_batch([prefix + text for text in texts])]
        order = np.argsort([len(ids) for ids in encoded], kind="stable")
        for start in range(0, len(order), self.settings.batch_size):
            check_cancelled()
            batch = order[start : start + self.settings.batch_size]
            vectors[batch] = self._pooled([encoded[i] for i in batch])
        return vectors

    def _pooled(self, input_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in input_ids)
        ids = np.zeros((len(input_ids), width), dtype=np.int64)
        mask = np.zeros((len(input_ids), width), dtype=np.int64)
        for row, sequence in enumerate(input_ids):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1
        embeds = np.ascontiguousarray(self._embeddings[ids], dtype=np.float32)
        hidden = self._session.run(None, {"inputs_embeds": embeds, "attention_mask": mask})[0]
        if self.settings.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def describe(self) -> dict:
        return {"path": str(self.path), "fingerprint": self._fingerprint, "dimension": self.dimension,
                **asdict(self.settings)}


def onnx_encoder(checkpoint: Path, settings: EncoderSettings) -> OnnxEncoder:
    """The ONNX encoder of `checkpoint`, exporting it first (once, with torch) where no export exists."""
    checkpoint = require_checkpoint(checkpoint)
    export = export_directory(checkpoint)
    if not all((export / name).is_file() for name in ("body.onnx", *_FILES)):
        export_encoder(TransformerEncoder(checkpoint, replace(settings, precision="fp32"), device="cpu"), export)
    if settings.precision == "int8" and not (export / INT8_GRAPH).is_file():
        quantize_export(export)
    return OnnxEncoder(checkpoint, export, settings)


def quantize_export(export: Path) -> Path:
    """Write `body-int8.onnx` beside `body.onnx`: int8 weights (one scale per output channel: per
    tensor lost 1.4 points of XL-BEL Acc@1, per channel 0.4, notes.md) for every linear layer, activations
    quantised per batch (ONNX Runtime's `quantize_dynamic`); written aside and renamed into place."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = export / INT8_GRAPH
    partial = export / f".{INT8_GRAPH}.{os.getpid()}"
    disabled = logging.root.manager.disable  # the application's own setting, restored after
    logging.disable(max(disabled, logging.WARNING))  # its advice to pre-process the graph is for static quantisation
    try:
        quantize_dynamic(str(export / "body.onnx"), str(partial), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(partial, target)
    finally:
        logging.disable(disabled)
        partial.unlink(missing_ok=True)
    return target
