"""What the app refuses before a request reaches a page: a query string that is not UTF-8
(Starlette would decode ``%ff`` to U+FFFD), and a request head not complete
:data:`HEADER_TIMEOUT` seconds after the connection (uvicorn times out idle ones only).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

import h11
from starlette.responses import JSONResponse, PlainTextResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "KEEP_ALIVE_TIMEOUT", "StrictQueryString", "TimedH11Protocol", "uvicorn_settings"]

HEADER_TIMEOUT = 10.0     # seconds from a connection (or a response) to a complete request head
KEEP_ALIVE_TIMEOUT = 5    # seconds an idle keep-alive connection stays open (uvicorn's default, stated)
INVALID_QUERY = "the query string is not valid UTF-8 once its %-escapes are decoded"


def query_is_utf8(raw: bytes) -> bool:
    """Every ``name=value`` of a raw query string decodes to UTF-8 (``+`` as space)."""
    try:
        for part in raw.split(b"&"):
            unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class StrictQueryString:
    """ASGI middleware: 400 for a query string that is not UTF-8 (JSON under ``/api/``)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not query_is_utf8(scope.get("query_string") or b""):
            if scope.get("path", "").startswith("/api/"):
                response = JSONResponse({"detail": INVALID_QUERY}, status_code=400)
            else:
                response = PlainTextResponse(f"400: {INVALID_QUERY}", status_code=400)
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head."""

    header_timeout = HEADER_TIMEOUT

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = None
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._arm_head_timer()  # a request (or the next one) is still incomplete
        else:
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        self._cancel_head_timer()  # idle between requests: uvicorn's keep-alive timeout applies
        super().on_response_complete()

    def connection_lost(self, exc) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        # Armed once per request head, never pushed back by more bytes (a slow client).
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def uvicorn_settings() -> dict:
    """The keyword arguments ``factcheck serve`` gives ``uvicorn.run`` for these limits."""
    return {"http": TimedH11Protocol, "timeout_keep_alive": KEEP_ALIVE_TIMEOUT}
