"""The collective dual encoder's mention side (004 §3): one encoder pass per segment gives every
span's mention probability (Eq. 4) and the vector of any span, compared by inner product with
the KB's name vectors.

The candidate encoder is the bundle's own: its name vectors, computed once (at build in a FAISS
index, or on first need in a lazy one's store) and kept, are the cached entity representations of
§3.3, so linking needs no per-mention encoder call and no re-encoding of the KB. The mention encoder learns to meet
them; a model therefore records the encoder (fingerprint, dimension) whose vectors it was
trained against, and a bundle built with another is refused.

Segments are windows of at most `max_length` sub-tokens over `detect.tokenize` words, cut
between words (at a barrier no mention crosses where possible), so a span's character offsets
are its first and last word's, exact in every script. Mention vectors are L2-normalised, so
the inner product is the cosine the bundle's index searches by.

A model is a directory: the fine-tuned encoder as a transformers checkpoint with its tokenizer,
`dual_head.safetensors` (span scorer, Eq. 1 projection) and `babelink_dual.json`
(`babelink train dual` writes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from babelink.checkpoint import autocast_dtype, inference_device, load_with_head, read_settings, save_with_head
from babelink.detect.ner import first_pieces, subword_windows
from babelink.detect.tokenize import Token
from babelink.dual.spans import boundary_pooled, enumerate_spans, mean_pooled, span_logits
from babelink.errors import BundleError

SETTINGS_FILE = "babelink_dual.json"
HEAD_FILE = "dual_head.safetensors"
POOLINGS = ("mean", "boundary")


@dataclass(frozen=True)
class DualSettings:
    """Defaults: 004 §4.3 (L = 10, 512-token segments); the threshold γ and the TF-IDF weight are
    chosen on dev by the trainer."""

    max_span_words: int = 10  # L: longest span scored, in words
    max_length: int = 512  # sub-tokens per segment, special tokens included
    pooling: str = "mean"  # mention vector: "mean" over the span (§3.4) or "boundary", W[h_i; h_j] + b (Eq. 1)
    threshold: float = 0.5  # γ: spans with p(m) above it are mentions
    sparse_weight: float = 0.0  # w: a name scores (1 − w) · cosine + w · TF-IDF cosine of the span text
    scale: float = 20.0  # logits of the disambiguation loss: scale × cosine
    batch_size: int = 8  # segments per forward pass
    entity_encoder: dict = field(default_factory=dict)  # name, fingerprint and dimension of the KB vectors' encoder

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if (self.max_span_words < 1 or self.max_length < 8 or not 0.0 <= self.threshold <= 1.0
                or not 0.0 <= self.sparse_weight <= 1.0):
            raise ValueError("max_span_words ≥ 1, max_length ≥ 8, 0 ≤ threshold ≤ 1 and 0 ≤ sparse_weight ≤ 1")


class DualEncoder(torch.nn.Module):
    """Encoder → token states; a span scorer (w_s, w_e, w_m of Eq. 4 and a bias) and the Eq. 1
    projection, initialised to the mean of the boundary states."""

    def __init__(self, encoder: torch.nn.Module):
        super().__init__()
        self.encoder = encoder
        dimension = encoder.config.hidden_size
        self.span_weights = torch.nn.Parameter(torch.zeros(3, dimension))
        self.span_bias = torch.nn.Parameter(torch.full((1,), -4.0))  # most spans are not mentions
        self.boundary = torch.nn.Linear(2 * dimension, dimension)
        with torch.no_grad():
            self.boundary.weight.copy_(torch.cat([torch.eye(dimension), torch.eye(dimension)], dim=1) / 2)
            self.boundary.bias.zero_()

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(**inputs).last_hidden_state.float()


@dataclass
class EncodedBatch:
    """Token states of a batch of segments and, per segment, each word's first and last sub-token
    position (`first`, `last`: (segments, words)) and its count of words that fit (`words`)."""

    hidden: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    words: torch.Tensor


@dataclass
class ScoredSpans:
    """Every span of up to L words of a batch: `starts`/`ends` are word indexes (inclusive end)
    shared by all rows, `valid` (rows, spans) says which exist in each row, `logits` are Eq. 4's."""

    starts: torch.Tensor
    ends: torch.Tensor
    valid: torch.Tensor
    logits: torch.Tensor


def _dual_settings(fields: dict) -> DualSettings:
    return DualSettings(**fields)


