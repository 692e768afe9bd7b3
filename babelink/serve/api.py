"""The REST service: one `Linker` (model and indexes loaded once) shared by every request, model
work in a bounded `WorkerPool`, every limit in `ServiceLimits`, one JSON error shape."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from http import HTTPStatus
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException

from babelink.encoders import DEFAULT
from babelink.errors import InvalidInputError
from babelink.formats.document import Document
from babelink.link.records import normalize_record
from babelink.linker import Linker
from babelink.retrieve.filters import NameFilter
from babelink.serve.limits import BodyLimit, ServiceLimits, error_response
from babelink.serve.pool import Overloaded, TimedOut, WorkerPool
from babelink.serve.schema import (
    ErrorOut,
    HealthResponse,
    LinkBatchResponse,
    LinkedDocumentOut,
    LinkRequest,
    LinkText,
    NormalizeRequest,
    NormalizeResponse,
)

DEFAULT_LIMITS = ServiceLimits()
_ERRORS = {status: {"model": ErrorOut, "description": description} for status, description in {
    400: "Malformed JSON.",
    413: "Over a size limit (body bytes, mentions, documents or characters per text): split the request.",
    415: "A body that is not sent as JSON (Content-Type: application/json).",
    422: "Wrong schema, or an unusable mention or text.",
    429: "Too many requests in progress; retry after the Retry-After seconds.",
    503: "Not answered within the per-request timeout.",
}.items()}


def create_app(linker: Linker, limits: ServiceLimits = DEFAULT_LIMITS) -> FastAPI:
    """The service over `linker`, whose bundle, retrievers and stop words are loaded once and shared."""
    linker.documents  # noqa: B018 - set up now, so that no request pays for it or races to build it
    pool = WorkerPool(limits.workers, limits.queue, limits.timeout)
    viewer = files("babelink.serve").joinpath("viewer.html").read_text(encoding="utf-8")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        pool.shutdown()

    # /docs and /redoc with their scripts served from the package: a service on an offline network still has them
    app = FastAPIOffline(title="babelink", summary="Cross-lingual biomedical entity linking.", lifespan=lifespan,
                         description=_limits_text(limits))
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    _add_error_handlers(app, pool)

    @app.post("/normalize", response_model=NormalizeResponse, responses=_ERRORS)
    async def normalize(request: NormalizeRequest) -> JSONResponse:
        """Ranked KB concepts for each mention: the objects `babelink normalize` writes per line."""
        _check_count(len(request.mentions), limits.max_mentions, "mentions")
        results = await pool.run(_normalize, linker, request)
        return JSONResponse({"results": results})

    @app.post("/link", response_model=LinkedDocumentOut | LinkBatchResponse, responses=_ERRORS)
    async def link(request: LinkRequest) -> JSONResponse:
        """The concept mentions of one text (`{"text", "lang"?}` → one linked document, `id` "") or of a
        batch (`{"documents": [{"id", "text", "lang"?}]}` → `{"documents": [...]}`): the objects
        `babelink link` writes per line. Offsets count Unicode code points."""
        if isinstance(request, LinkText):
            documents = [Document("", request.text, lang=request.lang)]
        else:
            _check_count(len(request.documents), limits.max_documents, "documents")
            documents = [Document(document.id, document.text, lang=document.lang) for document in request.documents]
        for document in documents:
            if len(document.text) > limits.max_text_chars:
                raise _TooLarge(f"document {document.id!r}: {len(document.text):,} characters exceed the "
                                f"{limits.max_text_chars:,}-character limit per text")
        linked = await pool.run(_link, linker, request, documents)
        return JSONResponse(linked[0] if isinstance(request, LinkText) else {"documents": linked})

    @app.get("/health", response_model=HealthResponse)
    async def health() -> dict:
        """Liveness and what is loaded; answered on the event loop, so also under full load."""
        return _health(linker, limits, pool)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(viewer)

    return app


def _filtered(linker: Linker, request) -> Linker:
    """The linker for the request's filters: a new filter is compiled in a worker, off the event loop."""
    return linker.filtered(NameFilter.of(request.types, request.sources, request.langs))


def _normalize(linker: Linker, request: NormalizeRequest) -> list[dict]:
    found = _filtered(linker, request).normalize(request.mentions, request.top_k, request.lang, request.min_probability)
    return [normalize_record(mention, candidates, linker.bundle.provenance)
            for mention, candidates in zip(request.mentions, found)]


