"""One speech request over each transport, recorded chunk by chunk as a `RequestRecord`.

HTTP: `POST /v1/audio/speech` with `response_format=pcm` (s16le mono, rate in `x-sample-rate`); every
body chunk read is one arrival. WebSocket: on an open socket, `text` then `end` for a fresh context id;
binary frames (0x01, id length, id, PCM s16le) are arrivals, `done` ends the request. TTFA runs from
sending the request (HTTP) or the `text` message (WebSocket: the connection is already open, as a
voice agent keeps it). Errors become codes: `http_<status>_<code>`, `ws_<code>`, `timeout`,
`exc_<ExceptionName>`.
"""

import asyncio
import itertools
import json
import time

import httpx
import websockets

from benchmarks.playback import RequestRecord

_ids = itertools.count()


async def http_request(client: httpx.AsyncClient, text: str, kind: str, timeout_s: float) -> RequestRecord:
    rec = RequestRecord("http", kind, len(text), time.perf_counter())
    body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", "/v1/audio/speech", json=body) as r:
                if r.status_code != 200:
                    raw = await r.aread()
                    try:
                        code = json.loads(raw)["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        code = "unknown"
                    rec.error = f"http_{r.status_code}_{code}"
                    return rec
                rec.sample_rate = int(r.headers.get("x-sample-rate", rec.sample_rate))
                async for chunk in r.aiter_bytes():
                    rec.add(time.perf_counter(), len(chunk) / 2)
        rec.t_done = time.perf_counter()
    except TimeoutError:
        rec.error = "timeout"
    except Exception as e:  # connection refused/reset, protocol errors: counted, not raised
        rec.error = f"exc_{type(e).__name__}"
    return rec


async def ws_request(ws, text: str, kind: str, timeout_s: float) -> RequestRecord:
    """One context on an open socket `ws` (websockets client connection)."""
    context = f"c{next(_ids)}"
    rec = RequestRecord("ws", kind, len(text), time.perf_counter())
    try:
        async with asyncio.timeout(timeout_s):
            await ws.send(json.dumps({"type": "text", "text": text, "context_id": context}))
            await ws.send(json.dumps({"type": "end", "context_id": context}))
            while True:
                msg = await ws.recv()
                if isinstance(msg, bytes):
                    n = msg[1]
                    if msg[2:2 + n].decode() == context:
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
        rec.error = f"exc_{type(e).__name__}"
    return rec


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://", 1) + "/v1/audio/speech/stream"


async def ws_connect(base_url: str):
    return await websockets.connect(ws_url(base_url), max_size=None, open_timeout=60)
