"""POST /v1/audio/speech against the real server: streamed audio, concurrency, every bad input, disconnects."""

import asyncio
import json
import time

import httpx
import pytest

from _server_process import MAX_INPUT_CHARS, timeout
from uttera_server.synthesis.speed import MIN_SPEED
from _speech_client import metric, parse_wav_header, read_metrics, requests_total, wait_for_metrics

SENTENCE = "The quick brown fox jumps over the lazy dog. "
LONG_TEXT = (SENTENCE * 20)[:MAX_INPUT_CHARS]


def speech(**fields) -> dict:
    return {"model": "uttera", "input": "Hello there.", **fields}


async def test_wav_streams_header_then_pcm(http):
    first_at = None
    async with http.stream("POST", "/v1/audio/speech", json=speech(input=LONG_TEXT)) as r:
        started = time.monotonic()
        assert r.status_code == 200
        assert r.headers["content-type"] == "audio/wav"
        assert r.headers["transfer-encoding"] == "chunked" and "content-length" not in r.headers
        rate = int(r.headers["x-sample-rate"])
        body = bytearray()
        async for part in r.aiter_raw():
            first_at = first_at or time.monotonic()
            body += part
        finished = time.monotonic()
    header = parse_wav_header(bytes(body[:44]))
    assert header["sample_rate"] == rate and header["channels"] == 1 and header["bits"] == 16
    assert header["riff_size"] == header["data_size"] == 0xFFFFFFFF
    pcm = body[44:]
    assert len(pcm) > 0 and len(pcm) % 2 == 0
    # the first bytes left before the last was generated
    assert first_at - started < 0.5 * (finished - started)


async def test_pcm_is_raw_s16le(http):
    r = await http.post("/v1/audio/speech", json=speech(response_format="pcm", speed=1.5))
    assert r.status_code == 200 and r.headers["content-type"] == "audio/pcm"
    assert r.headers["x-audio-format"] == "pcm_s16le" and int(r.headers["x-sample-rate"]) > 0
    assert len(r.content) > 0 and len(r.content) % 2 == 0 and not r.content.startswith(b"RIFF")


async def test_model_id_and_alias_are_both_accepted(http):
    models = [m["id"] for m in (await http.get("/v1/models")).json()["data"]]
    for model in models:
        r = await http.post("/v1/audio/speech", json=speech(model=model, response_format="pcm"))
        assert r.status_code == 200, (model, r.text)


async def test_concurrent_requests(http):
    texts = [f"Request number {i}. " + SENTENCE for i in range(4)]
    responses = await asyncio.gather(
        *(http.post("/v1/audio/speech", json=speech(input=t, response_format="pcm")) for t in texts)
    )
    for r in responses:
        assert r.status_code == 200 and len(r.content) > 0 and len(r.content) % 2 == 0


@pytest.mark.parametrize("body, status, code, param", [
    (speech(input=""), 400, "empty_input", "input"),
    (speech(input="  \n\t "), 400, "empty_input", "input"),
    (speech(input="x" * (MAX_INPUT_CHARS + 1)), 400, "input_too_long", "input"),
    (speech(voice="nobody"), 400, "unknown_voice", "voice"),
    (speech(model="tts-1"), 404, "model_not_found", "model"),
    (speech(response_format="ogg"), 400, "unsupported_format", "response_format"),
    (speech(response_format="opus", stream_format="jsonl"), 400, "unsupported_format", "stream_format"),
    (speech(speed=0.2), 400, "invalid_speed", "speed"),
    (speech(speed=4.5), 400, "invalid_speed", "speed"),
    (speech(speed="fast"), 400, "invalid_type", "speed"),
    (speech(speed=True), 400, "invalid_type", "speed"),
    (speech(input=["Hello"]), 400, "invalid_type", "input"),
    (speech(voice=7), 400, "invalid_type", "voice"),
    ({"model": "uttera"}, 400, "missing_field", "input"),
    ({"input": "Hello."}, 400, "missing_field", "model"),
])  # fmt: skip
async def test_bad_input(http, body, status, code, param):
    r = await http.post("/v1/audio/speech", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["code"], error.get("param"), error["type"]) == (code, param, "invalid_request_error")
    assert error["message"]


async def test_unsupported_format_message_lists_the_supported_ones(http):
    r = await http.post("/v1/audio/speech", json=speech(response_format="vorbis"))
    assert "wav, pcm, mp3, opus, flac, aac, mulaw" in r.json()["error"]["message"]


@pytest.mark.parametrize("content, code", [
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_json"),
    (b"", "invalid_json"),
    (b"\xff\xfe\x00", "invalid_json"),
])  # fmt: skip
async def test_malformed_body(http, content, code):
    r = await http.post("/v1/audio/speech", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == code


async def test_oversized_body_is_refused(http):
    r = await http.post("/v1/audio/speech", content=json.dumps(speech(input="x" * 200_000)))
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


async def test_errors_are_counted(http):
    before = requests_total(await read_metrics(http), "http", "error")
    await http.post("/v1/audio/speech", json=speech(input=""))
    await wait_for_metrics(http, lambda s: requests_total(s, "http", "error") >= before + 1)


async def test_client_disconnect_aborts_the_stream(http, base_url):
    before = requests_total(await read_metrics(http), "http", "disconnected")
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout(60)) as client:
        # At the slowest speed the response (5.9 MB with the tiny model; 1.5 MB at speed 1, which once fit whole
        # into the loopback socket buffers, 4 MB of send buffer at most, before the client left) cannot all be
        # written before the client leaves, however fast the tiny model is.
        body = speech(input=LONG_TEXT, speed=MIN_SPEED)
        async with client.stream("POST", "/v1/audio/speech", json=body) as r:
            assert r.status_code == 200
            async for _ in r.aiter_raw():
                break  # leave after the first bytes: the client closes the connection
    await wait_for_metrics(
        http,
        lambda s: requests_total(s, "http", "disconnected") >= before + 1 and metric(s, "uttera_active_streams") == 0,
    )
    # The engine request was aborted: nothing runs and its KV blocks are free again. (The engine reports
    # usage when it steps, so a short request makes it report after the abort.)
    assert (await http.post("/v1/audio/speech", json=speech(input="Hi."))).status_code == 200
    await wait_for_metrics(
        http,
        lambda s: metric(s, "uttera_engine_running_requests") == 0 and metric(s, "uttera_engine_kv_cache_usage") == 0,
    )
