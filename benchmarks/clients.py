"""One speech request over each transport, recorded chunk by chunk as a `RequestRecord`.

HTTP: `POST /v1/audio/speech` with `response_format=pcm` (s16le mono, rate in `x-sample-rate`); every
body chunk read is one arrival. WebSocket: on an open socket, `text` then `end` for a fresh context id;
binary frames (0x01, id length, id, PCM s16le) are arrivals, `done` ends the request. TTFA runs from
sending the request (HTTP) or the `text` message (WebSocket: the connection is already open, as a
voice agent keeps it). Errors become codes: `http_<status>_<code>`, `ws_<code>`, `timeout`,
`exc_<ExceptionName>` (`exc_<ExceptionName>_mid_stream` once audio had arrived).

Sessions for the load drivers (loop.py, paced.py): `session_factory(transport, ...)` gives `open_session(i)`,
an async context manager whose session has `request(text, kind)`: HTTP over a shared client, or one
WebSocket per session.

The HTTP client is aiohttp's (its C parser; vLLM depends on it): streaming 2 KB chunks from a local server,
httpx cost a client process ~600 µs of CPU a chunk and could not read more than ~1,450 chunks/s, aiohttp
~28 µs (`python -m benchmarks.client_cost`). With httpx, four client processes at 1,024 streams ran at
85–99 % of a core with their loops stalled for seconds (benchmarks/RESULTS.md, 2026-12-07).
"""

import asyncio
import contextlib
import itertools
import json
import time

import aiohttp
import websockets

from benchmarks.playback import RequestRecord

_ids = itertools.count()


async def http_request(
    client: aiohttp.ClientSession, text: str, kind: str, timeout_s: float, voice: str = "default"
) -> RequestRecord:
    rec = RequestRecord("http", kind, len(text), time.perf_counter(), voice=voice)
    body = {"model": "uttera", "input": text, "voice": voice, "response_format": "pcm"}
    try:
        async with asyncio.timeout(timeout_s):
            async with client.post("/v1/audio/speech", json=body) as r:
                if r.status != 200:
                    raw = await r.read()
                    try:
                        code = json.loads(raw)["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        code = "unknown"
                    rec.error = f"http_{r.status}_{code}"
                    return rec
                rec.sample_rate = int(r.headers.get("x-sample-rate", rec.sample_rate))
                async for chunk in r.content.iter_any():
                    rec.add(time.perf_counter(), len(chunk) / 2)
        rec.t_done = time.perf_counter()
    except TimeoutError:
        rec.error = "timeout"
    except Exception as e:  # connection refused/reset, protocol errors: counted, not raised
        rec.error = _exc_code(e, rec)
    return rec


def _exc_code(e: Exception, rec: RequestRecord) -> str:
    """`exc_<Name>`, with `_mid_stream` once audio had arrived (the response was cut short)."""
    return f"exc_{type(e).__name__}{'_mid_stream' if rec.arrivals else ''}"


async def ws_request(ws, text: str, kind: str, timeout_s: float, voice: str = "default") -> RequestRecord:
    """One context on an open socket `ws` (websockets client connection)."""
    context = f"c{next(_ids)}"
    rec = RequestRecord("ws", kind, len(text), time.perf_counter(), voice=voice)
    try:
        async with asyncio.timeout(timeout_s):
            await ws.send(json.dumps({"type": "text", "text": text, "context_id": context, "voice": voice}))
            await ws.send(json.dumps({"type": "end", "context_id": context}))
            while True:
                msg = await ws.recv()
                if isinstance(msg, bytes):
                    n = msg[1]
                    if msg[2 : 2 + n].decode() == context:
                        rec.add(time.perf_counter(), (len(msg) - 2 - n) / 2)
                    continue
                m = json.loads(msg)
                if m.get("context_id") not in (None, context):
                    continue
                if m["type"] == "started":
                    rec.sample_rate = int(m["sample_rate"])
                elif m["type"] == "done":
                    rec.t_done = time.perf_counter()
                    return rec
                elif m["type"] in ("error", "cancelled"):
                    rec.error = f"ws_{m.get('code', m['type'])}"
                    return rec
    except TimeoutError:
        rec.error = "timeout"
    except Exception as e:
        rec.error = _exc_code(e, rec)
    return rec


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://", 1) + "/v1/audio/speech/stream"


async def ws_connect(base_url: str):
    return await websockets.connect(ws_url(base_url), max_size=None, open_timeout=60)


class HttpSession:
    def __init__(self, client: aiohttp.ClientSession, timeout_s: float, voice: str = "default"):
        self.client, self.timeout_s, self.voice = client, timeout_s, voice

    async def request(self, text: str, kind: str) -> RequestRecord:
        return await http_request(self.client, text, kind, self.timeout_s, self.voice)


class WsSession:
    """One socket per session, reopened after a failed request (its state is unknown then)."""

    def __init__(self, base_url: str, timeout_s: float, voice: str = "default"):
        self.base_url, self.timeout_s, self.voice, self.ws = base_url, timeout_s, voice, None

    async def request(self, text: str, kind: str) -> RequestRecord:
        if self.ws is None:
            try:
                self.ws = await ws_connect(self.base_url)
            except Exception as e:
                rec = RequestRecord("ws", kind, len(text), time.perf_counter(), voice=self.voice)
                rec.error = f"exc_connect_{type(e).__name__}"
                return rec
        rec = await ws_request(self.ws, text, kind, self.timeout_s, self.voice)
        if rec.error:
            await self.close()
        return rec

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
            self.ws = None


def session_factory(
    transport: str,
    base_url: str,
    client: aiohttp.ClientSession,
    timeout_s: float,
    voices: tuple[str, ...] = ("default",),
):
    """Session `i` asks for `voices[i % len(voices)]` (mixed voices: one per session, dealt round-robin)."""

    @contextlib.asynccontextmanager
    async def open_session(i: int):
        voice = voices[i % len(voices)]
        if transport == "http":
            yield HttpSession(client, timeout_s, voice)
            return
        session = WsSession(base_url, timeout_s, voice)
        try:
            yield session
        finally:
            await session.close()

    return open_session


def load_client(base_url: str, timeout_s: float) -> aiohttp.ClientSession:
    """The load generator's HTTP client: no connection limit, so every worker streams at once; each request
    has its own deadline (`http_request`'s `timeout_s`), the session none."""
    return aiohttp.ClientSession(
        base_url=base_url,
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, connect=timeout_s),
    )
