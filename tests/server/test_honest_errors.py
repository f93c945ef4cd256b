"""Client mistakes answered as client errors on the shared server: numbers JSON can write but Python
cannot hold as a float or an int get 400 / close 1008 (never 500 / 1011), and a client that leaves
while sending its body is an INFO line and a client abort, not an ERROR with a traceback."""

import asyncio

import pytest
from websockets.asyncio.client import connect

from _server_process import timeout
from _speech_client import expect_close, metric, read_metrics, wait_for_metrics

HUGE_INT = "1" + "0" * 400  # beyond float range (~1.8e308)
TOO_MANY_DIGITS = "9" * 5000  # beyond Python's 4,300-digit int parsing limit


@pytest.mark.parametrize("speed, code", [
    ("1e309", "invalid_speed"),  # parses as inf
    ("-1e309", "invalid_speed"),
    (HUGE_INT, "invalid_type"),
    (TOO_MANY_DIGITS, "invalid_json"),
    ("NaN", "invalid_speed"),
])  # fmt: skip
async def test_huge_numbers_over_http_are_400(http, speed, code):
    body = '{"model": "uttera", "input": "Hello.", "speed": ' + speed + "}"
    r = await http.post("/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code


async def test_deep_nesting_is_400(http):
    body = '{"model": "uttera", "input": "Hello.", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = await http.post("/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    assert r.status_code in (400, 413), r.text  # 413 if the server's body limit is below the payload
    assert r.json()["error"]["code"] in ("invalid_json", "request_too_large")


@pytest.mark.parametrize("speed, code", [(HUGE_INT, "invalid_type"), (TOO_MANY_DIGITS, "invalid_json")])
async def test_huge_numbers_over_websocket_close_1008(ws_url, speed, code):
    async with connect(ws_url, open_timeout=timeout(30)) as ws:
        await ws.send('{"type": "text", "text": "Hello.", "speed": ' + speed + "}")
        close_code, messages = await expect_close(ws)
    assert close_code == 1008
    assert f'"code": "{code}"' in messages[0]


async def test_client_leaving_during_its_body_is_an_info_line(server, http):
    before = await read_metrics(http)
    host, port = server.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 5000\r\n\r\n{"model": '
    )
    await writer.drain()
    writer.close()  # the headers are complete, so the endpoint runs and finds the body cut short
    await wait_for_metrics(
        http, lambda s: metric(s, "uttera_client_aborts_total") > metric(before, "uttera_client_aborts_total")
    )
    after = await read_metrics(http)
    assert metric(after, "uttera_requests_total", transport="http", status="error") == metric(
        before, "uttera_requests_total", transport="http", status="error"
    )
    log = server.log_tail(400)
    assert "client left while sending its request body" in log
    assert "ClientDisconnect" not in log
    assert " INFO uttera_server.guard: client left while sending its request body" in log
