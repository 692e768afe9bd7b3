"""Contextual relevance filter (000 §4.4): is this span, in this context, a mention of this concept?

A cross-encoder reads `[CLS] window [SEP] concept name [SEP]`, where the window is the span
with `window` words on each side (Ws = 2 in 000 Tab. 9) and the span itself between « and »
(so that overlapping spans of one window differ), and outputs the probability that the
high-recall matcher's concept is right for the span. The linker keeps a span when that
probability reaches `threshold`, tuned on dev documents when the filter is trained
(`babelink.train.context_filter`). The filter is a directory: a transformers
sequence-classification checkpoint plus `babelink_filter.json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelink.checkpoint import autocast_dtype, inference_device, load_pretrained, read_settings, write_settings
from babelink.detect.tokenize import tokenize
from babelink.errors import BabelinkError

SETTINGS_FILE = "babelink_filter.json"
#: Characters of context read on each side of a span before cutting the window in words.
_CONTEXT_CHARS = 400


@dataclass(frozen=True)
class FilterSettings:
    window: int = 2  # Ws words (or, in scripts without spaces, 2·Ws characters) on each side
    threshold: float = 0.5
    max_length: int = 64
    batch_size: int = 64


def filter_window(text: str, start: int, end: int, window: int) -> str:
    """`text[start:end]` marked with « », and `window` tokens of context on each side (unspaced
    script characters count half a word)."""
    left_text = text[max(0, start - _CONTEXT_CHARS) : start]
    right_text = text[end : end + _CONTEXT_CHARS]
    left = _take(tokenize(left_text)[::-1], window)
    right = _take(tokenize(right_text), window)
    left_context = left_text[left[-1].start :] if left else ""
    right_context = right_text[: right[-1].end] if right else ""
    return " ".join(f"{left_context}«{text[start:end]}»{right_context}".split())


def _take(tokens, window: int) -> list:
    taken, budget = [], float(window)
    for token in tokens:
        budget -= 0.5 if token.unspaced else 1.0
        if budget < 0:
            break
        taken.append(token)
    return taken


class ContextFilter:
    def __init__(self, path: str | Path, device: str | None = None):
        self.path = Path(path).absolute()
        self.settings = read_settings(self.path, SETTINGS_FILE, lambda fields: FilterSettings(**fields),
                                      "context filter", "babelink train filter")
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self._torch = torch
        self.device = inference_device(device)
        self.model = load_pretrained(self.path, AutoModelForSequenceClassification, fresh=frozenset())
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError) as error:
            raise BabelinkError(f"{self.path}: cannot load the filter checkpoint: {error}") from None
        self.model.to(self.device).eval()
        self._autocast = autocast_dtype(self.device)

    def probabilities(self, windows: Sequence[str], concept_names: Sequence[str]) -> np.ndarray:
        """P(relevant) for each (window, concept name) pair, batched by length."""
        torch = self._torch
        result = np.zeros(len(windows), dtype=np.float32)
        if not windows:
            return result
        encoded = self.tokenizer(list(windows), list(concept_names), truncation=True,
                                 max_length=self.settings.max_length)["input_ids"]
        order = np.argsort([len(ids) for ids in encoded], kind="stable")
        with torch.inference_mode():
            for first in range(0, len(order), self.settings.batch_size):
                batch = order[first : first + self.settings.batch_size]
                result[batch] = self.relevance_logits([encoded[i] for i in batch]).float().sigmoid().cpu().numpy()
        return result

    def relevance_logits(self, input_ids: list[list[int]]):
        """Logit of P(relevant) per input (graph kept: training calls this too)."""
        torch = self._torch
        inputs = self.tokenizer.pad({"input_ids": input_ids}, return_tensors="pt").to(self.device)
        with torch.autocast(
            self.device.type, dtype=self._autocast or torch.float32, enabled=self._autocast is not None
        ):
            logits = self.model(**inputs).logits
        return logits[:, 1] - logits[:, 0]

    def save_settings(self, settings: FilterSettings) -> None:
        self.settings = settings
        write_settings(self.path, SETTINGS_FILE, settings)
