"""`Linker`: the Python API; the CLI, the REST service, spaCy and the batch engines are thin layers over it.

It sits above every package it composes (`bundle`, `retrieve`, `link`, `dual`): `generator_for`
turns a bundle's manifest into its candidate generator here, so that no lower package needs to
know what a bundle is made of.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from babelink.batching import batched
from babelink.bundle.store import Bundle, load_bundle_with_encoder
from babelink.cancel import check as check_cancelled
from babelink.detect import MentionDetector
from babelink.detect.stopwords import BoundaryStopwords, ProtectedByLanguage
from babelink.encoders import Encoder
from babelink.errors import BundleError, InvalidInputError
from babelink.formats.document import Document
from babelink.lang import check_language
from babelink.link.context_filter import ContextFilter
from babelink.link.documents import DocumentLinker, LinkParams, bundle_link_params, check_linkable
from babelink.link.mentions import LinkedDocument
from babelink.link.modifiers import concept_types
from babelink.link.ngram_search import LinkedPart, ngram_search
from babelink.link.records import NormalizedMention
from babelink.link.settings import with_settings
from babelink.retrieve.calibration import (
    CALIBRATION_FILE,
    Calibration,
    Calibrator,
    check_probability,
    ranking_depth,
)
from babelink.retrieve.candidate import (
    Candidate,
    CandidateGenerator,
    check_top_k,
    code_vocabularies,
    vocabulary_name,
)
from babelink.retrieve.filters import AllowedNames, NameFilter, allowed_concepts, allowed_names, concepts_only
from babelink.retrieve.generators import DenseGenerator, HybridGenerator, HybridParams, SparseGenerator
from babelink.retrieve.switching import SwitchingGenerator
from babelink.retrieve.translation import TranslatingGenerator
from babelink.text import comma_list, holds_capitals, normalize_name, normalized_mention

if TYPE_CHECKING:
    from babelink.dual.linker import DualLinker
    from babelink.dual.model import DualModel

_LINK_PARAMS = frozenset(field.name for field in fields(LinkParams))
#: Filtered linkers a linker keeps (`Linker.filtered`); each holds its compiled masks.
MAX_FILTERED = 16
#: Guards every linker's cache of filtered linkers: a service builds them in its worker threads.
_FILTERED_LOCK = threading.Lock()


class _BundleLinking:
    """What document linking derives from a whole bundle, whatever the name filter: built on
    first use and shared by a linker and its filtered variants (a service with several filters
    counts the protected stop words once)."""

    def __init__(self, bundle: Bundle):
        self.bundle = bundle

    @cached_property
    def stopwords(self) -> BoundaryStopwords:
        """Stop words that protect the words opening or closing the bundle's names in the text's language."""
        parts = [self.bundle] + ([self.bundle.spans] if self.bundle.spans is not None else [])
        return BoundaryStopwords(ProtectedByLanguage(
            pair for part in parts
            for pair in zip(part.kb.names.column("name").to_pylist(), part.kb.names.column("lang").to_pylist())))

    @cached_property
    def concept_types(self) -> dict[str, frozenset[str]]:
        return concept_types(self.bundle.kb)

    @cached_property
    def code_vocabularies(self) -> frozenset[str]:
        concepts = self.bundle.kb.concepts
        return code_vocabularies(concepts.column("concept_id").to_pylist(), concepts.column("xrefs").to_pylist())


class Linker:
    """A loaded bundle answering `normalize` (mention → concepts) and `link` (text → mentions).

    Mentions and texts are checked and normalised here, once; the retrievers below take
    normalised strings. A `Linker` is immutable: `with_options` gives one with another filter,
    detector or link parameters that shares the loaded bundle, retrievers and stop words.
    Document linking is set up on first use (its stop words derive from every KB name), so a
    linker that only normalises never pays for it.
    """

    #: Mentions sent to the candidate generator at once: large enough to amortise
    #: the sparse matrix products, small enough to keep memory flat on huge inputs.
    BATCH_SIZE = 1024

    def __init__(self, bundle: Bundle, generator: CandidateGenerator | None = None,
                 link_params: LinkParams | None = None, context_filter: ContextFilter | None = None,
                 detector: MentionDetector | None = None, *, calibrated: bool = True,
                 name_filter: NameFilter | None = None, encoder: Encoder | None = None,
                 model: DualModel | None = None, _linking: _BundleLinking | None = None):
        if model is not None:
            if detector is not None or context_filter is not None:
                raise InvalidInputError("a dual encoder detects and links by itself: no NER detector or filter with it")
            model.check_bundle(bundle)
        self.bundle = bundle
        self._linking = _linking or _BundleLinking(bundle)
        self.model = model
        self.calibrated = calibrated
        self.name_filter = name_filter or None
        if generator is None and bundle.dense is not None:
            encoder = bundle.query_encoder(encoder)
        self.encoder = encoder
        self.generator = generator or generator_for(bundle, encoder, name_filter=self.name_filter)
        self._filtered: dict[NameFilter, Linker] = {}
        self.link_params = link_params or bundle_link_params(bundle.manifest)
        self.context_filter = context_filter
        self.detector = detector

    @classmethod
    def open(cls, bundle: str | Path | None = None, *, filter: str | Path | ContextFilter | None = None,
             ner: str | Path | MentionDetector | None = None, name_filter: NameFilter | None = None,
             model: str | Path | DualModel | None = None, runtime: str = "torch", **params) -> Linker:
        """The linker of the bundle at `bundle` (None: the embedded default, built on first use),
        with an optional contextual filter and learned mention detector, or instead a dual encoder
        `model` that detects and links in one pass (directories or loaded models), searching only
        the names `name_filter` allows; its encoder runs in `runtime` (`onnx` starts without torch,
        `torch` is faster on large inputs); `params` are `LinkParams` fields (`link_threshold=0.9`, …)."""
        unknown = set(params) - _LINK_PARAMS
        if unknown:
            raise TypeError(f"unknown link parameters: {', '.join(sorted(unknown))}")
        if isinstance(model, str | Path):
            from babelink.dual.artefact import model_path
            from babelink.dual.model import DualModel

            model = DualModel(model_path(model))
        if bundle is None:
            from babelink.bundle.default import default_bundle
            from babelink.encoders import DEFAULT

            against = (model.settings.entity_encoder.get("name") if model is not None else None) or DEFAULT
            if against != DEFAULT:  # refused now, not after the default bundle is built
                raise BundleError(f"the one-pass model {model.path} links against the name vectors of encoder "
                                  f"{against!r}, the embedded default bundle has the bundled encoder's: give "
                                  f"--bundle, a bundle built with --encoder {against}")
            bundle = default_bundle()
        if isinstance(filter, str | Path):
            filter = ContextFilter(filter)
        if isinstance(ner, str | Path):
            from babelink.detect.ner import NerDetector

            ner = NerDetector(ner)
        loaded, encoder = load_bundle_with_encoder(bundle, runtime)
        return cls(loaded, encoder=encoder, link_params=bundle_link_params(loaded.manifest, **params),
                   context_filter=filter, detector=ner, name_filter=name_filter, model=model)

    def with_options(self, **changes) -> Linker:
        """This linker with other `link_params`, `context_filter` or `detector`; the bundle,
        retrievers and stop words are shared, not reloaded."""
        current = {"link_params": self.link_params, "context_filter": self.context_filter, "detector": self.detector}
        unknown = set(changes) - set(current)
        if unknown:
            raise TypeError(f"with_options takes {', '.join(current)}, not {', '.join(sorted(unknown))}")
        return Linker(self.bundle, self.generator, **{**current, **changes}, calibrated=self.calibrated,
                      name_filter=self.name_filter, encoder=self.encoder, model=self.model, _linking=self._linking)

    def filtered(self, name_filter: NameFilter | None) -> Linker:
        """This linker searching only the names `name_filter` allows (types, sources, languages;
        `retrieve.filters`), sharing the bundle, encoder and calibrator; built once per filter."""
        if not name_filter or name_filter == self.name_filter:
            return self
        with _FILTERED_LOCK:
            if name_filter not in self._filtered:
                if len(self._filtered) >= MAX_FILTERED:  # filters may come from service clients: keep the newest
                    del self._filtered[next(iter(self._filtered))]
                self._filtered[name_filter] = Linker(
                    self.bundle, link_params=self.link_params, context_filter=self.context_filter,
                    detector=self.detector, calibrated=self.calibrated, name_filter=name_filter, encoder=self.encoder,
                    model=self.model, _linking=self._linking)
            return self._filtered[name_filter]

    @cached_property
    def documents(self) -> DocumentLinker | DualLinker:
        """The document linker: the dual encoder's when there is one; else the sparse retriever as
        high-recall matcher, `generator` as ranker, stop words that protect the words opening or
        closing the bundle's names in the text's language."""
        if self.model is not None:
            from babelink.dual.linker import DualLinker

            return DualLinker(self.model, self.bundle, self.link_params, self.name_filter)
        sparse = self.bundle.retriever == "sparse"
        recall = self.generator if sparse else generator_for(self.bundle, retriever="sparse",
                                                             name_filter=self.name_filter)
        linking = self._linking
        return DocumentLinker(recall, self.generator, linking.stopwords, self.link_params, self.context_filter,
                              self.detector, self.calibration, linking.concept_types, self.bundle.languages)

    @cached_property
    def provenance(self) -> dict:
        """What each linked document says about where it came from: the bundle's provenance and the
        id of this linker's settings (`link.settings`)."""
        return with_settings(self.bundle.provenance, self.link_params, name_filter=self.name_filter,
                             detector=self.detector, context_filter=self.context_filter, model=self.model,
                             calibrated=self.calibrated)

    @cached_property
    def calibration(self) -> Calibration | None:
        """The calibrator (the bundle's own `calibration.json`, else the one shipped for its
        encoder, `Calibrator.shipped`) bound to the bundle's name scripts; None for a linker made
        `calibrated=False` (to gather the raw scores a calibrator is trained on)."""
        if not self.calibrated:
            return None
        if CALIBRATION_FILE in self.bundle.manifest["files"]:
            calibrator = Calibrator.load(self.bundle.path / CALIBRATION_FILE)
        else:
            calibrator = Calibrator.shipped(self.bundle.encoder_name)
        return Calibration(calibrator, self.bundle.scripts)

    @property
    def languages(self) -> frozenset[str]:
        """The languages the bundle reads: those of its names and of its translation lexicons."""
        return self.bundle.languages

    def checked_vocabularies(self, wanted: Iterable[str]) -> tuple[str, ...]:
        """`wanted` vocabularies (each a name or comma-separated names), in order, checked against
        those the bundle's concepts have codes in: one it has none in is an `InvalidInputError`
        listing them."""
        wanted = tuple(dict.fromkeys(map(vocabulary_name, comma_list(wanted))))
        if not wanted:
            raise InvalidInputError("no vocabulary named: give codes such as HP,ICD10 "
                                    f"(the bundle's: {', '.join(sorted(self._linking.code_vocabularies))})")
        unknown = set(wanted) - self._linking.code_vocabularies
        if unknown:
            raise InvalidInputError(f"no concept of the bundle has a code in {', '.join(sorted(unknown))}; "
                                    f"its vocabularies: {', '.join(sorted(self._linking.code_vocabularies))}")
        return wanted

    def normalize(self, mentions: str | Sequence[str], top_k: int = 5, lang: str | None = None,
                  min_probability: float = 0.0) -> list[Candidate] | list[list[Candidate]]:
        """Ranked concepts for one mention (a list) or for each of several (a list of lists),
        each with its calibrated `probability` of being the right one; those below
        `min_probability` are left out, so a mention may get none (NIL). `lang` (ISO 639-1 or
        UMLS LAT) is the mentions' language where known; a bundle with translation lexicons
        guesses it otherwise.

        Raises `InvalidInputError` for an empty, non-string or over-long mention.
        """
        if isinstance(mentions, str):
            return self.normalize([mentions], top_k, lang, min_probability)[0]
        if not isinstance(mentions, Iterable) or isinstance(mentions, (bytes, bytearray)):  # bytes: decode first
            raise InvalidInputError(f"mentions must be a string or a list of strings, got {type(mentions).__name__}")
        return [candidates for _, candidates in self.normalize_stream(mentions, top_k, lang, min_probability)]

    def normalize_stream(self, mentions: Iterable[str], top_k: int = 5, lang: str | None = None,
                         min_probability: float = 0.0) -> Iterator[tuple[str, list[Candidate]]]:
        """Lazily normalise an iterable of any length, batch by batch: `(mention, candidates)`;
        an unusable mention raises `InvalidInputError`."""
        for result in self.normalize_each(mentions, top_k, lang, min_probability):
            if result.error is not None:
                raise InvalidInputError(result.error)
            yield result.mention, result.candidates

    def normalize_each(self, mentions: Iterable[str], top_k: int = 5, lang: str | None = None,
                       min_probability: float = 0.0, ngram_threshold: float | None = None
                       ) -> Iterator[NormalizedMention]:
        """One `NormalizedMention` per mention, in order: its candidates, or why it cannot be
        searched (the only place a mention is validated and normalised). With `ngram_threshold`,
        a mention whose best concept scores below it also gets its linked n-grams (002 §4.4.1),
        decided from the candidates it already has and calibrated as they are."""
        check_top_k(top_k)
        check_probability(min_probability)
        lang = check_language(lang)
        for batch in batched(mentions, self.BATCH_SIZE):
            check_cancelled()
            keys: list[tuple[str, bool] | str] = []  # (normalised, in capitals), or the error
            for mention in batch:
                try:
                    keys.append((normalized_mention(mention), holds_capitals(mention)))
                except InvalidInputError as error:
                    keys.append(str(error))
            found = self._normalize_keys([key for key in dict.fromkeys(keys) if isinstance(key, tuple)], top_k, lang)
            for mention, key in zip(batch, keys):
                if isinstance(key, str):
                    yield NormalizedMention(mention, [], error=key)
                    continue
                candidates = found[key]
                parts = None
                if ngram_threshold is not None and (not candidates or candidates[0].score < ngram_threshold):
                    parts = self._ngram_parts(mention, candidates, ngram_threshold, top_k, lang, min_probability)
                yield NormalizedMention(mention, _at_least(candidates, min_probability), parts)

    def link(self, text: str, lang: str | None = None, doc_id: str = "") -> LinkedDocument:
        """The concept mentions of one text, with character offsets into it."""
        return self.link_documents([Document(doc_id, text, lang=lang)])[0]

    def link_documents(self, documents: Sequence[Document]) -> list[LinkedDocument]:
        """Link documents together (`lang` None: guessed from the text); a batch shares one
        search per distinct span string. Each carries the linker's `provenance`."""
        return [replace(linked, provenance=self.provenance) for linked in self.documents.link(documents)]

    def link_stream(self, documents: Iterable[Document], batch_size: int = 16,
                    skip_invalid: bool = False) -> Iterator[LinkedDocument]:
        """Linked documents in input order. A document that cannot be linked (a lone surrogate, an
        unknown language, too long) is an error naming where it was read; with `skip_invalid`, a
        `LinkedDocument` carrying that error instead, and the others are linked."""
        for batch in batched(documents, batch_size):
            check_cancelled()
            errors = {}
            for position, document in enumerate(batch):
                try:
                    check_linkable(document)
                except InvalidInputError as error:
                    if not skip_invalid:
                        raise
                    errors[position] = str(error)
            linked = iter(self.link_documents([d for i, d in enumerate(batch) if i not in errors]))
            for position, document in enumerate(batch):
                yield (LinkedDocument(document.id, document.text, error=errors[position]) if position in errors
                       else next(linked))

    def disambiguate(self, documents: Sequence[Document], top_k: int = 5) -> list[list[list[Candidate]]]:
        """Ranked concepts for every annotation of every document, its span given: the dual
        encoder reads each segment once for all its mentions (entity disambiguation, 004 §4)."""
        check_top_k(top_k)
        if self.model is None:
            raise InvalidInputError("disambiguating annotated spans in context needs a dual encoder: "
                                    "Linker.open(…, model=DIR)")
        from babelink.dual.linker import DualLinker

        linker = DualLinker(self.model, self.bundle, replace(self.link_params, top_k=top_k), self.name_filter)
        return linker.disambiguate(documents)


    def _normalize_keys(self, keys: list[tuple[str, bool]], top_k: int,
                        lang: str | None) -> dict[tuple[str, bool], list[Candidate]]:
        """The calibrated candidates of each distinct (normalised string, in capitals): a batch
        searches each once, repeats being common in corpora."""
        found = self.generator.generate([text for text, _ in keys], ranking_depth(top_k, self.calibration),
                                        [capitals for _, capitals in keys], [lang] * len(keys))
        return {key: self._calibrated(key[0], candidates, top_k) for key, candidates in zip(keys, found)}

    def _calibrated(self, normalized: str, candidates: list[Candidate], top_k: int) -> list[Candidate]:
        if self.calibration is None:
            return candidates[:top_k]
        return self.calibration.annotate("normalize", normalized, candidates)[:top_k]

    def _ngram_parts(self, mention: str, candidates: list[Candidate], threshold: float, top_k: int,
                     lang: str | None, min_probability: float) -> list[LinkedPart]:
        """The mention's linked n-grams, edged by the stop words of its language where known (as
        `link` edges its spans), each part's candidates calibrated; a part left with none above
        `min_probability` is no part."""
        depth = ranking_depth(top_k, self.calibration)
        edges = self._linking.stopwords.for_language(lang)
        parts = ngram_search(self.generator, mention, threshold, depth, edges, lang, candidates)
        calibrated = (replace(part, candidates=_at_least(self._calibrated(normalize_name(part.text), part.candidates,
                                                                          top_k), min_probability))
                      for part in parts)
        return [part for part in calibrated if part.candidates]


