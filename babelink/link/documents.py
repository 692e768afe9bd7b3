"""End-to-end linking of running text: span enumeration → high-recall matcher → ranking →
overlap resolution (000 §4.2–4.3).

Every span of up to k words that neither starts nor ends with a stop word is a candidate
mention. The high-recall matcher keeps the spans whose best char n-gram TF-IDF cosine reaches
`recall_threshold` (cheap: one sparse product for all spans of a batch); only those are ranked
by the bundle's own generator (hybrid, with index switching when the bundle has labeled spans),
and a span whose best concept reaches `link_threshold` becomes a mention, unless that concept only
qualifies one ("Severe", "Chronic": `link.modifiers`). Overlapping mentions
are resolved greedily (`detect.overlaps`). A span the document defines as an abbreviation is
searched as its long form.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from babelink.abbreviations import abbreviation_map
from babelink.batching import batched
from babelink.detect import MentionDetector
from babelink.detect.conjunctions import conjunctions
from babelink.detect.language import guess_language
from babelink.detect.overlaps import OVERLAP_POLICIES, resolve_overlaps
from babelink.detect.spans import Span, SpanParams, enumerate_spans
from babelink.detect.stopwords import Boundaries, BoundaryStopwords
from babelink.detect.tokenize import tokenize
from babelink.errors import InvalidInputError
from babelink.formats.document import Document
from babelink.lang import check_language
from babelink.link.context_filter import ContextFilter, filter_window
from babelink.link.mentions import LinkedDocument, LinkedMention
from babelink.link.modifiers import MODIFIER_TYPES, is_modifier
from babelink.link.ngram_search import ngram_search
from babelink.retrieve.calibration import Calibration, check_probability, ranking_depth
from babelink.retrieve.candidate import Candidate, CandidateGenerator, check_top_k, deciding_at
from babelink.text import capitals_in_context, holds_capitals, normalize_name, written_in_capitals

#: Longest document `link` accepts; a larger one is rejected with a clear error, not paged in.
MAX_DOCUMENT_CHARS = 20_000_000
#: Documents are linked in segments of about this many characters, cut where no mention can
#: cross (a line break, else a sentence end, else a space), so memory stays flat on huge texts.
SEGMENT_CHARS = 20_000
#: Segments linked together: a batch of abstracts in one pass, a long text in passes of ~320k characters.
SEGMENTS_PER_PASS = 16
#: Distinct span strings whose search results a call keeps across its passes (repeated terms in a
#: long text are searched once); past this many the memory is emptied and refilled.
MAX_REMEMBERED_SEARCHES = 200_000
#: What a span is searched as: its normalised string, whether it is written in capitals, its language.
SearchKey = tuple[str, bool, str | None]
#: Where a segment may end, best first: a paragraph, a sentence (a full stop of CJK text is followed by no
#: space), a line, a space.
_SEGMENT_CUTS = tuple(re.compile(pattern) for pattern in (r"\n\s*\n", r"[.!?]\s|[。！？]", r"\n", r"\s"))


@dataclass(frozen=True)
class LinkParams:
    """Defaults: the best mean strict F1 of NCBI-disease and BC5CDR dev (`benchmarks/end_to_end.py
    --tune`, BENCHMARKS.md) with the bundled encoder's hybrid ranking, no filter. The encoder's
    cosines are high even for unrelated strings, hence the high link threshold; with a contextual
    filter a lower one leaves the filter more to choose from. A span whose best concept has only
    `modifier_types` is not a mention (`link.modifiers`; empty: link them too).

    `recall_threshold` decides which spans are encoded at all, most of `link`'s time: the highest
    gate that dropped no span the default link threshold links, on seven dev corpora in three
    languages, chosen with each language left out in turn (every fold: 0.55, against 0.5 before;
    17–26% fewer spans ranked, benchmarks/log/end-to-end.md). A lower `link_threshold` may want a
    lower gate."""

    spans: SpanParams = field(default_factory=SpanParams)
    recall_threshold: float = 0.55
    link_threshold: float = 0.98
    min_probability: float = 0.0
    overlap: str = "longest"
    top_k: int = 5
    resolve_abbreviations: bool = True
    modifier_types: frozenset[str] = MODIFIER_TYPES

    def __post_init__(self):
        check_top_k(self.top_k)
        check_probability(self.min_probability)
        if self.overlap not in OVERLAP_POLICIES:
            raise InvalidInputError(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, got {self.overlap!r}")
        if isinstance(self.modifier_types, str):
            raise InvalidInputError(f"modifier_types must be a collection of type codes, not the string "
                                    f"{self.modifier_types!r}")
        object.__setattr__(self, "modifier_types", frozenset(self.modifier_types))


def bundle_link_params(manifest: dict, **params) -> LinkParams:
    """`LinkParams` of `params`, the thresholds the bundle recorded (`manifest["link"]`,
    `bundle.store.LINK_THRESHOLDS`) for those not given, the defaults for the rest."""
    return LinkParams(**{**manifest.get("link", {}), **params})


@dataclass
class Proposal:
    """A span that cleared both thresholds, its ranked concepts and, once filtered, its filter
    probability; offsets are into the whole document."""

    start: int
    end: int
    text: str
    searched: str
    candidates: list[Candidate]
    recall_score: float | None  # the high-recall matcher's best cosine (None for an n-gram of a detected span)
    detector: str = "spans"
    filter_score: float | None = None

    @property
    def score(self) -> float:
        """What overlap resolution compares: the filter's probability when there is one, else the
        calibrated probability, else the score."""
        if self.filter_score is not None:
            return self.filter_score
        best = self.candidates[0]
        return best.score if best.probability is None else best.probability


@dataclass(frozen=True)
class DocumentLinker:
    """Links batches of documents; `recall` is the high-recall matcher, `ranker` the bundle's
    generator. Both receive span strings normalised once, here. `concept_types`: the KB's
    concepts that have types (`link.modifiers.concept_types`). `languages`: those the bundle
    reads (its names' and its translation lexicons'), which a document's language guess favours
    and passes on to the ranker (`_languages`)."""

    recall: CandidateGenerator
    ranker: CandidateGenerator
    stopwords: BoundaryStopwords
    params: LinkParams = field(default_factory=LinkParams)
    context_filter: ContextFilter | None = None
    detector: MentionDetector | None = None
    calibration: Calibration | None = None
    concept_types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    languages: frozenset[str] = frozenset()

    def __post_init__(self):
        # no shortcut (a rendering skipped) that could have cleared the link threshold
        object.__setattr__(self, "ranker", deciding_at(self.ranker, self.params.link_threshold))

    def link(self, documents: Sequence[Document]) -> list[LinkedDocument]:
        """Link a batch of documents; a document's `lang` None is guessed per segment."""
        proposals, read_as = self._proposals(documents)
        if self.context_filter is not None:
            self.apply_filter(documents, proposals)
            threshold = self.context_filter.settings.threshold
            proposals = [[p for p in found if p.filter_score >= threshold] for found in proposals]
        return [LinkedDocument(document.id, document.text,
                               tuple(self._mention(p) for p in resolve_overlaps(found, self.params.overlap)), lang=lang)
                for document, found, lang in zip(documents, proposals, read_as)]

    @staticmethod
    def _mention(proposal: Proposal) -> LinkedMention:
        searched = proposal.searched if proposal.searched != proposal.text else None
        return LinkedMention(proposal.start, proposal.end, proposal.text, tuple(proposal.candidates),
                             detector=proposal.detector, searched=searched, filter_score=proposal.filter_score)

    def apply_filter(self, documents: Sequence[Document], proposals: list[list[Proposal]]) -> None:
        """Set every proposal's `filter_score` (one batched pass over the whole batch)."""
        window = self.context_filter.settings.window
        flat = [(document.text, proposal) for document, found in zip(documents, proposals) for proposal in found]
        probabilities = self.context_filter.probabilities(
            [filter_window(text, p.start, p.end, window) for text, p in flat], [p.candidates[0].name for _, p in flat])
        for (_, proposal), probability in zip(flat, probabilities):
            proposal.filter_score = float(probability)

    def proposals(self, documents: Sequence[Document]) -> list[list[Proposal]]:
        """Per document, every span that clears the recall and link thresholds, before the
        filter and overlap resolution. With a `detector`, its spans skip the recall threshold,
        and one below the link threshold is replaced by its linked n-grams (002 §4.4.1)."""
        return self._proposals(documents)[0]

    def _proposals(self, documents: Sequence[Document]) -> tuple[list[list[Proposal]], list[str | None]]:
        """`proposals`, and each document's language: the one given, else the one most of its
        characters were read as (None: no guess)."""
        langs = [check_language(document.lang, f"document {document.id!r}: lang") for document in documents]
        segments = [(index, offset, segment, langs[index])
                    for index, document in enumerate(documents)
                    for offset, segment in split_segments(check_document(document.id, document.text))]
        proposals: list[list[Proposal]] = [[] for _ in documents]
        read_as: list[Counter[str]] = [Counter() for _ in documents]  # characters per language read as
        searches: dict[SearchKey, tuple[float, list[Candidate] | None]] = {}
        for group in batched(segments, SEGMENTS_PER_PASS):  # memory bounded by a pass, not by the text
            if len(searches) > MAX_REMEMBERED_SEARCHES:
                searches.clear()
            self._propose(group, proposals, searches, read_as)
        return proposals, [given or (read.most_common(1)[0][0] if read else None)
                           for given, read in zip(langs, read_as)]

    def _propose(self, segments: list[tuple[int, int, str, str | None]], proposals: list[list[Proposal]],
                 searches: dict[SearchKey, tuple[float, list[Candidate] | None]], read_as: list[Counter[str]]) -> None:
        """Add the proposals of `(document index, offset, segment text, lang)` segments to `proposals`,
        and each segment's length to its document's count of the language it was read as.
        `searches` holds each span key's recall score and ranked candidates (None below the recall
        threshold) from earlier passes, and gets this pass's."""
        per_segment = []
        for (index, offset, segment, _), (read, lang, boundaries, spans) in zip(segments, self._spans(segments)):
            if read is not None:
                read_as[index][read] += len(segment)
            abbreviations = abbreviation_map(segment) if self.params.resolve_abbreviations else {}
            searched = ((span, abbreviations.get(span.text, span.text)) for span in spans)
            per_segment.append((index, offset, boundaries, [
                (span, text, _search_key(text, lang, capitals_in_context(span.text, segment, abbreviations)))
                for span, text in searched]))
        # Searched once per distinct (normalised string, written in capitals, language) across the batch.
        keys = [key for key in dict.fromkeys(key for *_, spans in per_segment for _, _, key in spans)
                if key[0] and key not in searches]
        floor = self.params.recall_threshold if self.detector is None else float("-inf")
        recall = [candidates[0].score if candidates else 0.0 for candidates in _generate(self.recall, keys, 1)]
        kept = [key for key, score in zip(keys, recall) if score >= floor]
        ranked = dict(zip(kept, self._calibrated(kept, self._ranked(kept))))
        searches.update((key, (score, ranked.get(key))) for key, score in zip(keys, recall))
        detector = "spans" if self.detector is None else self.detector.name
        for index, offset, boundaries, spans in per_segment:
            for span, text, key in spans:
                recall_score, candidates = searches.get(key, (0.0, None))
                if candidates and self._links(candidates, key):
                    proposals[index].append(
                        Proposal(
                            span.start + offset,
                            span.end + offset,
                            span.text,
                            text,
                            candidates,
                            recall_score,
                            detector,
                        )
                    )
                elif self.detector is not None and key[0]:
                    proposals[index] += self._linked_ngrams(span, offset, detector, boundaries, key[2])

    def _links(self, candidates: list[Candidate], key: SearchKey) -> bool:
        """Whether a span searched as `key` (its normalised string and language), whose ranked
        concepts are `candidates`, is a mention of the first."""
        best, (searched, _, lang) = candidates[0], key
        return (best.score >= self.params.link_threshold
                and (best.probability is None or best.probability >= self.params.min_probability)
                and not is_modifier(best.concept_id, self.concept_types, self.params.modifier_types)
                and not _doubles_a_word(searched, best.matched_string)
                and not _joins_two_mentions(searched, best.matched_string, lang))

    @property
    def _depth(self) -> int:
        return ranking_depth(self.params.top_k, self.calibration)

    def _ranked(self, keys: list[SearchKey]) -> list[list[Candidate]]:
        return _generate(self.ranker, keys, self._depth)

    def _calibrated(self, keys: list[SearchKey], found: list[list[Candidate]]) -> list[list[Candidate]]:
        """The first `top_k` candidates, with the `link` model's probability that their span is a
        mention of them."""
        if self.calibration is None:
            return found
        return [self.calibration.annotate("link", key[0], candidates)[: self.params.top_k]
                for key, candidates in zip(keys, found)]

    def _spans(self, segments) -> list[tuple[str | None, str | None, Boundaries, list[Span]]]:
        """Each segment's language, the language to search it in (`_languages`), its span
        boundaries and candidate spans: the detector's, or all enumerated."""
        tokens = [tokenize(segment) for _, _, segment, _ in segments]
        langs, searched_as = zip(*(self._languages(lang, segment, found)
                                   for found, (_, _, segment, lang) in zip(tokens, segments)))
        boundaries = [self.stopwords.for_language(lang) for lang in langs]
        if self.detector is not None:
            found = self.detector.detect([segment for _, _, segment, _ in segments])
            return [(read, searched, edges, [Span(start, end, segment[start:end]) for start, end in spans])
                    for (_, _, segment, _), read, searched, edges, spans
                    in zip(segments, langs, searched_as, boundaries, found)]
        return [(read, searched, edges, enumerate_spans(segment, segment_tokens, edges, self.params.spans,
                                                        self._defined(segment)))
                for (_, _, segment, _), segment_tokens, read, edges, searched
                in zip(segments, tokens, langs, boundaries, searched_as)]

    def _defined(self, segment: str) -> frozenset[str]:
        """The short forms a segment written all in capitals defines: its only acronyms."""
        if not (self.params.resolve_abbreviations and written_in_capitals(segment)):
            return frozenset()
        return frozenset(abbreviation_map(segment))

    def _languages(self, given: str | None, text: str, tokens) -> tuple[str | None, str | None]:
        """A segment's language for its stop words (the document's, else `guess_language`'s from
        its text) and for its searches: a guess the bundle cannot read becomes None, so that a
        translating ranker picks the lexicons by the span's own words rather than render nothing
        (a Bulgarian text, say, where the bundle has lexicons for Russian only)."""
        if given:
            return given, given
        guessed = guess_language(text, tokens, self.languages)
        return guessed, guessed if guessed in self.languages else None

    def _linked_ngrams(self, span: Span, offset: int, detector: str, boundaries: Boundaries,
                       lang: str | None) -> list[Proposal]:
        """The parts of a detected span that links as a whole to nothing, each decided as a span is."""
        parts = ngram_search(self.ranker, span.text, self.params.link_threshold, self._depth, boundaries, lang)
        keys = [_search_key(part.text, lang) for part in parts]
        found = self._calibrated(keys, [part.candidates for part in parts])
        return [Proposal(span.start + offset + part.start, span.start + offset + part.end, part.text, part.text,
                         candidates, None, f"{detector}+ngrams")
                for part, key, candidates in zip(parts, keys, found) if self._links(candidates, key)]


