"""What `link` returns: documents with their linked mentions, and their serialisations."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace

from babelink.eval.linking import BUNDLE_INFON
from babelink.formats.document import Annotation, Document
from babelink.link.settings import SETTINGS_KEY
from babelink.retrieve.candidate import Candidate


@dataclass(frozen=True)
class LinkedMention:
    """`text == document_text[start:end]`; `candidates[0]` is the linked concept."""

    start: int
    end: int
    text: str
    candidates: tuple[Candidate, ...]
    detector: str = "spans"
    searched: str | None = None  # the string searched, when not `text` (an abbreviation's long form)
    filter_score: float | None = None

    @property
    def concept(self) -> Candidate:
        return self.candidates[0]

    @property
    def score(self) -> float:
        return self.concept.score

    def to_dict(self, with_candidates: bool = False) -> dict:
        fields = {"start": self.start, "end": self.end, "text": self.text, "concept": self.concept.concept_id,
                  "name": self.concept.name, "score": round(self.score, 6), "matched_name": self.concept.matched_name,
                  "detector": self.detector}
        if self.searched is not None:
            fields["searched"] = self.searched
        if self.concept.translated is not None:
            fields["translated"] = self.concept.translated
        if self.concept.probability is not None:
            fields["probability"] = round(self.concept.probability, 4)
        if self.concept.codes:
            fields["codes"] = dict(self.concept.codes)
        if self.filter_score is not None:
            fields["filter_score"] = round(self.filter_score, 6)
        if with_candidates:
            fields["candidates"] = [candidate.to_dict() for candidate in self.candidates]
        return fields

    def infons(self) -> tuple[tuple[str, str], ...]:
        """What a BioC annotation carries besides its type and identifier."""
        found = (("score", self.score), ("probability", self.concept.probability))
        return tuple((key, f"{value:.4f}") for key, value in found if value is not None)

    @classmethod
    def from_dict(cls, fields: dict) -> LinkedMention:
        """The inverse of `to_dict(with_candidates=True)`."""
        return cls(fields["start"], fields["end"], fields["text"],
                   tuple(Candidate.from_dict(candidate) for candidate in fields["candidates"]),
                   fields["detector"], fields.get("searched"), fields.get("filter_score"))


def provenance_infons(provenance: dict | None) -> tuple[tuple[str, str], ...]:
    """`Linker.provenance` as flat BioC document infons."""
    if provenance is None:
        return ()
    settings = (("babelink_settings", provenance[SETTINGS_KEY]),) if SETTINGS_KEY in provenance else ()
    return ((BUNDLE_INFON, provenance["bundle"]), ("babelink_kb", provenance["kb"]["name"]),
            ("babelink_kb_version", provenance["kb"]["version"]), ("babelink_version", provenance["babelink"]),
            *settings)


@dataclass(frozen=True)
class LinkedDocument:
    id: str
    text: str
    mentions: tuple[LinkedMention, ...] = field(default=())
    provenance: dict | None = None  # `Linker.provenance` of the linker that linked it
    error: str | None = None  # why it could not be linked (`Linker.link_stream(skip_invalid=True)`)
    lang: str | None = None  # the language it was read as: given, else guessed (most of its characters)

    def in_vocabularies(self, vocabularies: Collection[str]) -> LinkedDocument:
        """This document with its mentions' codes in `vocabularies` only (`--codes`)."""
        return replace(self, mentions=tuple(
            replace(m, candidates=tuple(c.in_vocabularies(vocabularies) for c in m.candidates)) for m in self.mentions))

    def to_dict(self, with_candidates: bool = False) -> dict:
        if self.error is not None:
            return {"id": self.id, "error": self.error}
        record = {"id": self.id, "lang": self.lang,
                  "mentions": [mention.to_dict(with_candidates) for mention in self.mentions]}
        if self.provenance is not None:
            record["provenance"] = self.provenance
        return record

    @classmethod
    def from_dict(cls, record: dict, text: str) -> LinkedDocument:
        """The inverse of `to_dict(with_candidates=True)`, for results crossing a process boundary."""
        return cls(record["id"], text, tuple(LinkedMention.from_dict(mention) for mention in record["mentions"]),
                   record.get("provenance"), lang=record.get("lang"))

    def as_document(self, mention_type: str = "Entity") -> Document:
        """The annotated-document form the PubTator, BioC and brat writers take."""
        annotations = tuple(Annotation(mention.start, mention.end, mention.text, (mention.concept.concept_id,),
                                       mention_type, infons=mention.infons()) for mention in self.mentions)
        return Document(self.id, self.text, annotations, infons=provenance_infons(self.provenance))
