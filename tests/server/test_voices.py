"""One model directory, several voices (config.json's `voices` list): the real server and engine on a tiny
random-weight directory with two voices, joe (voice token 1, the bos id: prompts unchanged) and heart
(token 255, an id the phoneme table does not use), through real HTTP and WebSocket clients."""

import asyncio
from pathlib import Path

import numpy as np
import pytest

from _server_process import start_server, timeout
from _speech_client import recv_json, send_json
from uttera_server.client import ContextError, Done, SpeechStreamClient

VOICES = {"joe": 1, "heart": 255}
TEXT = "Two voices, one model."
OTHER_TEXT = "Each context keeps its own voice."
RATE = 22050  # the tiny model's, shared by both voices (one vocoder)
# Float noise between batch shapes, at most, in int16 steps (measured: 0 or 1, in a few samples). The tiny
# model's two voices differ by 6 to 25 steps per sample on average (random weights: a quiet noise either way).
NOISE_LSB = 2


@pytest.fixture(scope="module")
def two_voice_server(tmp_path_factory):
    from uttera_server.tiny_model import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("models") / "two-voices", seed=0, voices=VOICES)
    server = start_server(Path(model), tmp_path_factory.mktemp("two-voice-server") / "server.log")
    yield server
    server.stop_cleanly()


@pytest.fixture
async def client(two_voice_server):
    import httpx

    async with httpx.AsyncClient(base_url=two_voice_server.url, timeout=timeout(120)) as c:
        yield c


@pytest.fixture
def voices_ws_url(two_voice_server) -> str:
    return two_voice_server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"


async def speech_pcm(client, text: str, voice: str) -> bytes:
    r = await client.post(
        "/v1/audio/speech", json={"model": "uttera", "input": text, "voice": voice, "response_format": "pcm"}
    )
    assert r.status_code == 200, r.text
    assert int(r.headers["x-sample-rate"]) == RATE
    assert r.content and len(r.content) % 2 == 0
    return r.content


def assert_same_voice(got: bytes, want: bytes, other: bytes, what: str) -> None:
    """`got` is `want` (the same voice and text, run alone), not `other` (the same text in the other
    voice): the same length, equal up to the float noise that another batch's shapes cause in the engine's
    matmuls (at most NOISE_LSB int16 steps, in a few samples), and ten times closer to `want` than the
    other voice is (mean absolute difference per sample)."""
    a, b, c = (np.frombuffer(x, "<i2").astype(np.int32) for x in (got, want, other))
    assert a.shape == b.shape, f"{what}: {a.size} samples, {b.size} alone"
    noise_max, noise = int(np.abs(a - b).max()), float(np.abs(a - b).mean())
    n = min(b.size, c.size)
    apart = float(np.abs(b[:n] - c[:n]).mean())
    assert noise_max <= NOISE_LSB, f"{what}: differs by up to {noise_max} LSB from its solo audio"
    assert apart > 10 * max(noise, 0.05), f"{what}: {noise} LSB from its solo audio, the other voice {apart}"


async def test_voices_lists_both_and_marks_the_first_the_default(client):
    body = (await client.get("/v1/audio/voices")).json()
    listed = [(v["id"], v["name"], v["language"], v["sample_rate"], v["default"]) for v in body["data"]]
    assert listed == [("joe", "joe", "en-US", RATE, True), ("heart", "heart", "en-US", RATE, False)]
    assert all({"gender", "teacher", "license", "random_weights"} <= set(v) for v in body["data"])
    spec = (await client.get("/openapi.json")).json()
    assert '"enum": ["default", "heart", "joe"]' in _json(spec)  # the ids a request may name, and the alias


def _json(obj) -> str:
    import json

    return json.dumps(obj, sort_keys=True)


async def test_http_default_is_the_first_voice_and_the_voice_token_changes_the_audio(client):
    joe = await speech_pcm(client, TEXT, "joe")
    assert await speech_pcm(client, TEXT, "default") == joe
    assert await speech_pcm(client, TEXT, "joe") == joe  # deterministic, so the comparisons below mean something
    heart = await speech_pcm(client, TEXT, "heart")
    assert heart != joe  # another first token, another voice (random weights, but a different prompt)


async def test_an_unknown_voice_is_a_typed_error_on_both_transports(client, voices_ws_url):
    r = await client.post("/v1/audio/speech", json={"model": "uttera", "input": TEXT, "voice": "nobody"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["param"]) == ("unknown_voice", "voice")
    assert all(v in error["message"] for v in ("default", "heart", "joe"))
    from websockets.asyncio.client import connect

    async with connect(voices_ws_url) as ws:
        await send_json(ws, type="text", text=TEXT, voice="nobody", context_id="c")
        msg = await recv_json(ws)
        assert (msg["type"], msg["code"], msg["context_id"]) == ("error", "unknown_voice", "c")


async def test_two_contexts_in_two_voices_on_one_socket_match_http(client, voices_ws_url):
    want = {v: await speech_pcm(client, t, v) for v, t in (("joe", TEXT), ("heart", OTHER_TEXT))}
    async with await SpeechStreamClient.connect(voices_ws_url) as ws:
        joe, heart = ws.context("a", voice="joe"), ws.context("b", voice="heart")
        # interleaved on the socket, each context's whole text in one segment (as one HTTP request)
        await joe.send_text(TEXT)
        await heart.send_text(OTHER_TEXT)
        await joe.end()
        await heart.end()
        got = await asyncio.gather(joe.collect(timeout(120)), heart.collect(timeout(120)))
    other = {"joe": await speech_pcm(client, TEXT, "heart"), "heart": await speech_pcm(client, OTHER_TEXT, "joe")}
    for result, voice in zip(got, ("joe", "heart")):
        assert isinstance(result.final, Done), result.final
        assert result.sample_rate == RATE
        assert_same_voice(result.pcm, want[voice], other[voice], f"context in {voice}")


async def test_a_context_keeps_its_voice(voices_ws_url):
    async with await SpeechStreamClient.connect(voices_ws_url) as ws:
        ctx = ws.context("a", voice="heart")
        await ctx.send_text("Hello ")
        await ws.send(type="text", text="there.", context_id="a", voice="joe")
        await ctx.end()
        refused = await ctx.collect(timeout(120))  # up to the error, which does not end the context
        rest = await ctx.collect(timeout(120))
    assert isinstance(refused.final, ContextError) and refused.final.code == "context_conflict"
    assert isinstance(rest.final, Done) and rest.final.characters == len("Hello ")


async def test_both_voices_in_flight_at_once_match_their_solo_audio(client):
    texts = [(TEXT, "joe"), (TEXT, "heart"), (OTHER_TEXT, "joe"), (OTHER_TEXT, "heart")]
    alone = [await speech_pcm(client, t, v) for t, v in texts]
    together = await asyncio.gather(*(speech_pcm(client, t, v) for t, v in texts))  # one engine batch
    for i, ((t, v), solo, batched) in enumerate(zip(texts, alone, together)):
        assert_same_voice(batched, solo, alone[i ^ 1], f"{v} on {t!r} batched with the other voice")
