"""Access policy without I/O: API keys, browser origins, JSON media type.

`guard.Guard` applies these to each HTTP request and each WebSocket upgrade; the functions here only
decide. Keys are compared in constant time (`hmac.compare_digest`) against every configured key, so the
time taken says nothing about which key, or how much of one, was right.

WebSocket credentials, for browsers that cannot set headers on an upgrade, in order of preference:
    Authorization: Bearer KEY                          (non-browser clients)
    Sec-WebSocket-Protocol: uttera, uttera.api-key.KEY  (the server then selects `uttera`)
    ?api_key=KEY                                       (lands in access logs: prefer the two above)
"""

import hmac
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

APP_SUBPROTOCOL = "uttera"
KEY_SUBPROTOCOL_PREFIX = "uttera.api-key."
ANY_ORIGIN = "*"


class ApiKeys:
    """The configured keys; `enabled` is False when there are none (no authentication)."""

    def __init__(self, keys: Iterable[str]):
        self._keys = tuple(k.encode() for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def accepts(self, presented: str | None) -> bool:
        """True if `presented` is one of the keys; compares against all of them, in constant time each."""
        if presented is None:
            return False
        given = presented.encode("utf-8", "surrogateescape")
        ok = False
        for key in self._keys:
            ok |= hmac.compare_digest(given, key)
        return ok


def header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header `name` (lower-case bytes) in ASGI `headers`, decoded as latin-1."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def bearer_token(authorization: str | None) -> str | None:
    """KEY from `Authorization: Bearer KEY` (scheme case-insensitive), else None."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def offered_subprotocols(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    offered = []
    for key, value in headers:
        if key == b"sec-websocket-protocol":
            offered += [p.strip() for p in value.decode("latin-1").split(",") if p.strip()]
    return offered


def websocket_credential(headers: list[tuple[bytes, bytes]], query_string: bytes) -> tuple[str | None, str | None]:
    """(key presented on a WebSocket upgrade or None, the subprotocol that carried it or None)."""
    token = bearer_token(header(headers, b"authorization"))
    if token is not None:
        return token, None
    for protocol in offered_subprotocols(headers):
        if protocol.startswith(KEY_SUBPROTOCOL_PREFIX):
            return protocol[len(KEY_SUBPROTOCOL_PREFIX) :], protocol
    for name, value in parse_qsl(query_string.decode("latin-1")):
        if name == "api_key":
            return value, None
    return None, None


def selected_subprotocol(offered: list[str], key_protocol: str) -> str:
    """What the server answers when the key came as a subprotocol: a browser fails the connection unless
    the server selects one of those it offered; `uttera` when offered, so the key is not echoed."""
    return APP_SUBPROTOCOL if APP_SUBPROTOCOL in offered else key_protocol


def origin_allowed(origin: str | None, allowed: tuple[str, ...], host: str | None) -> bool:
    """A request without Origin (not a browser) is allowed; a browser's Origin must be in `allowed`
    (or `allowed` has "*"), or be the server's own origin (its host equals the Host header)."""
    if origin is None:
        return True
    origin = origin.rstrip("/")
    if ANY_ORIGIN in allowed or origin in allowed:
        return True
    return host is not None and urlsplit(origin).netloc.lower() == host.lower()


def is_json(content_type: str | None) -> bool:
    """`application/json`, parameters (charset) allowed. Browsers send text/plain, form and multipart
    bodies cross-site without a CORS preflight; requiring JSON forces the preflight."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"
