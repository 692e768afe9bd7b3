"""Training the learned mention detector (002 §4.2, §5.1) on annotated documents.

Gold annotations become word-level BIO labels over `detect.tokenize` words: an annotation
labels every word it overlaps (a mention covering part of a word takes the whole word; a
discontinuous one, its extent from first to last fragment). BIO cannot nest, so an annotation
overlapping words already labelled (a nested or crossing mention) is left out: the earlier,
then longer, one is kept. The encoder starts from a checkpoint (the bundled multilingual-e5-small
by default, where 002 used SapBERT-XLMR), gets a fresh linear emission layer and CRF, and
nothing is frozen unless asked; the loss is 002 eq. 1, cross-entropy of the emissions plus
λ = 0.1 times the CRF negative log-likelihood. The fresh head (emissions and CRF transitions)
learns at its own, higher rate: at the encoder's 5e-5 the transitions barely leave zero in a few
hundred steps, and Viterbi then cuts mentions into one-word pieces (NCBI-disease dev: strict F1
0.50 against partial 0.87, BENCHMARKS.md). `as_type` relabels every annotation with one type
when the corpus's types do not matter downstream (linking): NCBI-disease's four types
(SpecificDisease, Modifier…) split one tagger's decision four ways, and a type change inside a
mention breaks it in two.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from babelink.batching import batched
from babelink.checkpoint import load_pretrained
from babelink.detect import MentionDetector
from babelink.detect.ner import NerDetector, NerSettings, NerTagger, bio_labels, save_tagger
from babelink.detect.tokenize import Token, tokenize
from babelink.errors import InvalidInputError
from babelink.eval.metrics import span_scores
from babelink.formats.document import Annotation, Document
from babelink.fsutil import initial_directory, write_directory
from babelink.train.optim import train_epochs

#: The type of annotations whose reader gives none.
UNTYPED = "Mention"
_EVALUATE_BATCH = 16


@dataclass(frozen=True)
class NerTrainingConfig:
    types: tuple[str, ...] | None = None  # train on annotations of these types only
    learning_rate: float = 5e-5
    head_learning_rate: float = 1e-3  # emission layer and CRF
    as_type: str | None = None  # relabel every (selected) annotation with this type
    weight_decay: float = 0.01
    epochs: int = 3
    batch_size: int = 16
    max_length: int = 256
    warmup_ratio: float = 0.1
    crf_weight: float = 0.1  # λ in Loss = Loss_CE + λ·Loss_NLL (002 eq. 1)
    freeze_embeddings: bool = False
    max_minutes: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class NerExample:
    words: tuple[str, ...]
    tags: tuple[int, ...]


def selected(annotations: Iterable[Annotation], types: Collection[str] | None) -> list[Annotation]:
    return [a for a in annotations if types is None or a.type in types]


def bio_tags(document: Document, types: Collection[str] | None = None) -> tuple[list[Token], list[str]]:
    """The document's words and their BIO labels (see the module docstring)."""
    tokens = tokenize(document.text)
    starts, ends = [t.start for t in tokens], [t.end for t in tokens]
    tags = ["O"] * len(tokens)
    for annotation in sorted(selected(document.annotations, types), key=lambda a: (a.start, -a.end)):
        first, end = bisect_right(ends, annotation.start), bisect_left(starts, annotation.end)
        if first < end and all(tag == "O" for tag in tags[first:end]):
            kind = annotation.type or UNTYPED
            tags[first:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - first - 1)
    return tokens, tags


def ner_loss(model: NerTagger, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor,
             crf_weight: float) -> torch.Tensor:
    cross_entropy = torch.nn.functional.cross_entropy(emissions[mask], tags[mask])
    return cross_entropy - crf_weight * model.crf.log_likelihood(emissions, tags, mask).mean()


def train_ner(init: str | Path, documents: Sequence[Document], out: str | Path,
              config: NerTrainingConfig = NerTrainingConfig(),
              progress: Callable[[int, int, float], None] | None = None) -> NerDetector:
    """Fine-tune a tagger from the encoder checkpoint `init`; `out` is written atomically.
    `progress(step, total_steps, loss)` is called after every step."""
    if config.as_type is not None:
        documents = [
            replace(
                d, annotations=tuple(replace(a, type=config.as_type) for a in selected(d.annotations, config.types))
            )
            for d in documents
        ]
        config = replace(config, types=None)
    types = sorted({a.type or UNTYPED for d in documents for a in selected(d.annotations, config.types)})
    if not types:
        raise InvalidInputError("no annotations to learn from"
                                + (f" of types {', '.join(config.types)}" if config.types else ""))
    from transformers import AutoTokenizer

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    settings = NerSettings(labels=bio_labels(types), max_length=config.max_length)

    def initialise(staging: Path) -> None:
        model = NerTagger(load_pretrained(init), settings.labels)
        save_tagger(staging, AutoTokenizer.from_pretrained(init, local_files_only=True), model, settings)

    with initial_directory(out) as start:
        initialise(start)
        detector = NerDetector(start)
        _fit(detector, examples(detector, documents, config.types), config, progress)
    write_directory(out, detector.save)
    return NerDetector(out)


def examples(detector: NerDetector, documents: Iterable[Document], types: Collection[str] | None) -> list[NerExample]:
    """One example per window of each document (the windows the detector tags at inference)."""
    label_ids = {label: number for number, label in enumerate(detector.settings.labels)}
    found = []
    for document in documents:
        tokens, tags = bio_tags(document, types)
        found += [NerExample(tuple(t.text for t in tokens[first:end]), tuple(label_ids[tag] for tag in tags[first:end]))
                  for first, end in detector.windows(document.text, tokens)]
    return found


def _fit(detector: NerDetector, training: Sequence[NerExample], config: NerTrainingConfig, progress) -> None:
    model = detector.model
    if config.freeze_embeddings:
        model.encoder.get_input_embeddings().weight.requires_grad_(False)

    def loss_of(batch: list[NerExample]) -> torch.Tensor:
        emissions, mask = detector.emissions([example.words for example in batch])
        tags = torch.zeros(mask.shape, dtype=torch.long, device=mask.device)
        for row, example in enumerate(batch):
            tags[row, : len(example.tags)] = torch.tensor(example.tags)
        return ner_loss(model, emissions, tags, mask, config.crf_weight)

    train_epochs(model, training, loss_of, config, progress,
                 lambda name: config.learning_rate if name.startswith("encoder.") else config.head_learning_rate)


def evaluate_ner(
    detector: MentionDetector, documents: Iterable[Document], types: Collection[str] | None = None
) -> dict:
    """Span-level micro precision, recall and F1 of the detected spans against the annotations
    (of `types`, when given), whatever their type: `span_scores` with one dummy concept."""
    predicted, gold = [], []
    for batch in batched(documents, _EVALUATE_BATCH):
        for document, spans in zip(batch, detector.detect([d.text for d in batch])):
            predicted += [(document.id, start, end, "") for start, end in spans]
            gold += [(document.id, a.start, a.end, ("",)) for a in selected(document.annotations, types)]
    return span_scores(predicted, gold)