def _at_least(candidates: list[Candidate], min_probability: float) -> list[Candidate]:
    if min_probability <= 0:
        return candidates
    return [candidate for candidate in candidates if (candidate.probability or 0.0) >= min_probability]


def generator_for(bundle: Bundle, encoder: Encoder | None = None, retriever: str | None = None,
                  name_filter: NameFilter | None = None) -> CandidateGenerator:
    """The candidate generator a bundle was built for (its manifest's `retriever`, or the given
    one), behind index switching when it has a labeled-span index, and searching through English
    renderings too when it has translation lexicons. Both indexes share one cached encoder
    (`Bundle.query_encoder`). A `name_filter` restricts the names searched (`retrieve.filters`);
    in the labeled-span index, to the spans of the concepts the filter allows."""
    retriever = retriever or bundle.retriever
    if retriever != "sparse":
        encoder = bundle.query_encoder(encoder)
    allowed = allowed_names(bundle.kb, bundle.names, name_filter) if name_filter else None
    generator = _kb_generator(bundle, retriever, encoder, allowed)
    if bundle.spans is not None:
        spans_allowed = None if allowed is None else concepts_only(
            bundle.spans.kb, bundle.spans.names, allowed_concepts(bundle.kb, bundle.names, allowed))
        spans = _kb_generator(bundle.spans, retriever, encoder, spans_allowed)
        generator = SwitchingGenerator(spans, generator, bundle.manifest["spans"]["switch_threshold"])
    if bundle.renderer is not None:
        generator = TranslatingGenerator(generator, bundle.renderer, bundle.names)
    return generator


def _kb_generator(bundle: Bundle, retriever: str, encoder: Encoder | None,
                  allowed: AllowedNames | None) -> CandidateGenerator:
    if retriever not in KB_GENERATORS:
        raise InvalidInputError(f"retriever must be one of {', '.join(KB_GENERATORS)}, got {retriever!r}")
    return KB_GENERATORS[retriever](bundle, encoder, allowed)


#: A bundle's `retriever` → its generator over one KB's indexes (the KB's own or the labeled spans').
KB_GENERATORS = {
    "sparse": lambda bundle, encoder, allowed: SparseGenerator(bundle.kb, bundle.names, bundle.sparse,
                                                               allowed=allowed),
    "dense": lambda bundle, encoder, allowed: DenseGenerator(bundle.kb, bundle.names, bundle.dense, encoder,
                                                             allowed=allowed),
    "hybrid": lambda bundle, encoder, allowed: HybridGenerator(
        bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder, HybridParams(**bundle.manifest["hybrid"]),
        allowed=allowed),
}
