"""Linking with the dual encoder: one forward pass per segment detects and links every mention
(004 §3.3–3.4), or disambiguates given spans (the entity-disambiguation setting of 004 §4).

Spans whose mention probability p(m) (Eq. 4) exceeds the model's γ are mentions; each is linked
to the concept of its nearest KB name by inner product (Eq. 3), searched in the bundle's FAISS
index with any name filter applied inside the search. With the model's `sparse_weight` above 0
(chosen on dev with γ), a name's score is instead `(1 − w) · cosine + w · TF-IDF cosine of the
span text` over the union of both searches (`HybridGenerator.rank`), the text's defined
abbreviations expanded: the exact-string evidence a contextual vector blurs, at no encoder cost.
Overlapping mentions keep the likelier one (`detect.overlaps`, "best"). A mention's
`probability` is the model's own estimate that it is a mention of that concept: p(m) times the
softmax, at the training scale, of the scores of the ranked concepts.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from babelink.abbreviations import abbreviation_map
from babelink.bundle.store import Bundle
from babelink.cancel import check as check_cancelled
from babelink.detect.overlaps import resolve_overlaps
from babelink.detect.tokenize import Token, tokenize
from babelink.dual.model import DualModel
from babelink.formats.document import Document
from babelink.lang import check_language
from babelink.link.documents import LinkParams, check_document, split_segments
from babelink.link.mentions import LinkedDocument, LinkedMention
from babelink.link.modifiers import concept_types, is_modifier
from babelink.retrieve.candidate import Candidate
from babelink.retrieve.filters import NameFilter, allowed_names
from babelink.retrieve.generators import DenseGenerator, HybridGenerator, HybridParams
from babelink.text import capitals_in_context, normalize_name, written_in_capitals

DETECTOR = "dual"


@dataclass(frozen=True)
class Segment:
    """A window of a document's words; `offset` is where its text piece starts in the document."""

    document: int
    offset: int
    text: str
    tokens: tuple[Token, ...]


@dataclass
class Proposal:
    """A span above the mention threshold; offsets into the whole document."""

    start: int
    end: int
    text: str
    candidates: list[Candidate]
    score: float  # p(m): what overlap resolution compares


@dataclass(frozen=True)
class SpanHit:
    """A span above the mention threshold before ranking: where it is, the segment text it was
    read in (where its abbreviations are defined), p(m) and its mention vector."""

    document: int
    start: int
    text: str
    context: str
    p_mention: float
    vector: np.ndarray = field(repr=False)


def document_segments(model: DualModel, documents: Sequence[Document]) -> list[Segment]:
    """The encoder windows of every document (pieces of about 20k characters, cut at barriers,
    then windows of at most `max_length` sub-tokens)."""
    found = []
    for number, document in enumerate(documents):
        for offset, piece in split_segments(check_document(document.id, document.text)):
            tokens = tokenize(piece)
            found += [Segment(number, offset, piece, tuple(tokens[first:end]))
                      for first, end in model.segments(piece, tokens)]
    return found


def word_range(tokens: Sequence[Token], start: int, end: int) -> tuple[int, int] | None:
    """(first, last) indexes of the words overlapping characters start–end (None: none do)."""
    first = bisect_right(tokens, start, key=lambda token: token.end)
    last = bisect_left(tokens, end, key=lambda token: token.start) - 1
    return (first, last) if first <= last else None


