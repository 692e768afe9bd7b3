"""`Linker`: the Python API every interface (CLI, and later REST and spaCy) is a thin layer over."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from babelink.batching import batched
from babelink.detect import MentionDetector
from babelink.detect.stopwords import BoundaryStopwords, protected_words
from babelink.encoders import Encoder
from babelink.encoders.cache import CachedEncoder
from babelink.link.bundle import Bundle, load_bundle
from babelink.link.candidates import (
    Candidate,
    CandidateGenerator,
    DenseGenerator,
    HybridGenerator,
    HybridParams,
    SparseGenerator,
)
from babelink.link.documents import DocumentLinker, LinkParams
from babelink.link.mentions import LinkedDocument
from babelink.link.ngram_search import LinkedPart, ngram_search
from babelink.link.rerank import ContextFilter
from babelink.link.switching import SwitchingGenerator
from babelink.text import check_mention


class Linker:
    """Loads a bundle once and answers `normalize` queries against it."""

    #: Mentions sent to the candidate generator at once: large enough to amortise
    #: the sparse matrix products, small enough to keep memory flat on huge inputs.
    BATCH_SIZE = 1024

    def __init__(self, bundle: Bundle, generator: CandidateGenerator | None = None,
                 link_params: LinkParams | None = None, context_filter: ContextFilter | None = None,
                 detector: MentionDetector | None = None):
        self.bundle = bundle
        self.generator = generator or generator_for(bundle)
        self.link_params = link_params or LinkParams()
        self.context_filter = context_filter
        self.detector = detector
        self._document_linker: DocumentLinker | None = None

    @classmethod
    def from_bundle(cls, path: str | Path, **options) -> Linker:
        return cls(load_bundle(path), **options)

    @classmethod
    def default(cls, **options) -> Linker:
        """The embedded default bundle, built on first use (see `babelink.link.default`)."""
        from babelink.link.default import default_bundle

        return cls.from_bundle(default_bundle(), **options)

    def normalize(self, mentions: str | Sequence[str], top_k: int = 5) -> list[Candidate] | list[list[Candidate]]:
        """Ranked concepts for one mention (a list) or for each of several (a list of lists).

        Raises `InvalidInputError` for an empty, non-string or over-long mention.
        """
        if isinstance(mentions, str):
            return self.normalize([mentions], top_k)[0]
        return [candidates for _, candidates in self.normalize_stream(mentions, top_k)]

    def normalize_stream(self, mentions: Iterable[str], top_k: int = 5) -> Iterator[tuple[str, list[Candidate]]]:
        """Lazily normalise an iterable of any length, batch by batch."""
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        for batch in batched(mentions, self.BATCH_SIZE):
            yield from zip(batch, self._normalize_batch(batch, top_k))

    def link(self, text: str, lang: str | None = None, doc_id: str = "") -> LinkedDocument:
        """The concept mentions of one text, with character offsets into it."""
        return self.link_documents([(doc_id, text, lang)])[0]

    def link_documents(self, documents: Sequence[tuple[str, str, str | None]]) -> list[LinkedDocument]:
        """Link `(id, text, lang)` documents together (`lang` None: guessed from the text); a
        batch shares one search per distinct span string."""
        return self.document_linker.link(documents)

    def link_stream(self, documents: Iterable[tuple[str, str, str | None]], batch_size: int = 16
                    ) -> Iterator[LinkedDocument]:
        for batch in batched(documents, batch_size):
            yield from self.link_documents(batch)

    @property
    def document_linker(self) -> DocumentLinker:
        """Built on first use: its stop words derive from the bundle's names (`detect.stopwords`)."""
        if self._document_linker is None:
            bundles = [self.bundle] + ([self.bundle.spans] if self.bundle.spans is not None else [])
            protected = protected_words(surface for bundle in bundles for surface in bundle.names.surfaces)
            recall = self.generator if self.bundle.retriever == "sparse" else generator_for(self.bundle, retriever="sparse")
            self._document_linker = DocumentLinker(recall, self.generator, BoundaryStopwords(protected), self.link_params,
                                                   self.context_filter, self.detector)
        return self._document_linker

    def search_ngrams(self, mention: str, threshold: float, top_k: int = 5) -> list[LinkedPart]:
        """The mention's linked parts by the n-gram search loop (002 §4.4.1): the whole mention
        when its best concept scores at least `threshold`, else its best-scoring n-grams."""
        return ngram_search(self.generator, check_mention(mention), threshold, top_k)

    def _normalize_batch(self, mentions: Sequence[str], top_k: int) -> list[list[Candidate]]:
        """Each distinct string is searched once per batch: repeated mentions are common in corpora."""
        unique = list(dict.fromkeys(check_mention(mention) for mention in mentions))
        answers = dict(zip(unique, self.generator.generate(unique, top_k)))
        return [answers[mention] for mention in mentions]


def generator_for(bundle: Bundle, encoder: Encoder | None = None, retriever: str | None = None) -> CandidateGenerator:
    """The candidate generator a bundle was built for (its manifest's `retriever`, or the given
    one), behind index switching when it has a labeled-span index. Both indexes share one
    cached encoder."""
    retriever = retriever or bundle.retriever
    if retriever != "sparse":
        encoder = encoder or CachedEncoder(bundle.encoder())
    generator = _kb_generator(bundle, retriever, encoder)
    if bundle.spans is not None:
        spans = _kb_generator(bundle.spans, retriever, encoder)
        generator = SwitchingGenerator(spans, generator, bundle.manifest["spans"]["switch_threshold"])
    return generator


def _kb_generator(bundle: Bundle, retriever: str, encoder: Encoder | None) -> CandidateGenerator:
    if retriever == "sparse":
        return SparseGenerator(bundle.kb, bundle.names, bundle.sparse)
    if retriever == "dense":
        return DenseGenerator(bundle.kb, bundle.names, bundle.dense, encoder)
    return HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder,
                           HybridParams(**bundle.manifest["hybrid"]))