def _doubles_a_word(searched: str, matched_string: str) -> bool:
    """Whether a span repeats a word (of 3 letters or more) more often than the name it matched
    (both normalised): "hepatitis b and hepatitis", matched to *Hepatitis B*, is two mentions run
    together, the second cut short, and each is linked on its own."""
    words = Counter(word for word in searched.split() if len(word) > 2)
    named = Counter(matched_string.split())
    return any(count > named[word] for word, count in words.items() if count > 1)


def _joins_two_mentions(searched: str, matched_string: str, lang: str | None) -> bool:
    """Whether a span (normalised) has a conjunction of its language between its first and last
    words and the name it matched has none: "aura and migraine", matched to *Migraine with aura*,
    is two mentions run together, and each is linked on its own (of 19 such spans linked on
    NCBI-disease and BC5CDR dev and Mantra en, es and fr, none was right: benchmarks/log/notes.md)."""
    joining = conjunctions(lang)
    inner = re.split(r"[\s/]+", searched)[1:-1]
    return any(word in joining for word in inner) and joining.isdisjoint(re.split(r"[\s/]+", matched_string))


def _search_key(text: str, lang: str | None, in_capitals: bool | None = None) -> SearchKey:
    """`in_capitals`: whether the span counts as written in capitals where it stands (default: as written)."""
    capitals = holds_capitals(text) if in_capitals is None else in_capitals and holds_capitals(text)
    return normalize_name(text), capitals, lang


