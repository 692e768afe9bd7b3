"""Learned mention detector: a transformer encoder + linear emissions + CRF BIO tagger (002 §4.2).

Tagging units are the words of `detect.tokenize` (one per character in Chinese and Japanese,
one per grapheme in Thai), so spans map back to exact character offsets in any script. A word's
emission scores are a linear map of the encoder state of its first sub-token; a SentencePiece
tokenizer splits a CJK character given as a word into a bare "▁" and the character, and the
bare marker, which says nothing about the character, is skipped. Long texts are tagged in
windows of at most `max_length` sub-tokens, cut between words, preferably at a barrier no
mention crosses (`tokenize.joinable`), as 002 tags sentence by sentence. Labels are B-T / I-T
for each mention type T seen in training, and O.

A detector is a directory: the fine-tuned encoder as a transformers checkpoint with its
tokenizer, `ner_head.safetensors` (emission layer and CRF) and `babelink_ner.json`
(`babelink train ner` writes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from babelink.checkpoint import autocast_dtype, inference_device, load_with_head, read_settings, save_with_head
from babelink.detect.crf import CRF, bio_constraints
from babelink.detect.tokenize import Token, joinable, tokenize

SETTINGS_FILE = "babelink_ner.json"
HEAD_FILE = "ner_head.safetensors"
#: Word-start markers of SentencePiece and byte-level BPE vocabularies.
_MARKERS = "▁Ġ"


@dataclass(frozen=True)
class NerSettings:
    labels: tuple[str, ...]  # "O", then B-T and I-T for each type T
    max_length: int = 256  # sub-tokens per window, special tokens included
    batch_size: int = 16


def bio_labels(types: Sequence[str]) -> tuple[str, ...]:
    return ("O", *(f"{prefix}-{kind}" for kind in types for prefix in "BI"))


def bio_spans(labels: Sequence[str]) -> list[tuple[int, int, str]]:
    """(first word, end word, type) of each B-T I-T… run; a stray I-T opens a mention too."""
    spans: list[tuple[int, int, str]] = []
    for position, label in enumerate(labels):
        if label.startswith("I-") and spans and spans[-1][1] == position and spans[-1][2] == label[2:]:
            spans[-1] = (spans[-1][0], position + 1, label[2:])
        elif label != "O":
            spans.append((position, position + 1, label[2:]))
    return spans


class NerTagger(torch.nn.Module):
    """Encoder → first-sub-token state of each word → emission scores; the CRF scores sequences."""

    def __init__(self, encoder: torch.nn.Module, labels: Sequence[str]):
        super().__init__()
        self.encoder = encoder
        self.emissions = torch.nn.Linear(encoder.config.hidden_size, len(labels))
        self.crf = CRF(len(labels), *bio_constraints(labels))

    def forward(self, inputs: dict[str, torch.Tensor], pieces: torch.Tensor) -> torch.Tensor:
        """Emission scores (windows, words, labels) in float32; `pieces` (windows, words) holds
        each word's first sub-token position (`first_pieces`)."""
        states = self.encoder(**inputs).last_hidden_state
        index = pieces.unsqueeze(-1).expand(-1, -1, states.shape[-1])
        return self.emissions(states.gather(1, index)).float()


def _ner_settings(fields: dict) -> NerSettings:
    return NerSettings(**{**fields, "labels": tuple(fields["labels"])})


