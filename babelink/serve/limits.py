"""What one request may ask of the service, and the body-size guard that enforces the first limit."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True)
class ServiceLimits:
    """Every resource a request can claim is bounded, so overload turns into 413/429/503 answers
    rather than memory growth. A request over a size limit gets 413 (split it); a full queue
    gets 429 with Retry-After; a request not answered within `timeout` seconds gets 503."""

    max_body_bytes: int = 1_000_000
    max_mentions: int = 1000  # per /normalize request
    max_documents: int = 64  # per /link request
    max_text_chars: int = 100_000  # per /link text
    timeout: float = 30.0  # seconds, waiting in the queue included
    workers: int = 1  # threads running model work: torch already uses every core
    queue: int = 32  # requests admitted at once (running or waiting for a worker)


def error_response(status: int, error: str, detail: object, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error shape of the service: `{"error": short reason, "detail": specifics}`."""
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware reading at most `max_bytes` of a request body before the app sees it:
    a larger body is refused with 413 by its Content-Length, or as soon as a chunked body
    passes the limit, so no request can make the server buffer more."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, "request too large", f"the body exceeds {self.max_bytes:,} bytes")
        await response(scope, receive, send)
