"""spaCy pipeline component "babelink": concept mentions of `doc.text` as `doc.ents`.

`nlp.add_pipe("babelink", config={"bundle": "bundles/ncbi"})` finds the factory through the
`spacy_factories` entry point, so babelink need not be imported first. Entities carry the
concept id as `kb_id_`; `span._.babelink_score`, `._.babelink_probability` (calibrated),
`._.babelink_name` and `._.babelink_candidates` hold the rest, `doc._.babelink_mentions` every
linked mention as `LinkedMention.to_dict` gives it, `doc._.babelink_provenance` the bundle, KB and
babelink version that linked it, `doc._.babelink_lang` the language the text was read as (the
component's, else guessed: an "xx" pipeline's texts may each be in another).
Offsets are mapped to the tokens covering them (`alignment_mode="expand"`), so a tokenizer that
does not split a script (blank "xx" on unspaced Chinese) merges the mentions inside one token.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from babelink.batching import batched
from babelink.formats.document import Document
from babelink.lang import check_language
from babelink.link.mentions import LinkedDocument, LinkedMention
from babelink.linker import Linker
from babelink.retrieve.filters import NameFilter

SPAN_EXTENSIONS = ("babelink_score", "babelink_probability", "babelink_name", "babelink_candidates")
DOC_EXTENSIONS = ("babelink_mentions", "babelink_provenance", "babelink_lang")


@Language.factory("babelink", default_config={"bundle": None, "filter": None, "lang": None, "batch_size": 16,
                                              "overwrite_ents": False, "label": "ENTITY", "types": None,
                                              "sources": None, "langs": None, "model": None,
                                              "keep_modifiers": False})
def make_babelink(nlp: Language, name: str, bundle: str | None, filter: str | None, lang: str | None,
                  batch_size: int, overwrite_ents: bool, label: str, types: list[str] | None,
                  sources: list[str] | None, langs: list[str] | None, model: str | None,
                  keep_modifiers: bool) -> BabelinkComponent:
    """`bundle` None: the embedded default bundle; `filter`: a contextual filter directory;
    `lang` None: the pipeline's language, guessed per text for multi-language ("xx") pipelines;
    `types`, `sources`, `langs`: search only those names (`retrieve.filters`); `model`: a dual
    encoder directory that detects and links in one pass; `keep_modifiers`: also link words that
    only qualify a mention (`link.modifiers`)."""
    params = {"modifier_types": frozenset()} if keep_modifiers else {}
    return BabelinkComponent(
        Linker.open(bundle, filter=filter, name_filter=NameFilter.of(types, sources, langs), model=model, **params),
        lang or (None if nlp.lang == "xx" else nlp.lang),
        batch_size,
        overwrite_ents,
        label,
    )


class BabelinkComponent:
    def __init__(self, linker: Linker, lang: str | None = None, batch_size: int = 16, overwrite_ents: bool = False,
                 label: str = "ENTITY"):
        register_extensions()
        self.linker = linker
        self.lang = check_language(lang, "babelink component config: lang")  # wrong at nlp.add_pipe, not at a text
        self.batch_size = batch_size
        self.overwrite_ents = overwrite_ents
        self.label = label

    def __call__(self, doc: Doc) -> Doc:
        return self._annotate(doc, self.linker.link(doc.text, self.lang))

    def pipe(self, docs: Iterable[Doc], batch_size: int | None = None) -> Iterator[Doc]:
        """Docs linked `self.batch_size` at a time (`nlp.pipe`'s batch size is sized for
        tokenisation, far more texts than one linking batch should hold)."""
        for batch in batched(docs, self.batch_size):
            linked = self.linker.link_documents([Document("", doc.text, lang=self.lang) for doc in batch])
            yield from (self._annotate(doc, document) for doc, document in zip(batch, linked))

    def _annotate(self, doc: Doc, document: LinkedDocument) -> Doc:
        doc._.babelink_mentions = [mention.to_dict(with_candidates=True) for mention in document.mentions]
        doc._.babelink_provenance = document.provenance
        doc._.babelink_lang = document.lang
        found: dict[tuple[int, int], tuple[Span, LinkedMention] | None] = {}
        for mention in document.mentions:
            span = doc.char_span(mention.start, mention.end, label=self.label, kb_id=mention.concept.concept_id,
                                 alignment_mode="expand")
            if span is not None:  # a token holding two mentions (unspaced text, "xx") is neither's entity
                found[span.start, span.end] = None if (span.start, span.end) in found else (span, mention)
        found = {key: value for key, value in found.items() if value is not None}
        kept = filter_spans(span for span, _ in found.values())
        existing = list(doc.ents)
        if self.overwrite_ents:
            existing = _without_overlaps(existing, kept)
        else:
            kept = _without_overlaps(kept, existing)
        doc.ents = sorted(existing + kept, key=lambda span: span.start)
        for span in kept:
            mention = found[span.start, span.end][1]
            span._.babelink_score = mention.score
            span._.babelink_probability = mention.concept.probability
            span._.babelink_name = mention.concept.name
            span._.babelink_candidates = [candidate.to_dict() for candidate in mention.candidates]
        return doc


def register_extensions() -> None:
    """Declare the extension attributes once per process: declaring one twice raises."""
    for name in SPAN_EXTENSIONS:
        if not Span.has_extension(name):
            Span.set_extension(name, default=None)
    for name in DOC_EXTENSIONS:
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)


def _without_overlaps(spans: list[Span], others: list[Span]) -> list[Span]:
    taken = {token for span in others for token in range(span.start, span.end)}
    return [span for span in spans if taken.isdisjoint(range(span.start, span.end))]