class NerDetector:
    """`MentionDetector` over a trained tagger directory; spans of every type are returned."""

    name = "ner"

    def __init__(self, path: str | Path, device: str | None = None):
        self.path = Path(path).absolute()
        self.settings = read_settings(self.path, SETTINGS_FILE, _ner_settings, "NER model", "babelink train ner")
        self.device = inference_device(device)
        self.tokenizer, self.model = load_with_head(
            self.path, lambda encoder: NerTagger(encoder, self.settings.labels), HEAD_FILE, "NER model")
        self.model.to(self.device).eval()
        self._autocast = autocast_dtype(self.device)

    def detect(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [[(start, end) for start, end, _ in found] for found in self.entities(texts)]

    def entities(self, texts: Sequence[str]) -> list[list[tuple[int, int, str]]]:
        """(start, end, type) of the mentions in each text, in text order."""
        units = []
        for number, text in enumerate(texts):
            tokens = tokenize(text)
            units += [(number, tokens[first:end]) for first, end in self.windows(text, tokens)]
        units.sort(key=lambda unit: -len(unit[1]))
        found: list[list[tuple[int, int, str]]] = [[] for _ in texts]
        with torch.inference_mode():
            for first in range(0, len(units), self.settings.batch_size):
                batch = units[first : first + self.settings.batch_size]
                emissions, mask = self.emissions([[token.text for token in words] for _, words in batch])
                for (number, words), tags in zip(batch, self.model.crf.decode(emissions, mask)):
                    found[number] += [(words[start].start, words[end - 1].end, kind)
                                      for start, end, kind in bio_spans([self.settings.labels[t] for t in tags])]
        return [sorted(spans) for spans in found]

    def windows(self, text: str, tokens: Sequence[Token]) -> list[tuple[int, int]]:
        return subword_windows(self.tokenizer, text, tokens, self.settings.max_length)

    def emissions(self, windows: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Emission scores (windows, words, labels) and the word mask of a batch of word lists
        (graph kept: training calls this too)."""
        encoded = self.tokenizer([list(words) for words in windows], is_split_into_words=True, truncation=True,
                                 max_length=self.settings.max_length, padding=True, return_tensors="pt")
        longest = max(len(words) for words in windows)
        mask = torch.arange(longest).unsqueeze(0) < torch.tensor([len(words) for words in windows]).unsqueeze(1)
        inputs = {key: value.to(self.device) for key, value in encoded.items()}
        with torch.autocast(
            self.device.type, dtype=self._autocast or torch.float32, enabled=self._autocast is not None
        ):
            emissions = self.model(inputs, torch.tensor(first_pieces(encoded, longest), device=self.device))
        return emissions, mask.to(self.device)

    def save(self, directory: Path) -> None:
        save_tagger(directory, self.tokenizer, self.model, self.settings)


def subword_windows(tokenizer, text: str, tokens: Sequence[Token], max_length: int) -> list[tuple[int, int]]:
    """(first, end) word ranges of `tokens` of at most `max_length` sub-tokens (special tokens
    included), cut between words, preferably at a barrier no mention crosses; a word longer than
    that alone is a window (truncated)."""
    if not tokens:
        return []
    encoded = tokenizer([token.text for token in tokens], is_split_into_words=True, add_special_tokens=False,
                        verbose=False)
    pieces = Counter(encoded.word_ids())
    budget = max_length - tokenizer.num_special_tokens_to_add()
    ranges, first = [], 0
    while first < len(tokens):
        end, used = first + 1, pieces[first]
        while end < len(tokens) and used + pieces[end] <= budget:
            used += pieces[end]
            end += 1
        if end < len(tokens):
            end = next((cut for cut in range(end, first + (end - first) // 2, -1)
                        if not joinable(text, tokens[cut - 1], tokens[cut])), end)
        ranges.append((first, end))
        first = end
    return ranges


def first_pieces(encoded, words: int) -> list[list[int]]:
    """Per row of a batch encoded with `is_split_into_words`, the position of each of its first
    `words` words' first sub-token, skipping a bare word-start marker when the word has more
    pieces; a word cut off by truncation (or padding) reads position 0, the first special token."""
    found = []
    for row in range(len(encoded["input_ids"])):
        pieces, tokens = [0] * words, encoded.tokens(row)
        for position, word in reversed(list(enumerate(encoded.word_ids(row)))):
            if word is not None and (tokens[position].strip(_MARKERS) or not pieces[word]):
                pieces[word] = position
        found.append(pieces)
    return found


def save_tagger(directory: Path, tokenizer, model: NerTagger, settings: NerSettings) -> None:
    """Write a detector directory (`NerDetector` loads it)."""
    save_with_head(directory, tokenizer, model, HEAD_FILE, SETTINGS_FILE, settings)
