"""Admission control on the `exposed` server (conftest.py; --max-waiting 1 --max-connections 16): past a
bound, 429 + Retry-After over HTTP and `error` overloaded + close 1013 over WebSocket, before any engine
work, counted in /metrics, while /health keeps answering at once."""

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from websockets.asyncio.client import connect

from _exposed_server import BODY_TIMEOUT_S, KEEP_ALIVE_S, KEYS, MAX_CONNECTIONS, MAX_WAITING
from _server_process import timeout
from _speech_client import expect_close, metric, read_metrics

AUTH = {"authorization": f"Bearer {KEYS[0]}"}
BURST = 10
MIN_PROBES = 5
# Six sentences (~15 s of audio): the admitted request streams long enough after the burst's sheds for
# /health to be probed many times (one sentence lasted ~0.35 s: two probes, and a median of two is one
# stall away from failing; three sentences still gave only three probes on a loaded machine).
TEXT = (
    "Admission control keeps the queue short, so that those admitted get their audio soon. "
    "Those turned away are told to come back in a second. "
    "Meanwhile the health check must keep answering at once. "
    "A load balancer asks it every few seconds, and a slow answer takes the server out of rotation. "
    "So the health check never waits behind speech, however long the queue. "
    "It reads a few counters and answers."
)


@pytest.fixture
async def client(exposed):
    async with httpx.AsyncClient(
        base_url=exposed.url,
        timeout=timeout(120),
        headers=AUTH,
        # Drop idle pooled connections well before the server's keep-alive timeout closes them: reusing one
        # as the server closes it is a client-side race ("Server disconnected without sending a response").
        limits=httpx.Limits(max_connections=100, keepalive_expiry=KEEP_ALIVE_S / 3),
    ) as c:
        yield c


def _http_requests(samples) -> float:
    return sum(
        v
        for (name, labels), v in samples.items()
        if name == "uttera_requests_total" and ("transport", "http") in labels
    )


async def test_a_burst_past_the_waiting_bound_is_shed_with_429(client):
    before = await read_metrics(client)
    health_s: list[float] = []
    in_flight = True

    # The burst arrives at once: every request sends its headers and most of its body, and the last bytes
    # of all bodies go out together once all have started (the waiting bound is checked when a body is
    # complete; opening ten connections one after another on a busy machine can take longer than the
    # first request's first audio, and then no request ever waits behind another).
    body = json.dumps({"model": "uttera", "input": TEXT}).encode()
    all_started = asyncio.Event()
    opened = 0

    async def gated_body() -> AsyncIterator[bytes]:
        nonlocal opened
        yield body[:-1]
        opened += 1
        if opened == BURST:
            all_started.set()
        with contextlib.suppress(TimeoutError):  # (bounded: a stalled body would get 408 after BODY_TIMEOUT_S)
            await asyncio.wait_for(all_started.wait(), BODY_TIMEOUT_S / 2)
        yield body[-1:]

    async def speak() -> httpx.Response:
        headers = {"content-type": "application/json"}
        async with client.stream("POST", "/v1/audio/speech", content=gated_body(), headers=headers) as r:
            await r.aread()
            return r

    async def probe() -> None:  # during the burst, and at least MIN_PROBES times
        while in_flight or len(health_s) < MIN_PROBES:
            started = time.monotonic()
            assert (await client.get("/health")).status_code == 200
            health_s.append(time.monotonic() - started)
            await asyncio.sleep(0.02)  # probe interval

    # Open the burst's connections first (ten /health responses held at once, then released to the pool):
    # on a loaded machine opening ten connections took longer than the body timeout (CI: 408s).
    async with contextlib.AsyncExitStack() as held:
        for _ in range(BURST):
            await held.enter_async_context(client.stream("GET", "/health"))
    prober = asyncio.create_task(probe())
    try:
        responses = await asyncio.gather(*(speak() for _ in range(BURST)))
    finally:
        in_flight = False
        await prober
    statuses = [r.status_code for r in responses]
    shed = [r for r in responses if r.status_code == 429]
    others = [(r.status_code, r.content[:200]) for r in responses if r.status_code not in (200, 429)]
    assert shed and statuses.count(200) >= MAX_WAITING and not others, (statuses, others)
    for r in shed:
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "overloaded"
    # The endpoint counts a request once its stream has ended on the server, which may be just after the
    # client read the last byte: wait (bounded) until the admitted ones are counted.
    deadline = time.monotonic() + timeout(5)
    while True:
        after = await read_metrics(client)
        if _http_requests(after) - _http_requests(before) >= BURST - len(shed) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    shed_count = metric(after, "uttera_shed_total", transport="http", bound="waiting") - metric(
        before, "uttera_shed_total", transport="http", bound="waiting"
    )
    assert shed_count == len(shed)
    # a shed request never reached the endpoint, so it is not among the requests the endpoint finished
    assert _http_requests(after) - _http_requests(before) == BURST - len(shed)
    print(
        f"\nburst of {BURST}: {len(shed)} shed; /health median {1000 * statistics.median(health_s):.1f} ms, "
        f"max {1000 * max(health_s):.1f} ms over {len(health_s)} probes"
    )
    assert statistics.median(health_s) < timeout(0.1)


async def test_websockets_past_the_connection_bound_get_1013(exposed, client):
    url = exposed.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    held = [await connect(url, additional_headers=AUTH) for _ in range(MAX_CONNECTIONS)]
    try:
        async with connect(url, additional_headers=AUTH) as refused:
            code, messages = await expect_close(refused)
        assert code == 1013 and '"code": "overloaded"' in messages[0]
        r = await client.post("/v1/audio/speech", json={"model": "uttera", "input": ""})
        assert r.status_code == 429 and r.headers["retry-after"] == "1"  # HTTP counts against the same bound
        assert (await client.get("/health")).status_code == 200  # probes are never shed
    finally:
        for ws in held:
            await ws.close()
    samples = await read_metrics(client)
    assert metric(samples, "uttera_shed_total", transport="websocket", bound="connections") >= 1
