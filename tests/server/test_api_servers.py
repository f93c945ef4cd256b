"""Several serving processes on one engine (`uttera serve --api-servers 2`, uttera_server/frontends.py),
with the vocoder in the engine's worker: the real supervisor, engine core and serving processes on one
port, real HTTP and WebSocket clients.

Checked: connections are spread over both processes and every stream is served whole (its audio is
complete and equals the same text served alone); a WebSocket session with several contexts lives on
one process; `/metrics` from either process counts the requests of both; SIGTERM stops them all.
"""

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from _server_process import server_tmpdir, start_server, timeout
from _speech_client import metric, read_metrics, recv, requests_total
from uttera_server.ws.messages import decode_audio_frame

TEXTS = [f"Stream number {i} says hello to everyone listening." for i in range(12)]


@pytest.fixture(scope="module")
def server_tmp() -> Iterator[Path]:
    """The server's TMPDIR: where it makes its Prometheus multiprocess directory and its IPC directory."""
    with server_tmpdir() as path:
        yield path


@pytest.fixture(scope="module")
def two_frontends(model_dir, tmp_path_factory, server_tmp):
    s = start_server(
        model_dir,
        tmp_path_factory.mktemp("api2") / "server.log",
        ("--api-servers", "2", "--vocoder-process", "engine"),
        env={"TMPDIR": str(server_tmp)},
    )
    yield s
    s.stop_cleanly()
    # a stopped server leaves no metrics or IPC directory behind (one per start piled up in /tmp before)
    assert not list(server_tmp.glob("uttera-*")), list(server_tmp.iterdir())
    assert not [p for p in server_tmp.rglob("*") if p.is_socket()], list(server_tmp.rglob("*"))


async def _speech(url: str, text: str) -> bytes:
    # A client per request: a new connection, which the kernel gives to either serving process.
    async with httpx.AsyncClient(base_url=url, timeout=timeout(120)) as client:
        r = await client.post(
            "/v1/audio/speech", json={"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
        )
        assert r.status_code == 200, r.text
        return r.content


async def _serving_process(url: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=timeout(30)) as client:
        r = await client.get("/health")
        assert r.status_code == 200
        return r.json()["serving_process"]


async def test_connections_reach_both_processes(two_frontends):
    seen = set()
    for _ in range(40):
        seen |= set(await asyncio.gather(*(_serving_process(two_frontends.url) for _ in range(8))))
        if seen == {0, 1}:
            break
    assert seen == {0, 1}


async def test_each_serving_process_freezes_its_heap_once_the_engine_is_up(two_frontends):
    # uttera_server/heap.py: the collector's full passes stop walking what startup made (RESULTS.md,
    # "The collector's pause"); each process logs the objects frozen and a full pass before and after.
    frozen: list[str] = []
    for _ in range(120):  # /health may answer from one process while the other still starts
        frozen = [
            line for line in two_frontends.log_path.read_text(errors="replace").splitlines() if "heap frozen" in line
        ]
        if len(frozen) >= 2:
            break
        await asyncio.sleep(0.5)
    assert len(frozen) == 2, frozen
    for line in frozen:
        objects = int(line.split("heap frozen: ")[1].split(" objects")[0])
        assert objects > 100_000


async def test_concurrent_streams_whole_and_summed_in_metrics(two_frontends):
    async with httpx.AsyncClient(base_url=two_frontends.url, timeout=timeout(30)) as client:
        samples = await read_metrics(client)
        before = requests_total(samples, "http", "ok")
        stopped = metric(samples, "uttera_engine_requests_finished_total", reason="stop")
    alone = await _speech(two_frontends.url, TEXTS[0])
    together = await asyncio.gather(*(_speech(two_frontends.url, t) for t in TEXTS))
    # Deterministic engine: a stream's audio does not depend on which process served it or on the
    # streams beside it (batching changes float rounding by at most an LSB or so).
    a, b = np.frombuffer(alone, np.int16), np.frombuffer(together[0], np.int16)
    assert a.shape == b.shape and a.size > 0
    assert np.abs(a.astype(np.int32) - b).max() <= 2
    assert all(len(pcm) > 0 for pcm in together)
    # Counters are summed over both serving processes, whichever answers.
    for _ in range(4):
        async with httpx.AsyncClient(base_url=two_frontends.url, timeout=timeout(30)) as client:
            samples = await read_metrics(client)
        assert requests_total(samples, "http", "ok") - before == len(TEXTS) + 1
        # The engine's figures too: each text is one sentence, one engine request, whichever process
        # sent it; and the engine is idle again, as the last report any process received says.
        assert metric(samples, "uttera_engine_requests_finished_total", reason="stop") - stopped == len(TEXTS) + 1
        assert metric(samples, "uttera_engine_running_requests") == 0


async def test_websocket_session_with_several_contexts(two_frontends):
    url = two_frontends.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    async with connect(url, open_timeout=timeout(30)) as ws:
        for cid in ("a", "b"):
            await ws.send(json.dumps({"type": "text", "context_id": cid, "text": f"Context {cid} speaks now."}))
            await ws.send(json.dumps({"type": "end", "context_id": cid}))
        audio, done = {"a": 0, "b": 0}, set()
        while done != {"a", "b"}:
            msg = await recv(ws)
            if isinstance(msg, bytes):
                cid, pcm = decode_audio_frame(msg)
                audio[cid] += len(pcm)
            else:
                m = json.loads(msg)
                assert m["type"] != "error", m
                if m["type"] == "done":
                    done.add(m["context_id"])
        assert audio["a"] > 0 and audio["b"] > 0


def test_the_serving_processes_share_one_metrics_directory(two_frontends, server_tmp):
    (metrics,) = server_tmp.glob("uttera-metrics-*")
    writers = {path.stem.rsplit("_", 1)[1] for path in metrics.glob("*.db")}
    assert len(writers) >= 2, sorted(p.name for p in metrics.iterdir())  # both serving processes' pids
