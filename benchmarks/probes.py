"""Issue 10's probe battery, rerun against real servers: each of the nine findings of the issue's "Why"
list, tried as an attacker or a careless client would, with the answer and its timing recorded. Starts its
own `uttera serve` processes (this checkout's code) on free ports and stops them.

    python -m benchmarks.probes --model models/tiny-dev [--items 1,2,3] [--out /tmp/probes.json]

Items (issue 10, "Why"):
    1  incomplete requests (idle TCP, unfinished headers, short body, unfinished chunked body, 10 MB upload
       after its 413, the issue's `printf ... | nc -q 60` line, 100 such connections) on a default server
    2  SIGTERM with clients that stop reading (a 3,000-character HTTP request, a WebSocket with two
       1,500-character contexts), default 30 s grace period
    3  huge numbers in `speed` over HTTP and WebSocket
    4  clients leaving while their body is read: log lines and /metrics
    5  access control: API key, Origin, CORS preflight, text/plain bodies, 20 MB of headers, x-request-id
    6  150 concurrent requests and 300 idle WebSockets against --max-waiting / --max-connections
    7  RSS over five rounds of 150 concurrent requests
    8  a vocoder worker fault in the serving process (injected through this module's --faulty-serve
       wrapper): the request's answer, /health, the next request
    9  VLLM_USE_V2_MODEL_RUNNER=1: the server must refuse to start
Prints one line per check and writes them as JSON. A debugging aid for docs/reliability.md, not a test: the
tests under tests/server prove the same guarantees with assertions.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

SPEECH = "/v1/audio/speech"
STREAM = "/v1/audio/speech/stream"
KEY = "probe-key"
GOOD_ORIGIN = "https://good.example"
RESULTS: list[dict] = []


def record(item: int, check: str, observed: str, seconds: float | None = None, ok: bool = True) -> None:
    row = {"item": item, "check": check, "observed": observed, "ok": ok}
    if seconds is not None:
        row["seconds"] = round(seconds, 2)
    RESULTS.append(row)
    timing = f" ({seconds:.2f} s)" if seconds is not None else ""
    print(f"[{item}] {'ok ' if ok else 'BAD'} {check}: {observed}{timing}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`uttera serve` (or this module's fault wrapper) on a free port, its log in a temporary file."""

    def __init__(self, model: str, args: tuple = (), env: dict | None = None, faulty: bool = False):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="uttera-probe-", suffix=".log")[1])
        entry = (
            [sys.executable, "-m", "benchmarks.probes", "--faulty-serve"]
            if faulty
            else [sys.executable, "-m", "uttera_server"]
        )
        cmd = [
            *entry,
            "serve",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-num-seqs",
            "8",
            "--kv-cache-memory-bytes",
            str(256 << 20),
            *args,
        ]
        self.command = " ".join(cmd[1:])
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd, stdout=self.log_path.open("w"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    def wait_ready(self, timeout_s: float = 300) -> None:
        while time.monotonic() - self.started < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("server not ready in time")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _metric(text: str, name: str, **labels) -> float:
    """Sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def _raw(
    port: int, payload: bytes, *, read_s: float = 60.0, stream_body: int = 0, half_close: bool = False
) -> tuple[str, float]:
    """Send `payload` (then `stream_body` bytes of `a`, as fast as the server takes them), then wait for the
    answer. Returns (the status line, or `closed silently` / `no answer in N s` / `reset`, seconds from the
    connection to the answer or close)."""
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    s.settimeout(read_s)
    try:
        if payload:
            s.sendall(payload)
        sent = 0
        while sent < stream_body:
            try:
                sent += s.send(b"a" * min(65536, stream_body - sent))
            except OSError:
                break
        if half_close:
            s.shutdown(socket.SHUT_WR)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        answer = data.split(b"\r\n")[0].decode(errors="replace") if data else "closed silently"
        # then wait for the close
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
        return answer, time.monotonic() - t0
    except TimeoutError:
        return f"no answer in {read_s:.0f} s", time.monotonic() - t0
    except ConnectionResetError:
        return "reset", time.monotonic() - t0
    finally:
        s.close()


def _body(obj) -> bytes:
    return json.dumps(obj).encode()


PARTIAL = {
    "idle TCP connection, nothing sent": b"",
    "unfinished headers": b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: appl",
    "body shorter than its Content-Length": (
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: "
        b"application/json\r\nContent-Length: 50000\r\n\r\n{}"
    ),
    "unfinished chunked body": (
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        b'\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"mod\r\n'
    ),
    "half a WebSocket upgrade": b"GET /v1/audio/speech/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n",
}


def item1(model: str) -> None:
    server = Server(model)
    server.wait_ready()
    try:
        out: dict[str, tuple[str, float]] = {}

        def run(name, payload, **kw):
            out[name] = _raw(server.port, payload, **kw)

        threads = [threading.Thread(target=run, args=(n, p)) for n, p in PARTIAL.items()]
        upload = (
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000\r\n\r\n"
        )
        threads.append(threading.Thread(target=run, args=("10 MB upload", upload), kwargs={"stream_body": 10**7}))
        crowd: list[tuple[str, float]] = []

        def crowd_member(payload):
            crowd.append(_raw(server.port, payload, read_s=90))

        kinds = list(PARTIAL.values())
        threads += [threading.Thread(target=crowd_member, args=(kinds[i % len(kinds)],)) for i in range(100)]
        nc: dict[str, tuple[str, float]] = {}

        def run_nc(name, content_type):
            # the line (no Content-Type), and the same with one; nc -q 60 itself waits 60 s after its
            # input ends, so the answer's time is when its first byte arrives
            t0 = time.monotonic()
            p = subprocess.Popen(
                [
                    "bash",
                    "-c",
                    "printf 'POST /v1/audio/speech HTTP/1.1\\r\\nHost: x\\r\\n%s"
                    "Content-Length: 50000\\r\\n\\r\\n{}' | nc -q 60 127.0.0.1 %d" % (content_type, server.port),
                ],
                stdout=subprocess.PIPE,
            )
            first = p.stdout.readline()
            nc[name] = (first.decode(errors="replace").strip() or "(nothing)", time.monotonic() - t0)
            p.stdout.read()
            p.wait()

        threads += [
            threading.Thread(target=run_nc, args=(n, ct))
            for n, ct in (
                ("the issue's line: printf 'POST ... Content-Length: 50000 ... {}' | nc -q 60", ""),
                (
                    "the same with Content-Type: application/json (nc half-closes after its input)",
                    "Content-Type: application/json\\r\\n",
                ),
            )
        ]
        threads.append(
            threading.Thread(
                target=run,
                args=("the same body, then a half-close (as nc)", PARTIAL["body shorter than its Content-Length"]),
                kwargs={"half_close": True},
            )
        )
        for t in threads:
            t.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        r = httpx.post(
            server.url + SPEECH,
            json={"model": "uttera", "input": "A normal client meanwhile.", "response_format": "pcm"},
            timeout=60,
        )
        normal = (r.status_code, len(r.content), time.monotonic() - t0)
        health = httpx.get(server.url + "/health", timeout=10).status_code
        for t in threads:
            t.join()
        for name, (answer, s) in out.items():
            if name.startswith("idle") or "half-close" in name:
                ok = answer == "closed silently"  # nothing to answer: the client sent nothing, or left
            else:
                ok = ("413" if name.startswith("10 MB") else "408") in answer
            record(1, name, answer, s, ok)
        for name, (answer, s) in nc.items():  # nc -q 60 itself stays 60 s: its time says nothing of the server's
            record(1, name, answer, s, answer[9:12] in ("408", "415") or "half-closes" in name)
        answers: dict[str, int] = {}
        for a, _ in crowd:
            answers[a] = answers.get(a, 0) + 1
        record(
            1,
            "100 such connections (20 of each kind) held at once",
            f"all ended: {answers}; last after {max(s for _, s in crowd):.1f} s",
            None,
            all(not a.startswith("no answer") for a, _ in crowd),
        )
        record(
            1,
            "a normal request meanwhile",
            f"HTTP {normal[0]}, {normal[1]} bytes; /health {health}",
            normal[2],
            normal[0] == 200 and health == 200,
        )
    finally:
        server.stop()


def _small_buffer_socket(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    return s


async def item2(model: str) -> None:
    grace = 30.0
    text = "A long answer that a client asked for and then stopped reading, so the writes block. " * 40
    server = Server(model, ("--graceful-shutdown-timeout", str(grace)))
    server.wait_ready()
    try:
        http = _small_buffer_socket(server.port)
        body = _body({"model": "uttera", "input": text[:3000]})
        http.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        ws_url = server.url.replace("http://", "ws://") + STREAM
        async with connect(
            ws_url, sock=_small_buffer_socket(server.port), max_queue=1, open_timeout=60, close_timeout=1
        ) as ws:
            for cid in ("a", "b"):
                await ws.send(json.dumps({"type": "text", "text": text[:1500], "context_id": cid}))
                await ws.send(json.dumps({"type": "flush", "context_id": cid}))
            first = json.loads(await ws.recv())
            http.settimeout(60)
            http.recv(1)
            ws.transport.pause_reading()
            server.proc.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            code = await asyncio.to_thread(server.proc.wait, 120)
            elapsed = time.monotonic() - t0
        http.close()
        log = server.log()
        tracebacks = log.count("Traceback")
        named = {n: log.count(n) for n in ("CancelledError", "EngineDeadError")}
        record(
            2,
            f"SIGTERM, grace {grace:.0f} s, HTTP 3,000 chars + WebSocket 2 x 1,500 chars not reading "
            f"(first WebSocket message: {first.get('type')})",
            f"exit code {code}; {tracebacks} tracebacks, {named}",
            elapsed,
            elapsed < grace + 2 and tracebacks == 0 and not any(named.values()),
        )
    finally:
        server.stop()


async def _ws_first(url: str, messages: list[dict], **kw) -> tuple[str, float]:
    t0 = time.monotonic()
    try:
        async with connect(url, open_timeout=30, **kw) as ws:
            for m in messages:
                await ws.send(json.dumps(m))
            got = []
            try:
                while True:
                    msg = await asyncio.wait_for(ws.recv(), 60)
                    if isinstance(msg, str):
                        got.append(json.loads(msg))
                        if got[-1]["type"] in ("error", "done"):
                            break
            except ConnectionClosed:
                pass
            try:
                await asyncio.wait_for(ws.recv(), 2)
            except (ConnectionClosed, TimeoutError):
                pass
            rcvd = ws.close_code
        desc = ", ".join(f"{g['type']} {g.get('code', '')}".strip() for g in got)
        return f"{desc}; close {rcvd}", time.monotonic() - t0
    except InvalidStatus as e:
        return f"handshake refused: HTTP {e.response.status_code} {e.response.body[:120]!r}", time.monotonic() - t0


async def item3(server: Server) -> None:
    ws_url = server.url.replace("http://", "ws://") + STREAM
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        for name, raw in (
            ("speed 1e309", b"1e309"),
            ("speed integer of 400 digits", b"9" * 400),
            ("speed integer of 5,000 digits", b"9" * 5000),
        ):
            body = b'{"model": "uttera", "input": "Hello.", "speed": ' + raw + b"}"
            t0 = time.monotonic()
            r = await http.post(SPEECH, content=body, headers={"content-type": "application/json"})
            code = (
                r.json().get("error", {}).get("code")
                if r.headers.get("content-type", "").startswith("application/json")
                else None
            )
            record(3, f"HTTP {name}", f"HTTP {r.status_code} {code}", time.monotonic() - t0, r.status_code == 400)
    for name, number in (("speed 1e309", "1e309"), ("speed integer of 5,000 digits", "9" * 5000)):
        t0 = time.monotonic()
        try:
            async with connect(ws_url, open_timeout=30) as ws:
                await ws.send('{"type": "text", "text": "Hello.", "context_id": "c", "speed": ' + number + "}")
                msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
                try:
                    await asyncio.wait_for(ws.recv(), 3)
                except (ConnectionClosed, TimeoutError):
                    pass
                close = ws.close_code
        except ConnectionClosed as e:
            msg, close = {}, e.rcvd.code if e.rcvd else None
        # docs/protocol.md: a malformed message closes 1008; a value out of range (inf) ends the context only
        record(
            3,
            f"WebSocket {name}",
            f"{msg.get('type')} {msg.get('code')}; "
            f"{'socket still open after 3 s' if close is None else f'close {close}'}",
            time.monotonic() - t0,
            msg.get("type") == "error" and close != 1011,
        )


async def item4(server: Server) -> None:
    before_log = server.log()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        m0 = (await http.get("/metrics")).text
        t0 = time.monotonic()
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(
                b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 2000\r\n\r\n" + b'{"model": "uttera", "input": "' + b"a" * 100
            )
            time.sleep(0.1)
            s.close()
        await asyncio.sleep(2)
        m1 = (await http.get("/metrics")).text
    new = server.log()[len(before_log) :]
    errors = [line for line in new.splitlines() if " ERROR " in line or "Traceback" in line]
    infos = new.count("client left while sending its request body")
    d_err = _metric(m1, "uttera_requests_total", status="error") - _metric(m0, "uttera_requests_total", status="error")
    d_abort = _metric(m1, "uttera_client_aborts_total") - _metric(m0, "uttera_client_aborts_total")
    record(
        4,
        "10 clients leave while their body is read",
        f"{len(errors)} ERROR/traceback lines, {infos} INFO lines; /metrics: error requests +{d_err:.0f}, "
        f"client aborts +{d_abort:.0f}",
        time.monotonic() - t0,
        not errors and d_err == 0 and d_abort == 10,
    )


async def item5_default(server: Server) -> None:
    ws_url = server.url.replace("http://", "ws://") + STREAM
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        r = await http.post(
            SPEECH, content=_body({"model": "uttera", "input": "Hi."}), headers={"content-type": "text/plain"}
        )
        record(
            5,
            "POST with Content-Type: text/plain (default server)",
            f"HTTP {r.status_code} {r.json().get('error', {}).get('code')}",
            None,
            r.status_code == 415,
        )
        rid = "x" * 10_000
        r = await http.get("/health", headers={"x-request-id": rid})
        back = r.headers.get("x-request-id", "")
        record(
            5,
            "x-request-id of 10,000 characters",
            f"answered with an id of {len(back)} characters",
            None,
            len(back) <= 128,
        )
    answer, s = await asyncio.to_thread(
        _raw, server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", stream_body=20 << 20
    )
    record(5, "20 MB of headers", answer, s, "431" in answer)
    answer, s = await _ws_first(ws_url, [], additional_headers={"Origin": "https://evil.example"})
    record(5, "WebSocket with Origin https://evil.example (default server)", answer, s, "403" in answer)


async def item5_keyed(server: Server) -> None:
    ws_url = server.url.replace("http://", "ws://") + STREAM
    good = {"model": "uttera", "input": "Hello there.", "response_format": "pcm"}
    auth = {"authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        for name, headers, path, ok_status in (
            ("POST without a key", {}, SPEECH, 401),
            ("POST with a wrong key", {"authorization": "Bearer nope"}, SPEECH, 401),
            ("POST with the key", auth, SPEECH, 200),
            ("/health without a key", {}, "/health", 200),
            ("/metrics without a key", {}, "/metrics", 401),
        ):
            r = await (
                http.post(path, json=good, headers=headers) if path == SPEECH else http.get(path, headers=headers)
            )
            extra = r.json().get("error", {}).get("code") if r.status_code >= 400 else ""
            record(5, name, f"HTTP {r.status_code} {extra}".strip(), None, r.status_code == ok_status)
        r = await http.options(
            SPEECH, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        record(
            5,
            "CORS preflight from https://evil.example",
            f"HTTP {r.status_code}, access-control-allow-origin {r.headers.get('access-control-allow-origin')}",
            None,
            r.headers.get("access-control-allow-origin") is None,
        )
    text = [{"type": "text", "text": "Hello.", "context_id": "c"}, {"type": "end", "context_id": "c"}]
    for name, kw, expect in (
        ("WebSocket without a key", {}, "401"),
        ("WebSocket with the key as a subprotocol", {"subprotocols": [f"uttera.api-key.{KEY}", "uttera"]}, "done"),
        (
            "WebSocket with the key, Origin https://evil.example",
            {"additional_headers": {**auth, "Origin": "https://evil.example"}},
            "403",
        ),
        (
            "WebSocket with the key, Origin https://good.example",
            {"additional_headers": {**auth, "Origin": GOOD_ORIGIN}},
            "done",
        ),
    ):
        answer, s = await _ws_first(ws_url, text, **kw)
        record(5, name, answer, s, expect in answer)


async def item6(server: Server, max_waiting: int, max_connections: int) -> None:
    auth = {"authorization": f"Bearer {KEY}"}
    stop = asyncio.Event()
    health: list[float] = []

    async def probe_health(http):
        while not stop.is_set():
            t0 = time.monotonic()
            await http.get("/health")
            health.append(time.monotonic() - t0)
            await asyncio.sleep(0.05)

    async def one(http, i):
        t0 = time.monotonic()
        async with http.stream(
            "POST",
            SPEECH,
            json={
                "model": "uttera",
                "input": f"Request number {i} of a burst of one hundred and fifty.",
                "response_format": "pcm",
            },
        ) as r:
            ttfb = None
            async for _ in r.aiter_raw():
                ttfb = ttfb or time.monotonic() - t0
            return r.status_code, r.headers.get("retry-after"), ttfb, time.monotonic() - t0

    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(base_url=server.url, headers=auth, timeout=300, limits=limits) as http,
        httpx.AsyncClient(base_url=server.url, timeout=30) as hc,
    ):
        m0 = (await http.get("/metrics")).text
        watcher = asyncio.create_task(probe_health(hc))
        t0 = time.monotonic()
        results = await asyncio.gather(*(one(http, i) for i in range(150)))
        burst_s = time.monotonic() - t0
        stop.set()
        await watcher
        statuses: dict[int, int] = {}
        for st, *_ in results:
            statuses[st] = statuses.get(st, 0) + 1
        retry = {ra for st, ra, *_ in results if st == 429}
        ttfbs = sorted(t for st, _, t, _ in results if st == 200 and t)
        shed_ms = sorted(1000 * d for st, _, _, d in results if st == 429)
        m1 = (await http.get("/metrics")).text
        shed = _metric(m1, "uttera_shed_total") - _metric(m0, "uttera_shed_total")
        record(
            6,
            f"150 concurrent POSTs, --max-waiting {max_waiting} --max-connections {max_connections}",
            f"{statuses}; Retry-After {retry}; 429s answered in median {statistics.median(shed_ms or [0]):.0f} ms; "
            f"served TTFB median {statistics.median(ttfbs or [0]):.2f} s, max {max(ttfbs or [0]):.2f} s; "
            f"uttera_shed_total +{shed:.0f}; /health during: median {1000 * statistics.median(health):.0f} ms, "
            f"max {1000 * max(health):.0f} ms over {len(health)} probes",
            burst_s,
            statuses.get(429, 0) > 0 and set(statuses) <= {200, 429} and retry == {"1"},
        )
    ws_url = server.url.replace("http://", "ws://") + STREAM
    socks: list = []
    outcomes: dict = {}
    t0 = time.monotonic()
    for _ in range(300):
        try:
            ws = await connect(ws_url, additional_headers=auth, open_timeout=30)
        except Exception as e:  # counted
            outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
            continue
        socks.append(ws)
    opened = len(socks)
    await asyncio.sleep(1.0)
    closed_1013, errors = 0, set()
    for ws in socks:
        try:
            msg = await asyncio.wait_for(ws.recv(), 0.05)
            if isinstance(msg, str):
                errors.add(json.loads(msg).get("code"))
            await asyncio.wait_for(ws.recv(), 1.0)
        except (TimeoutError, ConnectionClosed):
            pass
        closed_1013 += ws.close_code == 1013
    live = sum(1 for ws in socks if ws.close_code is None)
    for ws in socks:
        await ws.close()
    record(
        6,
        "300 idle WebSockets",
        f"{opened} handshakes, {live} kept open, {closed_1013} closed 1013 "
        f"(error codes {errors or '-'}), other: {outcomes or '-'}",
        time.monotonic() - t0,
        live <= max_connections and closed_1013 > 0,
    )


async def item7(server: Server, rounds: int = 5, per_round: int = 150) -> None:
    rss = [server.rss_mb()]
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=server.url, timeout=600, limits=limits) as http:
        for r in range(rounds):
            t0 = time.monotonic()
            statuses = await asyncio.gather(
                *(
                    http.post(
                        SPEECH,
                        json={
                            "model": "uttera",
                            "input": f"Round {r}, request {i}: a sentence of ordinary length to speak.",
                            "response_format": "pcm",
                        },
                    )
                    for i in range(per_round)
                )
            )
            rss.append(server.rss_mb())
            ok = sum(1 for s in statuses if s.status_code == 200)
            print(
                f"  round {r}: {ok}/{per_round} ok in {time.monotonic() - t0:.0f} s, RSS {rss[-1]:.0f} MB", flush=True
            )
    steps = [b - a for a, b in zip(rss, rss[1:])]
    record(
        7,
        f"RSS over {rounds} rounds of {per_round} concurrent requests",
        " -> ".join(f"{x:.0f}" for x in rss) + " MB (per round " + ", ".join(f"{d:+.0f}" for d in steps) + ")",
    )


async def item8(model: str) -> None:
    flag = Path(tempfile.mkdtemp(prefix="uttera-fault-")) / "fault"
    server = Server(model, env={"UTTERA_PROBE_FAULT": str(flag)}, faulty=True)
    server.wait_ready()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            r = await http.post(
                SPEECH, json={"model": "uttera", "input": "Before the fault.", "response_format": "pcm"}
            )
            record(8, "a request before the fault", f"HTTP {r.status_code}, {len(r.content)} bytes")
            flag.touch()
            t0 = time.monotonic()
            try:
                r = await http.post(
                    SPEECH,
                    json={"model": "uttera", "input": "This request meets a broken vocoder.", "response_format": "pcm"},
                )
                desc = f"HTTP {r.status_code} {r.text[:160]}"
                ok = r.status_code >= 500
            except httpx.HTTPError as e:
                desc, ok = f"{type(e).__name__} (stream cut)", True
            record(8, "the request that meets the vocoder fault", desc, time.monotonic() - t0, ok)
            t0 = time.monotonic()
            h = await http.get("/health")
            record(
                8,
                "/health after the fault",
                f"HTTP {h.status_code} {h.text[:160]}",
                time.monotonic() - t0,
                h.status_code == 503 and h.json().get("status") == "failed",
            )
            t0 = time.monotonic()
            r = await http.post(
                SPEECH, json={"model": "uttera", "input": "And the next one.", "response_format": "pcm"}
            )
            record(
                8,
                "the next request",
                f"HTTP {r.status_code} {r.text[:160]}",
                time.monotonic() - t0,
                r.status_code == 503,
            )
        ws_url = server.url.replace("http://", "ws://") + STREAM
        answer, s = await _ws_first(
            ws_url, [{"type": "text", "text": "Over a socket.", "context_id": "c"}, {"type": "end", "context_id": "c"}]
        )
        record(8, "a WebSocket context after the fault", answer, s, "error" in answer)
        logged = server.log().count("vocoder worker failed")
        record(
            8,
            "the fault in the server log",
            f"{logged} ERROR line(s) 'vocoder worker failed' with the traceback",
            None,
            logged == 1,
        )
    finally:
        server.stop()


def item9(model: str) -> None:
    t0 = time.monotonic()
    server = Server(model, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    try:
        code = server.proc.wait(300)
    except subprocess.TimeoutExpired:
        code = None
    lines = [line for line in server.log().splitlines() if "VLLM_USE_V2_MODEL_RUNNER" in line]
    record(
        9,
        "VLLM_USE_V2_MODEL_RUNNER=1 uttera serve",
        f"exit code {code}: {lines[-1].strip()[:200] if lines else '?'}",
        time.monotonic() - t0,
        code not in (0, None),
    )
    server.stop()


def faulty_serve(argv: list[str]) -> int:
    """`uttera serve` whose vocoder raises once the file named by $UTTERA_PROBE_FAULT exists (item 8)."""
    from vocoder.streaming import StreamingVocoder

    flag, submit = os.environ["UTTERA_PROBE_FAULT"], StreamingVocoder.submit

    def broken(self, *args, **kwargs):
        if os.path.exists(flag):
            raise RuntimeError("injected vocoder fault (benchmarks/probes.py)")
        return submit(self, *args, **kwargs)

    StreamingVocoder.submit = broken  # type: ignore[method-assign]  # the fault injected
    from uttera_server.cli import main as cli_main

    return cli_main(argv)


async def main_async(args) -> None:
    items = {int(i) for i in args.items.split(",")}
    if items & {3, 4, 5, 7}:
        server = Server(args.model)
        server.wait_ready()
        try:
            if 3 in items:
                await item3(server)
            if 4 in items:
                await item4(server)
            if 5 in items:
                await item5_default(server)
            if 7 in items:
                await item7(server)
        finally:
            server.stop()
    if items & {5, 6}:
        mw, mc = 16, 100
        server = Server(
            args.model,
            ("--api-key", KEY, "--cors-origins", GOOD_ORIGIN, "--max-waiting", str(mw), "--max-connections", str(mc)),
        )
        server.wait_ready()
        try:
            if 5 in items:
                await item5_keyed(server)
            if 6 in items:
                await item6(server, mw, mc)
        finally:
            server.stop()
    if 1 in items:
        await asyncio.to_thread(item1, args.model)
    if 2 in items:
        await item2(args.model)
    if 8 in items:
        await item8(args.model)
    if 9 in items:
        await asyncio.to_thread(item9, args.model)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--faulty-serve":
        sys.exit(faulty_serve(sys.argv[2:]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--items", default="1,2,3,4,5,6,7,8,9")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/probes.json"))
    args = p.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    asyncio.run(main_async(args))
    bad = [r for r in RESULTS if not r["ok"]]
    print(f"{len(RESULTS)} checks, {len(bad)} not as expected")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"started": started, "checks": RESULTS}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
