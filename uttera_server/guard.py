"""ASGI middleware that applies the exposure limits before a request reaches an endpoint.

HTTP, in order: API key (401) -> admission (429 + Retry-After) -> declared body
size (413) -> `Content-Type: application/json` on bodies (415) -> the whole body read within
`body_timeout_s` (408), at most `max_body_bytes` (413). Refusals close the connection (`connection:
close`), so an unread upload is not held. A client that leaves while its body is read is logged at INFO
and counted in `uttera_client_aborts_total`, never as a server error. The endpoint then gets the body
from memory, and `http.disconnect` from the real connection.

WebSocket upgrade, before it completes: Origin (403) -> API key (401) as HTTP responses; admission
refusals after accept as an `error` message `overloaded` and close 1013.

Header size and count and the header deadline are enforced lower down, in the HTTP protocol (http/limits.py),
since no ASGI app runs until the headers are complete. CORS (preflights included) is Starlette's
`CORSMiddleware`, outside this one.
"""

import asyncio
import json
import logging
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import security
from .admission import Admission, Refusal, Ticket
from .app_state import AppState
from .config import ServerConfig
from .errors import (
    OriginNotAllowed,
    Overloaded,
    RequestTimeout,
    RequestTooLarge,
    Unauthorized,
    UnsupportedMediaType,
    UtteraError,
    error_payload,
)
from .ws.messages import error as ws_error

log = logging.getLogger(__name__)

SPEECH_PATH = "/v1/audio/speech"
UNMETERED_PATHS = frozenset({"/health", "/metrics"})  # never shed: probes must answer under overload
PUBLIC_PATHS = frozenset({"/health", "/", "/openapi.json"})  # no key: a probe, and pages that hold no data
PUBLIC_PREFIXES = ("/playground/",)  # the playground's static files (its API calls need the key)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def middleware(config: ServerConfig, state: AppState) -> list[Middleware]:
    """The exposure middleware for `build_app`, outermost first."""
    stack = []
    if config.cors_origins:
        stack.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "x-request-id"],
                expose_headers=["x-request-id", "x-sample-rate", "x-audio-format", "x-audio-channels", "retry-after"],
            )
        )
    stack.append(Middleware(Guard, state=state))
    return stack


class ExposureMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.refused = Counter(
            "uttera_refused", "Requests refused before an endpoint ran, by reason", ["reason"], registry=registry
        )
        self.shed = Counter(
            "uttera_shed",
            "Requests refused by admission control (429 / close 1013), before any engine work",
            ["transport", "bound"],
            registry=registry,
        )
        self.client_aborts = Counter(
            "uttera_client_aborts",
            "Clients that left while their request body was being read (not server errors)",
            registry=registry,
        )


class _ClientLeft(Exception):
    pass


