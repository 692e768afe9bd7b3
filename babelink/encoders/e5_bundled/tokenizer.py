"""XLM-R's fast tokenizer rebuilt from the pieces, scores and normalisation map of the model file."""

from __future__ import annotations

import struct

import numpy as np

from babelink.encoders.e5_bundled.model_file import E5Vocab

_METASPACE = "\u2581"


def fast_tokenizer(vocab: E5Vocab, max_length: int):
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
            normalizers.Precompiled(precompiled_charsmap(vocab.normalisation)),
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


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
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