class DualModel:
    """A trained (or freshly initialised) dual encoder directory, on a device."""

    def __init__(self, path: str | Path, device: str | None = None):
        self.path = Path(path).absolute()
        self.settings = read_settings(self.path, SETTINGS_FILE, _dual_settings, "dual encoder", "babelink train dual")
        self.device = inference_device(device)
        self.tokenizer, self.model = load_with_head(self.path, DualEncoder, HEAD_FILE, "dual encoder")
        self.model.to(self.device).eval()
        self._autocast = autocast_dtype(self.device)

    def check_bundle(self, bundle) -> None:
        """Refuse a bundle whose name vectors come from another encoder than the one this model was
        trained against: its inner products would be meaningless, not merely worse."""
        expected = self.settings.entity_encoder
        if bundle.dense is None:
            raise BundleError(f"{bundle.path}: a {bundle.retriever} bundle has no dense index; "
                              f"the dual encoder {self.path} links against name vectors")
        built = bundle.manifest["dense"]["encoder"]
        found = (built.get("fingerprint"), bundle.dense.dimension)
        if found != (expected.get("fingerprint"), expected.get("dimension")):
            raise BundleError(
                f"{bundle.path}: its name vectors come from encoder {built.get('name')!r} (fingerprint "
                f"{str(built.get('fingerprint'))[:12]}, {bundle.dense.dimension}-d), but the dual encoder {self.path} "
                f"was trained against {expected.get('name')!r} (fingerprint {str(expected.get('fingerprint'))[:12]}, "
                f"{expected.get('dimension')}-d); link with a bundle built by that encoder")

    def segments(self, text: str, tokens: Sequence[Token]) -> list[tuple[int, int]]:
        """(first, end) word ranges of the segments of a text."""
        return subword_windows(self.tokenizer, text, tokens, self.settings.max_length)

    def encode(self, segments: Sequence[Sequence[str]]) -> EncodedBatch:
        """Token states of a batch of segments given as word lists (graph kept: training calls this)."""
        encoded = self.tokenizer([list(words) for words in segments], is_split_into_words=True, truncation=True,
                                 max_length=self.settings.max_length, padding=True, return_tensors="pt")
        longest = max(len(words) for words in segments)
        first = torch.tensor(first_pieces(encoded, longest))
        last = torch.tensor(last_pieces(encoded, longest))
        words = torch.tensor([len({w for w in encoded.word_ids(row) if w is not None})
                              for row in range(len(segments))])
        inputs = {key: value.to(self.device) for key, value in encoded.items()}
        with torch.autocast(self.device.type, dtype=self._autocast or torch.float32,
                            enabled=self._autocast is not None):
            hidden = self.model(inputs)
        return EncodedBatch(hidden, first.to(self.device), last.to(self.device), words.to(self.device))

    def score_spans(self, batch: EncodedBatch) -> ScoredSpans:
        starts, ends = enumerate_spans(batch.first.shape[1], self.settings.max_span_words)
        starts, ends = starts.to(self.device), ends.to(self.device)
        valid = ends.unsqueeze(0) < batch.words.unsqueeze(1)
        rows = batch.first.shape[0]
        first = batch.first[:, starts]
        logits = span_logits(batch.hidden, self.model.span_weights, self.model.span_bias,
                             first, torch.maximum(first, batch.last[:, ends]))
        return ScoredSpans(starts, ends, valid, logits.reshape(rows, -1))

    def mention_vectors(self, batch: EncodedBatch, rows: torch.Tensor, first_words: torch.Tensor,
                        last_words: torch.Tensor) -> torch.Tensor:
        """L2-normalised vectors of the spans (row, first word, last word), pooled as the model was trained."""
        starts, ends = batch.first[rows, first_words], batch.last[rows, last_words]
        ends = torch.maximum(starts, ends)
        if self.settings.pooling == "mean":
            vectors = mean_pooled(batch.hidden, rows, starts, ends)
        else:
            vectors = boundary_pooled(batch.hidden, self.model.boundary, rows, starts, ends)
        return torch.nn.functional.normalize(vectors, dim=-1)


def last_pieces(encoded, words: int) -> list[list[int]]:
    """Per row of a batch encoded with `is_split_into_words`, the position of each of its first
    `words` words' last sub-token; a word cut off by truncation (or padding) reads position 0."""
    found = []
    for row in range(len(encoded["input_ids"])):
        pieces = [0] * words
        for position, word in enumerate(encoded.word_ids(row)):
            if word is not None:
                pieces[word] = position
        found.append(pieces)
    return found


def save_dual(directory: Path, tokenizer, model: DualEncoder, settings: DualSettings) -> None:
    """Write a dual encoder directory (`DualModel` loads it)."""
    save_with_head(directory, tokenizer, model, HEAD_FILE, SETTINGS_FILE, settings)