class Guard:
    def __init__(self, app: ASGIApp, state: AppState):
        self.app = app
        self.state = state
        c = state.config
        self.config = c
        self.keys = security.ApiKeys(c.api_keys)
        self.open_paths = PUBLIC_PATHS if c.metrics_auth else PUBLIC_PATHS | {"/metrics"}
        self.admission = Admission(c.max_connections, c.max_waiting, lambda: state.synth.engine_stats().num_waiting)
        self.metrics = ExposureMetrics(state.metrics.registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _public(self, path: str) -> bool:
        return path in self.open_paths or path.startswith(PUBLIC_PREFIXES)

    # --- HTTP ---
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers, path = scope["headers"], scope["path"]
        if (
            self.keys.enabled
            and not self._public(path)
            and not self.keys.accepts(security.bearer_token(security.header(headers, b"authorization")))
        ):
            await self._refuse(send, Unauthorized(), "unauthorized", {"www-authenticate": "Bearer"})
            return
        if path in UNMETERED_PATHS:
            await self.app(scope, receive, send)
            return
        refusal = self.admission.refusal(False)
        if refusal is not None:
            await self._shed(send, refusal)
            return
        ticket = self.admission.admit()
        try:
            if scope["method"] in BODY_METHODS:
                body = await self._body(scope, receive, send)
                if body is None:
                    return
                receive = _replay(body, receive)
            if path == SPEECH_PATH:  # queues for the engine: the waiting bound, checked with no await before wait()
                refusal = self.admission.waiting_refusal()
                if refusal is not None:
                    await self._shed(send, refusal)
                    return
                ticket.wait()
            await self.app(scope, receive, _starting(send, ticket))
        finally:
            ticket.release()

    async def _shed(self, send: Send, refusal: Refusal) -> None:
        self.metrics.shed.labels("http", refusal).inc()
        await self._refuse(
            send,
            Overloaded(f"the server is at capacity ({refusal}): retry after {Overloaded.retry_after_s} s"),
            None,
            {"retry-after": str(Overloaded.retry_after_s)},
        )

    async def _body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole request body, or None once the request has been answered (or its client left)."""
        headers, limit = scope["headers"], self.config.max_body_bytes
        declared = security.header(headers, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            await self._refuse(
                send,
                RequestTooLarge(f"request body of {declared.strip()} bytes is over the {limit}-byte limit"),
                "too_large",
            )
            return None
        if not security.is_json(security.header(headers, b"content-type")):
            await self._refuse(send, UnsupportedMediaType(), "media_type")
            return None
        try:
            return await self._read_body(receive, limit)
        except _ClientLeft:
            self.metrics.client_aborts.inc()
            log.info("client left while sending its request body (%s %s)", scope["method"], scope["path"])
        except TimeoutError:
            await self._refuse(
                send,
                RequestTimeout(f"the request body did not arrive within {self.config.body_timeout_s:g} s"),
                "timeout",
            )
        except RequestTooLarge as e:
            await self._refuse(send, e, "too_large")
        return None

    async def _read_body(self, receive: Receive, limit: int) -> bytes:
        parts, size = [], 0
        async with asyncio.timeout(self.config.body_timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _ClientLeft()
                part = message.get("body", b"")
                size += len(part)
                if size > limit:
                    raise RequestTooLarge(f"request body is over the {limit}-byte limit")
                parts.append(part)
                if not message.get("more_body", False):
                    return b"".join(parts)

    async def _refuse(
        self, send: Send, exc: UtteraError, reason: str | None, headers: dict[str, str] | None = None
    ) -> None:
        if reason is not None:
            self.metrics.refused.labels(reason).inc()
        body = json.dumps(error_payload(exc)).encode()
        raw = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]  # an unread body is not worth the connection
        raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        await send({"type": "http.response.start", "status": exc.http_status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    # --- WebSocket ---
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope["headers"]
        if not security.origin_allowed(
            security.header(headers, b"origin"), self.config.cors_origins, security.header(headers, b"host")
        ):
            await self._deny_upgrade(scope, send, OriginNotAllowed(), "origin")
            return
        key_protocol = None
        if self.keys.enabled:
            key, key_protocol = security.websocket_credential(headers, scope.get("query_string", b""))
            if not self.keys.accepts(key):
                await self._deny_upgrade(scope, send, Unauthorized(), "unauthorized")
                return
        refusal = self.admission.refusal(True)
        if refusal is not None:
            self.metrics.shed.labels("websocket", refusal).inc()
            await self._shed_websocket(receive, send, refusal, key_protocol, headers)
            return
        ticket = self.admission.admit()
        try:
            await self.app(scope, receive, _selecting(send, key_protocol, headers))
        finally:
            ticket.release()

    async def _deny_upgrade(self, scope: Scope, send: Send, exc: UtteraError, reason: str) -> None:
        """Refuse before the upgrade completes: the error body as an HTTP response where the server
        supports it (ASGI `websocket.http.response`), else a bare 403 (closing before accept)."""
        self.metrics.refused.labels(reason).inc()
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(error_payload(exc)).encode()
        await send(
            {
                "type": "websocket.http.response.start",
                "status": exc.http_status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})

    async def _shed_websocket(
        self,
        receive: Receive,
        send: Send,
        refusal: Refusal,
        key_protocol: str | None,
        headers: Iterable[tuple[bytes, bytes]],
    ) -> None:
        exc = Overloaded(f"the server is at capacity ({refusal}): reconnect after {Overloaded.retry_after_s} s")
        await receive()  # websocket.connect
        await _selecting(send, key_protocol, headers)({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps(ws_error(exc))})
        await send({"type": "websocket.close", "code": exc.ws_close_code, "reason": exc.code})


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for an endpoint whose body was already read: the body, then the real connection's
    messages (its `http.disconnect`)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _starting(send: Send, ticket: Ticket) -> Send:
    """`send` that tells `ticket` when the response starts (a speech response starts at its first audio)."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            ticket.started()
        await send(message)

    return wrapped


def _selecting(send: Send, key_protocol: str | None, headers: Iterable[tuple[bytes, bytes]]) -> Send:
    """`send` that selects a subprotocol on accept when the key came as one (browsers require it)."""
    if key_protocol is None:
        return send
    chosen = security.selected_subprotocol(security.offered_subprotocols(headers), key_protocol)

    async def wrapped(message: Message) -> None:
        if message["type"] == "websocket.accept" and not message.get("subprotocol"):
            message = {**message, "subprotocol": chosen}
        await send(message)

    return wrapped
