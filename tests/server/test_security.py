"""Access control and request timeouts on the `exposed` server (conftest.py), started with API keys, a CORS allowlist
and short header/body/keep-alive deadlines: 401/403/415/431 matrices over HTTP and WebSocket, and raw
sockets that stall at each phase of a request while a normal client is served."""

import asyncio
import json
import time

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from _server_process import timeout
from _speech_client import recv_json, send_json
from _exposed_server import (
    BODY_TIMEOUT_S,
    GOOD_ORIGIN,
    HEADER_TIMEOUT_S,
    KEEP_ALIVE_S,
    KEYS,
    MAX_HEADER_BYTES,
    MAX_HEADER_COUNT,
)

AUTH = {"authorization": f"Bearer {KEYS[0]}"}
SPEECH = {"model": "uttera", "input": "Hello."}


@pytest.fixture
async def client(exposed):
    async with httpx.AsyncClient(base_url=exposed.url, timeout=timeout(60)) as c:
        yield c


def ws_url(server, query: str = "") -> str:
    return server.url.replace("http://", "ws://") + "/v1/audio/speech/stream" + query


def host_port(server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


# --- API keys over HTTP ---
@pytest.mark.parametrize("method, path, headers, status", [
    ("POST", "/v1/audio/speech", {}, 401),
    ("POST", "/v1/audio/speech", {"authorization": "Bearer wrong"}, 401),
    ("POST", "/v1/audio/speech", {"authorization": f"Basic {KEYS[0]}"}, 401),
    ("POST", "/v1/audio/speech", {"authorization": f"Bearer {KEYS[0]}x"}, 401),
    ("POST", "/v1/audio/speech", {"authorization": f"Bearer {KEYS[0]}"}, 200),
    ("POST", "/v1/audio/speech", {"authorization": f"bearer {KEYS[1]}"}, 200),
    ("GET", "/v1/models", {}, 401),
    ("GET", "/v1/models", AUTH, 200),
    ("GET", "/v1/audio/voices", {"authorization": "Bearer"}, 401),
    ("GET", "/metrics", {}, 401),  # --metrics-auth is the default
    ("GET", "/metrics", AUTH, 200),
    ("GET", "/health", {}, 200),  # probes never need a key
    ("GET", "/", {}, 200),  # the playground page and the API description hold no data
    ("GET", "/openapi.json", {}, 200),
])  # fmt: skip
async def test_http_api_key_matrix(client, method, path, headers, status):
    r = await client.request(method, path, headers=headers, json=SPEECH if method == "POST" else None)
    assert r.status_code == status, r.text
    if status == 401:
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
async def test_json_bodies_need_the_json_media_type(client, content_type):
    headers = {**AUTH, **({"content-type": content_type} if content_type else {})}
    r = await client.post("/v1/audio/speech", content=json.dumps(SPEECH), headers=headers)
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    ok = await client.post(
        "/v1/audio/speech",
        content=json.dumps({**SPEECH, "input": ""}),
        headers={**AUTH, "content-type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 400 and ok.json()["error"]["code"] == "empty_input"  # past the media type check


async def test_cors_preflight_answers_only_the_allowlist(client):
    asked = {"access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type"}
    good = await client.options("/v1/audio/speech", headers={"origin": GOOD_ORIGIN, **asked})
    assert good.status_code == 200 and good.headers["access-control-allow-origin"] == GOOD_ORIGIN
    evil = await client.options("/v1/audio/speech", headers={"origin": "https://evil.example", **asked})
    assert evil.status_code == 400 and "access-control-allow-origin" not in evil.headers


# --- API keys and Origin on the WebSocket upgrade ---
@pytest.mark.parametrize("query, headers, subprotocols, origin, status", [
    ("", {}, None, None, 401),
    ("?api_key=wrong", {}, None, None, 401),
    ("", {"authorization": "Bearer wrong"}, None, None, 401),
    ("", {}, ["uttera", "uttera.api-key.wrong"], None, 401),
    ("", AUTH, None, "https://evil.example", 403),  # a right key from a foreign page is still refused
    ("", AUTH, None, "null", 403),
    ("", AUTH, None, None, 101),
    (f"?api_key={KEYS[1]}", {}, None, None, 101),
    ("", {}, ["uttera", f"uttera.api-key.{KEYS[0]}"], GOOD_ORIGIN, 101),
    ("", {}, [f"uttera.api-key.{KEYS[0]}"], None, 101),
    ("", AUTH, None, "same-origin", 101),
])  # fmt: skip
async def test_websocket_upgrade_matrix(exposed, query, headers, subprotocols, origin, status):
    if origin == "same-origin":
        origin = exposed.url
    kwargs = {
        "additional_headers": headers,
        "subprotocols": subprotocols,
        "origin": origin,
        "open_timeout": timeout(30),
    }
    if status != 101:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url(exposed, query), **kwargs):
                pass
        response = refused.value.response
        assert response.status_code == status
        code = {401: "invalid_api_key", 403: "origin_not_allowed"}[status]
        assert json.loads(response.body)["error"]["code"] == code
        return
    async with connect(ws_url(exposed, query), **kwargs) as ws:
        if subprotocols:
            assert ws.subprotocol == ("uttera" if "uttera" in subprotocols else subprotocols[0])
        await send_json(ws, type="text", text="")  # the session runs: an empty text is refused in-band
        assert (await recv_json(ws))["type"] in ("error", "started")


# --- timeouts and header limits, with raw sockets ---
async def _open(server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*host_port(server))


async def _until_closed(reader: asyncio.StreamReader, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took; fails after `limit_s`."""
    started = time.monotonic()
    data = await asyncio.wait_for(reader.read(), timeout(limit_s))
    return data, time.monotonic() - started


def _status(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


async def test_stalled_requests_are_closed_within_their_deadlines_while_others_are_served(exposed, client):
    stalls = {  # what each slow client sends before it stops
        "nothing": b"",
        "half a request line": b"POST /v1/audio/spe",
        "half the headers": b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: appl",
        "a short body": (
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-one\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{}"
        ),
        "an unfinished chunked body": (
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-one\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n"
        ),
        "half a websocket upgrade": (
            b"GET /v1/audio/speech/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        ),
    }
    expected = {"nothing": None, "a short body": 408, "an unfinished chunked body": 408}
    conns = {}
    for name, data in stalls.items():
        for _ in range(5):  # several of each, all held at once
            reader, writer = await _open(exposed)
            writer.write(data)
            conns.setdefault(name, []).append((reader, writer))
    started = time.monotonic()
    r = await client.post("/v1/audio/speech", json=SPEECH, headers=AUTH)  # served meanwhile
    assert r.status_code == 200 and len(r.content) > 44
    assert (await client.get("/health")).status_code == 200
    bound = max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S) + 2.0
    for name, pairs in conns.items():
        for reader, writer in pairs:
            data, _ = await _until_closed(reader, bound + 5)
            if expected.get(name, 408) is None:
                assert data == b"", name
            else:
                assert _status(data) == expected.get(name, 408), (name, data)
                assert b"request_timeout" in data and b"connection: close" in data.lower()
            writer.close()
    assert time.monotonic() - started < timeout(bound + 5)


async def test_a_request_stalled_in_its_headers_is_answered_408_after_the_deadline(exposed):
    reader, writer = await _open(exposed)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    data, elapsed = await _until_closed(reader, HEADER_TIMEOUT_S + 5)
    writer.close()
    assert _status(data) == 408
    assert 0.8 * HEADER_TIMEOUT_S <= elapsed < timeout(HEADER_TIMEOUT_S + 1.5)


async def test_idle_keep_alive_connection_is_closed(exposed):
    reader, writer = await _open(exposed)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout(10))
    assert _status(head) == 200
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    await reader.readexactly(length)
    rest, elapsed = await _until_closed(reader, KEEP_ALIVE_S + 5)
    writer.close()
    assert rest == b"" and elapsed < timeout(KEEP_ALIVE_S + 1.5)


@pytest.mark.parametrize("extra", [
    [("x-big", "a" * (MAX_HEADER_BYTES + 1))],
    [(f"x-h{i}", "1") for i in range(1000)],  # small headers, many: over the byte limit
    [(f"x-h{i}", "1") for i in range(MAX_HEADER_COUNT + 1)],  # under the byte limit, over the count
])  # fmt: skip
async def test_too_many_or_too_large_headers_get_431(exposed, extra):
    reader, writer = await _open(exposed)
    head = "GET /health HTTP/1.1\r\nHost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in extra) + "\r\n"
    writer.write(head.encode())
    data, _ = await _until_closed(reader, 10)
    writer.close()
    assert _status(data) == 431 and b"headers_too_large" in data


async def test_refusals_are_counted(client):
    r = await client.get("/metrics", headers=AUTH)
    assert 'uttera_refused_total{reason="unauthorized"}' in r.text
    assert 'uttera_refused_total{reason="timeout"}' in r.text
