"""The in-memory form every benchmark reader produces: documents with annotations, and queries.

Readers differ only in file syntax; linkers and the evaluation see `Document` and
`NormalizationQuery` alone, so a new corpus format needs a reader and nothing else.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Annotation:
    """A mention in a document: `text` spans `start`–`end` (0-based, end exclusive).

    `fragments` holds the (start, end) pieces of a discontinuous mention and is empty for a
    contiguous one; `start`/`end` then cover the first to the last fragment.
    """

    start: int
    end: int
    text: str
    concept_ids: tuple[str, ...]
    type: str = ""
    fragments: tuple[tuple[int, int], ...] = ()
    infons: tuple[tuple[str, str], ...] = ()  # (key, value) pairs a writer that has room for them keeps (BioC)


@dataclass(frozen=True)
class Document:
    """A text with its annotations; `lang` is an ISO 639-1 code, None when the reader cannot know it."""

    id: str
    text: str
    annotations: tuple[Annotation, ...] = ()
    lang: str | None = None
    infons: tuple[tuple[str, str], ...] = ()  # (key, value) pairs a writer that has room for them keeps (BioC)
    source: str = ""  # where it was read ("notes.jsonl:9999"), for errors about it


@dataclass(frozen=True)
class NormalizationQuery:
    """One mention to link, the unit the normalization benchmark scores; any of `gold_ids` is correct.
    `context` is the text of the document the mention comes from, when there is one."""

    mention: str
    gold_ids: tuple[str, ...]
    lang: str | None = None
    context: str | None = None
    doc_id: str | None = None


def mentions_from_documents(
    documents: Iterable[Document], *, types: Collection[str] | None = None
) -> list[NormalizationQuery]:
    """Queries for the annotations that have a concept id (optionally only those of `types`).

    Mentions without an id (NIL, `-1`, no CUI note) cannot be scored and are left out.
    """
    return [
        NormalizationQuery(annotation.text, annotation.concept_ids, lang=document.lang, context=document.text,
                           doc_id=document.id)
        for document in documents
        for annotation in document.annotations
        if annotation.concept_ids and (types is None or annotation.type in types)
    ]
