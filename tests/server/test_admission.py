"""Admission control on the `exposed` server (conftest.py; --max-waiting 1 --max-connections 16): past a
bound, 429 + Retry-After over HTTP and `error` overloaded + close 1013 over WebSocket, before any engine
work, counted in /metrics, while /health keeps answering at once."""

import asyncio
import statistics
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from _exposed_server import KEYS, MAX_CONNECTIONS, MAX_WAITING
from _server_process import timeout
from _speech_client import expect_close, metric, read_metrics

AUTH = {"authorization": f"Bearer {KEYS[0]}"}
BURST = 10
TEXT = "Admission control keeps the queue short, so that those admitted get their audio soon."


@pytest.fixture
async def client(exposed):
    async with httpx.AsyncClient(
        base_url=exposed.url, timeout=timeout(120), headers=AUTH, limits=httpx.Limits(max_connections=100)
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

    async def speak() -> httpx.Response:
        async with client.stream("POST", "/v1/audio/speech", json={"model": "uttera", "input": TEXT}) as r:
            await r.aread()
            return r

    async def probe() -> None:
        while in_flight:
            started = time.monotonic()
            assert (await client.get("/health")).status_code == 200
            health_s.append(time.monotonic() - started)
            await asyncio.sleep(0.02)  # probe interval

    prober = asyncio.create_task(probe())
    try:
        responses = await asyncio.gather(*(speak() for _ in range(BURST)))
    finally:
        in_flight = False
        await prober
    statuses = [r.status_code for r in responses]
    shed = [r for r in responses if r.status_code == 429]
    assert shed and statuses.count(200) >= MAX_WAITING and set(statuses) <= {200, 429}, statuses
    for r in shed:
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "overloaded"
    after = await read_metrics(client)
    shed_count = metric(after, "uttera_shed_total", transport="http", bound="waiting") - metric(
        before, "uttera_shed_total", transport="http", bound="waiting"
    )
    assert shed_count == len(shed)
    # a shed request never reached the endpoint, so it is not among the requests the endpoint finished
    assert _http_requests(after) - _http_requests(before) == BURST - len(shed)
    assert len(health_s) >= 3
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