def _link(linker: Linker, request, documents: list[Document]) -> list[dict]:
    """In a batch, a document that cannot be linked answers `{"id", "error"}` in its place and the
    others are linked; a single text that cannot be is the request's error (422)."""
    batch = not isinstance(request, LinkText)
    linked = _filtered(linker, request).link_stream(documents, max(len(documents), 1), skip_invalid=batch)
    return [document.to_dict() for document in linked]


class _TooLarge(Exception):
    """A request over a count or length limit."""


def _check_count(count: int, limit: int, what: str) -> None:
    if count > limit:
        raise _TooLarge(f"{count:,} {what} exceed the limit of {limit:,} per request; split the request")


def _add_error_handlers(app: FastAPI, pool: WorkerPool) -> None:
    """Every error answers `{"error", "detail"}`, FastAPI's and Starlette's own included; 429 and
    503 say in Retry-After when the work in progress is likely done (`WorkerPool.retry_after`)."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = [{"loc": list(problem["loc"]), "msg": problem["msg"], "type": problem["type"]}
                    for problem in error.errors()]
        media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type and "json" not in media_type:  # a form (curl -d) or text: no field error says that
            return error_response(415, "unsupported media type",
                                  f"the body must be JSON, sent as Content-Type: application/json, not {media_type}")
        if any(problem["type"] == "json_invalid" for problem in problems):
            return error_response(400, "malformed JSON", problems)
        return error_response(422, "invalid request", problems)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        return error_response(error.status_code, HTTPStatus(error.status_code).phrase.lower(), error.detail,
                              error.headers)

    @app.exception_handler(InvalidInputError)
    async def invalid_input(_: Request, error: InvalidInputError) -> JSONResponse:
        return error_response(422, "invalid input", str(error))

    @app.exception_handler(_TooLarge)
    async def too_large(_: Request, error: _TooLarge) -> JSONResponse:
        return error_response(413, "request too large", str(error))

    @app.exception_handler(Overloaded)
    async def overloaded(_: Request, error: Overloaded) -> JSONResponse:
        return error_response(429, "overloaded", f"{error}; retry later", {"Retry-After": str(pool.retry_after())})

    @app.exception_handler(Exception)
    async def internal_error(_: Request, error: Exception) -> JSONResponse:
        return error_response(500, "internal server error", type(error).__name__)

    @app.exception_handler(TimedOut)
    async def timed_out(_: Request, error: TimedOut) -> JSONResponse:
        return error_response(503, "timeout", str(error), {"Retry-After": str(pool.retry_after())})


def _health(linker: Linker, limits: ServiceLimits, pool: WorkerPool) -> dict:
    bundle = linker.bundle
    manifest = bundle.manifest
    encoder = bundle.encoder_name
    if encoder == DEFAULT:
        encoder = "multilingual-e5-small (bundled default)"
    return {
        "status": "ok",
        "bundle": {
            "path": str(bundle.path),
            "retriever": bundle.retriever,
            "format_version": manifest["format_version"],
            "created": manifest.get("created"),
            "kb": {field: manifest["kb"][field] for field in ("concepts", "names", "strings")},
            "languages": manifest["kb"].get("languages", {}),
            "encoder": encoder,
            "spans": "spans" in manifest,
        },
        "model": (f"dual encoder {linker.model.path}" if linker.model is not None
                  else bundle.retriever + (f" ({encoder})" if encoder else " (char n-gram TF-IDF)")),
        "context_filter": None if linker.context_filter is None else str(linker.context_filter.path),
        "kb_size": len(bundle.kb),
        "admitted": pool.admitted,
        "limits": asdict(limits),
    }


def _limits_text(limits: ServiceLimits) -> str:
    return (f"Limits: {limits.max_body_bytes:,} bytes per body, {limits.max_mentions:,} mentions per /normalize, "
            f"{limits.max_documents:,} documents per /link, {limits.max_text_chars:,} characters per text (413 "
            f"beyond); {limits.queue} requests in progress at once (429 with Retry-After beyond); "
            f"{limits.timeout:g} s per request (503 beyond). Errors answer `{{\"error\", \"detail\"}}`.")