class DualLinker:
    """`link(documents)` like `DocumentLinker`, with the dual encoder as detector and ranker."""

    def __init__(self, model: DualModel, bundle: Bundle, params: LinkParams | None = None,
                 name_filter: NameFilter | None = None, threshold: float | None = None):
        model.check_bundle(bundle)
        self.model, self.bundle, self.kb = model, bundle, bundle.kb
        self.dense = bundle.dense.searchable(str(model.device))  # every name, a lazy bundle's encoded once
        self.params = params or LinkParams()
        self.threshold = model.settings.threshold if threshold is None else threshold
        self._allowed = allowed_names(bundle.kb, bundle.names, name_filter) if name_filter else None
        self._rankers: dict[float, DenseGenerator | HybridGenerator] = {}
        self.concept_types = concept_types(bundle.kb)

    def link(self, documents: Sequence[Document]) -> list[LinkedDocument]:
        return [LinkedDocument(document.id, document.text, tuple(
            LinkedMention(p.start, p.end, p.text, tuple(p.candidates), detector=DETECTOR)
            for p in resolve_overlaps(found, "best")),
            lang=check_language(document.lang, f"document {document.id!r}: lang"))
            for document, found in zip(documents, self.ranked(self.span_hits(documents, self.threshold),
                                                              len(documents)))]

    def span_hits(self, documents: Sequence[Document], threshold: float,
                  max_hits: int | None = None) -> list[SpanHit] | None:
        """Every span with p(m) above `threshold`, one encoder pass per segment (dev tuning reads
        them once and ranks them for several fusion weights); None as soon as there are more than
        `max_hits` (a barely trained model finds most spans above a low threshold: millions on a
        dev set, each with its vector)."""
        hits: list[SpanHit] = []
        for batch in self._batches(document_segments(self.model, documents)):
            check_cancelled()
            with torch.inference_mode():
                encoded = self.model.encode([[token.text for token in segment.tokens] for segment in batch])
                spans = self.model.score_spans(encoded)
                probabilities = torch.sigmoid(spans.logits).masked_fill(~spans.valid, 0.0)
                rows, positions = (probabilities > threshold).nonzero(as_tuple=True)
                first, last = spans.starts[positions], spans.ends[positions]
                vectors = self.model.mention_vectors(encoded, rows, first, last).cpu().numpy()
            for row, a, b, p_mention, vector in zip(rows.tolist(), first.tolist(), last.tolist(),
                                                    probabilities[rows, positions].tolist(), vectors):
                segment = batch[row]
                start, end = segment.tokens[a].start, segment.tokens[b].end
                text = segment.text[start:end]
                hits.append(SpanHit(segment.document, segment.offset + start, text, segment.text, p_mention, vector))
            if max_hits is not None and len(hits) > max_hits:
                return None
        return hits

    def ranked(self, hits: Sequence[SpanHit], documents: int,
               sparse_weight: float | None = None) -> list[list[Proposal]]:
        """Per document, the hits whose best concept is linked (probability and concept type
        allowing), ranked with `sparse_weight` (None: the model's)."""
        found: list[list[Proposal]] = [[] for _ in range(documents)]
        if not hits:
            return found
        ranked = self._rank([(hit.text, hit.context) for hit in hits], np.stack([hit.vector for hit in hits]),
                            sparse_weight)
        for hit, candidates in zip(hits, ranked):
            candidates = self._with_probabilities(candidates, hit.p_mention)
            if (candidates and (candidates[0].probability or 0.0) >= self.params.min_probability
                    and not is_modifier(candidates[0].concept_id, self.concept_types, self.params.modifier_types)):
                found[hit.document].append(
                    Proposal(hit.start, hit.start + len(hit.text), hit.text, candidates, hit.p_mention))
        return found

    def _searched(self, text: str, context: str) -> str:
        """The text a span's TF-IDF search reads: the long form when `context` defines it as an abbreviation."""
        return abbreviation_map(context).get(text, text) if self.params.resolve_abbreviations else text

    def _rank(self, spans: list[tuple[str, str]], vectors: np.ndarray,
              sparse_weight: float | None = None) -> list[list[Candidate]]:
        """Ranked concepts of mention vectors of (text, context) spans: by their cosines alone (the
        FAISS search) at w = 0, else fused with the TF-IDF cosines of the texts, abbreviations
        expanded (`sparse_weight` None: the model's w)."""
        capitals = [capitals_in_context(text, context, abbreviation_map(context) if written_in_capitals(context)
                                        and self.params.resolve_abbreviations else frozenset())
                    for text, context in spans]
        weight = self.model.settings.sparse_weight if sparse_weight is None else sparse_weight
        if weight not in self._rankers:
            self._rankers[weight] = (
                DenseGenerator(self.kb, self.bundle.names, self.dense, None, allowed=self._allowed)
                if weight == 0 else
                HybridGenerator(self.kb, self.bundle.names, self.bundle.sparse, self.dense, None,
                                HybridParams(dense_weight=1.0 - weight), allowed=self._allowed))
        ranker = self._rankers[weight]
        if weight == 0:
            return ranker.search(vectors, self.params.top_k, capitals)
        searched = [normalize_name(self._searched(text, context)) for text, context in spans]
        return ranker.rank(searched, vectors, self.params.top_k, capitals)

    def disambiguate(self, documents: Sequence[Document]) -> list[list[list[Candidate]]]:
        """Ranked concepts for each annotation of each document (its span given, 004 §4), all the
        mentions of a segment in one pass; an annotation is read in the segment where it starts."""
        answers: list[list[list[Candidate]]] = [[[] for _ in d.annotations] for d in documents]
        placed: dict[Segment, list[tuple[int, int, int]]] = {}  # (annotation number, first word, last word)
        for segment in document_segments(self.model, documents):
            low, high = segment.offset + segment.tokens[0].start, segment.offset + segment.tokens[-1].end
            for number, annotation in enumerate(documents[segment.document].annotations):
                if not low <= annotation.start < high:
                    continue
                words = word_range(segment.tokens, annotation.start - segment.offset, annotation.end - segment.offset)
                if words is not None:
                    placed.setdefault(segment, []).append((number, *words))
        for batch in self._batches(list(placed)):
            check_cancelled()
            entries = [(row, *entry) for row, segment in enumerate(batch) for entry in placed[segment]]
            rows, numbers, first, last = zip(*entries)
            with torch.inference_mode():
                encoded = self.model.encode([[token.text for token in segment.tokens] for segment in batch])
                vectors = self.model.mention_vectors(
                    encoded, *(torch.tensor(column, device=self.model.device) for column in (rows, first, last)))
            texts = [documents[batch[row].document].annotations[number].text for row, number in zip(rows, numbers)]
            ranked = self._rank([(text, batch[row].text) for text, row in zip(texts, rows)], vectors.cpu().numpy())
            for row, number, candidates in zip(rows, numbers, ranked):
                answers[batch[row].document][number] = self._with_probabilities(candidates, 1.0)
        return answers

    def _with_probabilities(self, candidates: list[Candidate], p_mention: float) -> list[Candidate]:
        if not candidates:
            return candidates
        logits = self.model.settings.scale * np.array([c.score for c in candidates])
        shares = np.exp(logits - logits.max())
        shares /= shares.sum()
        return [replace(c, probability=float(p_mention * share)) for c, share in zip(candidates, shares)]

    def _batches(self, segments: list[Segment]) -> list[list[Segment]]:
        """Segments of similar length together, so a batch pads little."""
        ordered = sorted(segments, key=lambda segment: -len(segment.tokens))
        size = self.model.settings.batch_size
        return [ordered[start: start + size] for start in range(0, len(ordered), size)]
