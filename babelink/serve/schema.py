"""Request and response bodies of the REST API. Responses are the CLI's JSON objects
(`normalize_record`, `LinkedDocument.to_dict`); these models document them in the OpenAPI schema."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from babelink.retrieve.candidate import MAX_TOP_K


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Filters(_Strict):
    types: list[str] | None = Field(None, max_length=100, description="Search only names of concepts of these "
                                    "semantic types (MRSTY).")
    sources: list[str] | None = Field(None, max_length=100, description="Search only names from these source "
                                      "vocabularies (SAB).")
    langs: list[str] | None = Field(None, max_length=100, description="Search only names in these languages.")


class NormalizeRequest(_Filters):
    mentions: list[str] = Field(description="Mention strings, in any language.")
    top_k: int = Field(5, ge=1, le=MAX_TOP_K, description="Concepts per mention.")
    lang: str | None = Field(None, max_length=16, description="Language of the mentions (ISO 639-1, UMLS LAT or a "
                             "locale); with translation lexicons in the bundle, guessed per mention when omitted.")
    min_probability: float = Field(0.0, ge=0.0, le=1.0, description="Leave out concepts whose calibrated "
                                   "probability is lower; a mention with none left is NIL (no candidates).")


class CandidateOut(BaseModel):
    id: str = Field(description="Concept ID (the CUI for UMLS).")
    name: str = Field(description="The concept's preferred name.")
    matched_name: str = Field(description="The KB name that matched.")
    score: float
    index: str | None = Field(None, description='"spans" when found in the labeled-span index; absent otherwise.')
    sparse_score: float | None = Field(None, description="Hybrid bundles: the TF-IDF cosine.")
    dense_score: float | None = Field(None, description="Hybrid bundles: the encoder cosine.")
    translated: str | None = Field(None, description="The English rendering of the mention that found this "
                                                     "concept (bundles with translation lexicons).")
    probability: float | None = Field(None, ge=0.0, le=1.0, description="Calibrated probability that this is the "
                                      "right concept.")
    codes: dict[str, str] | None = Field(None, description="The concept's code in each vocabulary (HP, MESH, ICD10, "
                                         "UMLS, …), its own first; several codes of one vocabulary joined by '|'.")


class KbOut(BaseModel):
    name: str = Field(description="The KB's name as the bundle's build recorded it.")
    version: str = Field(description="Its release, or a hash of its content when none was given.")


class ProvenanceOut(BaseModel):
    bundle: str = Field(description="Short id of the bundle build (from its manifest's hash).")
    kb: KbOut
    babelink: str = Field(description="The babelink version that answered.")
    settings: str | None = Field(None, description="Short id of the settings that linked a document (link "
                                                   "parameters, name filter, detector, filter or model); "
                                                   "documents only.")


class NormalizeResult(BaseModel):
    mention: str
    candidates: list[CandidateOut] = Field(description="Best first.")
    provenance: ProvenanceOut


class NormalizeResponse(BaseModel):
    results: list[NormalizeResult] = Field(description="One per mention, in request order.")


class _Text(_Strict):
    text: str
    lang: str | None = Field(None, max_length=16, description="ISO 639-1, UMLS LAT or a locale; guessed when omitted.")


class LinkText(_Text, _Filters):
    pass


class LinkDocument(_Text):
    id: str = Field(max_length=1000)


class LinkBatch(_Filters):
    documents: list[LinkDocument]

    @field_validator("documents")
    @classmethod
    def _unique_ids(cls, documents: list[LinkDocument]) -> list[LinkDocument]:
        """Results are matched to documents by id, as in `babelink link`: a repeated id is refused."""
        seen: set[str] = set()
        for document in documents:
            if document.id in seen:
                raise ValueError(f"document id {document.id!r} appears more than once")
            seen.add(document.id)
        return documents


def _link_shape(body: object) -> str:
    return "batch" if isinstance(body, dict) and "documents" in body else "text"


#: One text, or a batch of documents; told apart by a `documents` key so that a malformed body
#: is reported against the shape it was meant to have, not against both.
LinkRequest = Annotated[Annotated[LinkText, Tag("text")] | Annotated[LinkBatch, Tag("batch")],
                        Discriminator(_link_shape)]


class MentionOut(BaseModel):
    start: int = Field(description="Offset of the first character (a Unicode code point, as in Python).")
    end: int = Field(description="Offset after the last character.")
    text: str = Field(description="text[start:end]")
    concept: str
    name: str
    score: float
    matched_name: str
    detector: str
    searched: str | None = Field(None, description="The string searched when not `text` (an abbreviation's long form).")
    filter_score: float | None = Field(None, description="The contextual filter's probability, with a filter.")
    probability: float | None = Field(None, ge=0.0, le=1.0, description="Calibrated probability that the span is a "
                                      "mention of this concept.")
    translated: str | None = Field(None, description="The English rendering of the span that found the concept.")
    codes: dict[str, str] | None = Field(None, description="The concept's code in each vocabulary, as on candidates.")


class LinkedDocumentOut(BaseModel):
    id: str
    lang: str | None = Field(None, description="The language the text was read as: the request's, else guessed "
                                               "(the one most of its characters were read as); null: no guess.")
    mentions: list[MentionOut]
    provenance: ProvenanceOut


class DocumentErrorOut(BaseModel):
    id: str
    error: str = Field(description="Why this document of the batch could not be linked; the others were.")


class LinkBatchResponse(BaseModel):
    documents: list[LinkedDocumentOut | DocumentErrorOut] = Field(
        description="One per document, in request order: linked, or the reason it could not be.")


class ErrorOut(BaseModel):
    error: str
    detail: object = Field(description="A message, or for a malformed request the list of problems.")


class BundleSummary(BaseModel):
    path: str
    retriever: str
    format_version: int
    created: str | None
    kb: dict[str, int] = Field(description="Counts: concepts, names, strings.")
    languages: dict[str, int] = Field(description="Names per language.")
    encoder: str | None = Field(
        description="The encoder: bundled default or checkpoint path; none for a sparse bundle."
    )
    spans: bool = Field(description="Whether the bundle has a labeled-span index.")


class HealthResponse(BaseModel):
    status: str
    bundle: BundleSummary
    model: str = Field(description="What ranks candidates: the retriever and its encoder.")
    context_filter: str | None
    kb_size: int = Field(description="Concepts in the KB.")
    admitted: int = Field(description="Requests in progress now (running or queued).")
    limits: dict[str, int | float]
