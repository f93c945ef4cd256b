"""`--log-format json` on the real server: its stderr lines parse as JSON objects, and a request's id goes
from the client's `x-request-id` to the response header, every log line of the request, and the engine
request id (`http-<id>-...`, `ws-<id>-<segment>-...`)."""

import asyncio
import re

import httpx

from _replicas import Replica, live
from _server_process import timeout
from uttera_server.client import Done, SpeechStreamClient

TEXT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ |(INFO|WARNING|ERROR|DEBUG):\s)")
GENERATED_ID = re.compile(r"[0-9a-f]{32}")


async def lines_of(replica: Replica, request_id: str, logger: str) -> list[dict]:
    """The replica's JSON log lines of `request_id`, once one of them comes from `logger` (a line can trail
    the response it describes by a moment)."""
    async with asyncio.timeout(timeout(10)):
        while True:
            found = [line for line in replica.json_lines() if line.get("request_id") == request_id]
            if any(line["logger"] == logger for line in found):
                return found
            await asyncio.sleep(0.05)


def check_format(replica: Replica) -> None:
    """Every line of the server's own logging is a JSON object with the standard keys; what the engine's C++
    and progress bars print to stderr may stay raw, but no Python log line is in the text format."""
    text = replica.log_path.read_text(errors="replace").splitlines()
    assert not [line for line in text if TEXT_LINE.match(line)], "text-format log lines in JSON mode"
    objects = replica.json_lines()
    assert len(objects) > 10
    for obj in objects:
        assert {"time", "level", "logger", "message"} <= obj.keys(), obj
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", obj["time"]), obj
    loggers = {obj["logger"] for obj in objects}
    assert {"uttera_server", "uvicorn.error", "uvicorn.access"} <= loggers
    assert any(name.startswith("vllm.") for name in loggers), "vLLM's loggers are not routed to JSON"


async def test_http_request_id_end_to_end(replicas):
    replica = live(replicas)[0]
    async with httpx.AsyncClient(base_url=replica.url, timeout=timeout(60)) as http:
        r = await http.post(
            "/v1/audio/speech",
            json={"model": "uttera", "input": "Tracing one request.", "voice": "default"},
            headers={"x-request-id": "trace-1.a:b_c"},
        )
    assert r.status_code == 200 and r.headers["x-request-id"] == "trace-1.a:b_c"
    lines = await lines_of(replica, "trace-1.a:b_c", "uttera_server.http.speech")
    access = [x for x in lines if x["logger"] == "uvicorn.access"]
    assert access and "POST /v1/audio/speech" in access[0]["message"]
    done = next(x for x in lines if x["logger"] == "uttera_server.http.speech")
    assert done["transport"] == "http" and done["outcome"] == "ok"
    assert done["engine_request_id"] == "http-trace-1.a:b_c"
    assert 0 < done["ttfa_ms"] <= done["duration_ms"] and done["audio_s"] > 0
    check_format(replica)


async def test_invalid_request_id_is_replaced(replicas):
    replica = live(replicas)[0]
    async with httpx.AsyncClient(base_url=replica.url, timeout=timeout(30)) as http:
        for bad in ("has space", "x" * 129, "semi;colon"):
            r = await http.get("/health", headers={"x-request-id": bad})
            assert GENERATED_ID.fullmatch(r.headers["x-request-id"]), (bad, r.headers)
        r = await http.post("/v1/audio/speech", json={"input": ""}, headers={"x-request-id": "x" * 128})
        assert r.status_code == 400 and r.headers["x-request-id"] == "x" * 128  # errors carry it too
        r = await http.get("/v1/models")
        assert GENERATED_ID.fullmatch(r.headers["x-request-id"])


async def test_websocket_request_and_context_ids(replicas):
    replica = live(replicas)[0]
    url = replica.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    async with await SpeechStreamClient.connect(url, additional_headers={"x-request-id": "ws-trace-7"}) as client:
        assert client.ws.response.headers["x-request-id"] == "ws-trace-7"
        ctx = client.context("turn-1")
        await ctx.send_text("First sentence here. And a second one.")
        await ctx.end()
        result = await ctx.collect(timeout(60))
    assert isinstance(result.final, Done)
    segments = [
        x
        for x in await lines_of(replica, "ws-trace-7", "uttera_server.ws.endpoint")
        if x["logger"] == "uttera_server.ws.endpoint"
    ]
    assert segments, "no segment line"
    for line in segments:
        assert line["transport"] == "websocket" and line["context_id"] == "turn-1"
        assert re.fullmatch(r"ws-ws-trace-7-\d+", line["engine_request_id"]), line
        assert line["audio_s"] > 0 and line["duration_ms"] > 0