def _generate(generator: CandidateGenerator, keys: list[SearchKey], top_k: int) -> list[list[Candidate]]:
    texts, capitals, langs = zip(*keys) if keys else ((), (), ())
    return generator.generate(list(texts), top_k, list(capitals), list(langs))


def check_linkable(document: Document) -> None:
    """Raise `InvalidInputError`, naming where the document was read, if it cannot be linked."""
    try:
        check_document(document.id, document.text)
        check_language(document.lang, f"document {document.id!r}: lang")
    except InvalidInputError as error:
        raise InvalidInputError(f"{document.source}: {error}" if document.source else str(error)) from None


def check_document(doc_id: str, text: object) -> str:
    if not isinstance(text, str):
        raise InvalidInputError(f"document {doc_id!r}: text must be a string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise InvalidInputError(f"document {doc_id!r}: {len(text):,} characters exceed the "
                                f"{MAX_DOCUMENT_CHARS:,}-character limit; split it into documents")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate, e.g. from a JSON "\ud800" escape
        raise InvalidInputError(f"document {doc_id!r}: not valid Unicode at character {error.start} "
                                f"({text[error.start]!r})") from None
    return text


def split_segments(text: str, size: int = SEGMENT_CHARS) -> Iterator[tuple[int, str]]:
    """`(offset, segment)` pieces of `text` no longer than about `size`, cut at barriers."""
    start = 0
    while len(text) - start > size:
        window = text[start : start + size]
        cut = next((match.end() for pattern in _SEGMENT_CUTS
                    for match in [_last_match(pattern, window, size // 2)] if match), size)
        yield start, text[start : start + cut]
        start += cut
    if start < len(text):
        yield start, text[start:]


def _last_match(pattern: re.Pattern, window: str, earliest: int):
    last = None
    for last in pattern.finditer(window, earliest):
        pass
    return last
