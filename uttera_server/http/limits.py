"""Limits uvicorn's HTTP protocol does not have: a deadline for a request's headers and a cap on their size.

No ASGI app runs until a request's headers are complete, so these live in the protocol (a subclass of
uvicorn's httptools protocol, passed as `uvicorn.Config(http=...)`):
- header deadline: from a connection's opening (or, on a keep-alive connection, a request's first byte)
  to the end of its headers, `header_timeout_s`. A connection that sent nothing is closed; one that sent
  part of a request gets 408 and is closed. This also bounds a WebSocket handshake, whose upgrade request
  is an HTTP request; the server accepts the upgrade as soon as its headers pass `guard.Guard`.
- header size and count: request line + headers over `max_header_bytes`, or more than `max_header_count`
  headers -> 431 and close. Counted as httptools parses them, and, for a header still arriving (which
  httptools holds until it ends), as bytes received, so at most one read (256 KiB) beyond the limit
  is ever held.
Idle keep-alive connections are uvicorn's `timeout_keep_alive`; the body deadline is `guard.Guard`'s.
"""

import asyncio
import json
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config import ServerConfig
from ..errors import HeadersTooLarge, RequestTimeout, UtteraError, error_payload

log = logging.getLogger(__name__)


def limited_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    """The HTTP protocol class for `uvicorn.Config(http=...)` with this configuration's limits."""
    return type(
        "LimitedHttpToolsProtocol",
        (LimitedHttpToolsProtocol,),
        {
            "header_timeout_s": config.header_timeout_s,
            "max_header_bytes": config.max_header_bytes,
            "max_header_count": config.max_header_count,
        },
    )


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; httptools reports it as a parser error, which
    uvicorn answers with `send_400_response`, overridden here to send the refusal instead."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0
    max_header_bytes: int = 32 << 10
    max_header_count: int = 100

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_bytes = 0  # parsed request line + headers of the request whose headers are awaited
        self._pending_bytes = 0  # bytes received while its headers are awaited
        self._awaiting_headers = True
        self._refusal: UtteraError | None = None
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.header_timeout_s, self._headers_too_slow
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._awaiting_headers and not self.transport.is_closing():
            self._pending_bytes += len(data)  # a header still being received: httptools holds it whole
            if self._pending_bytes > self.max_header_bytes:
                self._refuse(HeadersTooLarge(f"request line and headers are over {self.max_header_bytes} bytes"))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._header_bytes = self._pending_bytes = 0
        if self._header_timer is None:  # a keep-alive connection's next request
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)
        if len(self.headers) > self.max_header_count:
            self._refusal = HeadersTooLarge(f"more than {self.max_header_count} request headers")
            raise _Refused()

    def _count_header_bytes(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.max_header_bytes:
            self._refusal = HeadersTooLarge(f"request line and headers are over {self.max_header_bytes} bytes")
            raise _Refused()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is not None:
            self._refuse(self._refusal)
        else:
            super().send_400_response(msg)

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._stop_header_timer()
        super().on_headers_complete()

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self._awaiting_headers or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:  # a pipelined request waits its turn
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)
            return
        if self._pending_bytes == 0 and self.cycle is None:
            log.debug("closing a connection that sent no request in %.1f s", self.header_timeout_s)
            self.transport.close()
            return
        self._refuse(RequestTimeout(f"the request headers did not arrive within {self.header_timeout_s:g} s"))

    def _refuse(self, exc: UtteraError) -> None:
        self._awaiting_headers = False
        self._stop_header_timer()
        body = json.dumps(error_payload(exc)).encode()
        head = (
            f"HTTP/1.1 {exc.http_status} {_REASONS[exc.http_status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        self.transport.close()


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large"}
