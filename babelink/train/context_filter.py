"""Training the contextual relevance filter (000 §4.4) on annotated documents.

Examples come from the linker itself: every span the high-recall matcher proposes in a training
document (before the filter and overlap resolution) is paired with its top concept, labelled 1
when the span is a gold mention of that concept (exact offsets) and 0 otherwise, so the filter
learns to reject the matcher's own mistakes. Documents that extended the bundle's dictionary
(DFT, 000 §4.5) are left out: their mentions are matched perfectly by construction. The
classifier starts from the bundle's encoder with a fresh two-way head and is trained with
cross-entropy (lr 2e-5, batch 32, 000 Tab. 9); the keep-threshold is then chosen on dev
documents for the best strict F1.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from babelink.augment import gold_resolver
from babelink.batching import batched
from babelink.checkpoint import load_pretrained, write_settings
from babelink.detect.overlaps import resolve_overlaps
from babelink.errors import InvalidInputError
from babelink.eval.linking import in_kb_gold
from babelink.eval.metrics import span_scores
from babelink.formats.document import Document
from babelink.fsutil import initial_directory, write_directory
from babelink.link.context_filter import SETTINGS_FILE, ContextFilter, FilterSettings, filter_window
from babelink.link.documents import DocumentLinker, Proposal
from babelink.train.optim import train_epochs

if TYPE_CHECKING:
    from babelink.linker import Linker

#: Documents proposed at once when collecting examples.
_PROPOSE_BATCH = 16
THRESHOLD_GRID = tuple(round(0.05 * step, 2) for step in range(1, 20))


@dataclass(frozen=True)
class FilterTrainingConfig:
    window: int = 2
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 64
    warmup_ratio: float = 0.1
    max_negatives_per_positive: float | None = 4.0  # subsample the matcher's (many) wrong proposals
    freeze_embeddings: bool = True
    layers: int | None = None  # keep only the encoder's first N layers: N/12 of the cost, for CPU budgets
    max_minutes: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class FilterExample:
    window: str
    concept_name: str
    label: int


def propose(linker: DocumentLinker, documents: Sequence[Document]) -> list[list[Proposal]]:
    proposals = []
    for batch in batched(documents, _PROPOSE_BATCH):
        proposals += linker.proposals(batch)
    return proposals


def filter_examples(linker: DocumentLinker, documents: Sequence[Document], resolve: Callable[[str], str | None],
                    window: int) -> list[FilterExample]:
    gold = in_kb_gold(documents, resolve)
    return [FilterExample(filter_window(document.text, p.start, p.end, window), p.candidates[0].name,
                          int(p.candidates[0].concept_id in gold.get((document.id, p.start, p.end), ())))
            for document, found in zip(documents, propose(linker, documents)) for p in found]


def balance(examples: list[FilterExample], max_negatives_per_positive: float | None, seed: int) -> list[FilterExample]:
    positives = [e for e in examples if e.label]
    negatives = [e for e in examples if not e.label]
    if max_negatives_per_positive is None or len(negatives) <= max_negatives_per_positive * len(positives):
        return examples
    return positives + random.Random(seed).sample(negatives, int(max_negatives_per_positive * len(positives)))


def train_filter(init: str | Path, examples: Sequence[FilterExample], out: str | Path,
                 config: FilterTrainingConfig = FilterTrainingConfig(),
                 progress: Callable[[int, int, float], None] | None = None) -> ContextFilter:
    """Fine-tune a sequence classifier from the encoder checkpoint `init`; `out` is written
    atomically. `progress(step, total_steps, loss)` is called after every step."""
    if not examples:
        raise InvalidInputError("the linker proposed no span in the training documents: nothing to learn from "
                                "(are they all used for dictionary fine-tuning?)")
    if not any(e.label for e in examples) or all(e.label for e in examples):
        raise InvalidInputError("filter training needs both relevant and irrelevant proposals; "
                                "check the training documents")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    settings = FilterSettings(window=config.window, max_length=config.max_length)

    def initialise(staging: Path) -> None:
        layers = {} if config.layers is None else {"num_hidden_layers": config.layers}
        load_pretrained(init, AutoModelForSequenceClassification, frozenset({"pooler", "classifier"}),
                        num_labels=2, **layers).save_pretrained(staging)
        AutoTokenizer.from_pretrained(init, local_files_only=True).save_pretrained(staging)
        write_settings(staging, SETTINGS_FILE, settings)

    with initial_directory(out) as start:
        initialise(start)
        context_filter = ContextFilter(start)
        _fit(context_filter, examples, config, progress)
    write_directory(out, lambda staging: _save(context_filter, staging))
    return ContextFilter(out)


def _fit(
    context_filter: ContextFilter, examples: Sequence[FilterExample], config: FilterTrainingConfig, progress
) -> None:
    model = context_filter.model
    if config.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    encoded = context_filter.tokenizer([e.window for e in examples], [e.concept_name for e in examples],
                                       truncation=True, max_length=config.max_length)["input_ids"]
    items = [(ids, float(e.label)) for ids, e in zip(encoded, examples)]

    def loss_of(batch: list) -> torch.Tensor:
        logits = context_filter.relevance_logits([ids for ids, _ in batch]).float()
        labels = torch.tensor([label for _, label in batch], device=logits.device)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)

    train_epochs(model, items, loss_of, config, progress)


def _save(context_filter: ContextFilter, directory: Path) -> None:
    context_filter.model.save_pretrained(directory)
    context_filter.tokenizer.save_pretrained(directory)
    write_settings(directory, SETTINGS_FILE, context_filter.settings)


def tune_threshold(linker: DocumentLinker, documents: Sequence[Document], resolve: Callable[[str], str | None]
                   ) -> tuple[float, dict[float, float]]:
    """The keep-threshold with the best strict F1 on `documents` (ties: the lower), and the
    F1 of every threshold tried; the filter runs once, each threshold only re-resolves overlaps."""
    proposals = propose(linker, documents)
    linker.apply_filter(documents, proposals)
    gold = in_kb_gold(documents, resolve)
    gold_items = [(doc_id, start, end, ids) for (doc_id, start, end), ids in gold.items()]
    f1 = {}
    for threshold in THRESHOLD_GRID:
        predicted = [
            (document.id, p.start, p.end, p.candidates[0].concept_id)
            for document, found in zip(documents, proposals)
            for p in resolve_overlaps([p for p in found if p.filter_score >= threshold], linker.params.overlap)
        ]
        f1[threshold] = span_scores(predicted, gold_items)["strict"]["f1"]
    return max(f1, key=lambda t: (f1[t], -t)), f1


@dataclass(frozen=True)
class FittedFilter:
    """A trained filter, its threshold tuned on dev when dev documents were given, and what it saw."""

    context_filter: ContextFilter
    documents: int  # training documents used
    left_out: int  # training documents the bundle's DFT consumed (000 §4.5)
    proposals: int
    relevant: int
    trained_on: int  # proposals after balancing
    dev_f1: float | None = None


def fit_filter(linker: Linker, train: Sequence[Document], out: str | Path,
               config: FilterTrainingConfig = FilterTrainingConfig(), *, dev: Sequence[Document] = (),
               init: str | Path | None = None, progress: Callable[[int, int, float], None] | None = None
               ) -> FittedFilter:
    """The recipe of 000 §4.4: propose with `linker` on the training documents its bundle's DFT
    did not consume, label each proposal against the gold, balance, fine-tune from `init` (the
    bundle's encoder by default) into `out`, and with `dev` set the keep-threshold to the one with
    the best dev strict F1."""
    consumed = set(linker.bundle.dft_documents())
    kept = [document for document in train if document.id not in consumed]
    resolve = gold_resolver(linker.bundle.kb)
    examples = filter_examples(linker.documents, kept, resolve, config.window)
    balanced = balance(examples, config.max_negatives_per_positive, config.seed)
    trained = train_filter(init or linker.bundle.encoder().path, balanced, out, config, progress)
    dev_f1 = None
    if dev:
        threshold, f1 = tune_threshold(linker.with_options(context_filter=trained).documents, dev, resolve)
        trained.save_settings(replace(trained.settings, threshold=threshold))
        dev_f1 = f1[threshold]
    return FittedFilter(trained, len(kept), len(train) - len(kept), len(examples), sum(e.label for e in examples),
                        len(balanced), dev_f1)
