"""The official `openai` Python SDK, unchanged, against the real server: its streaming speech call for every
response_format, and `stream_format="sse"`."""

import base64
import json
from collections.abc import Iterator

import openai
import pytest

from _server_process import timeout
from uttera_server.speech_params import AudioFormat

TEXT = "The SDK streams this sentence."
MAGIC = {
    AudioFormat.WAV: b"RIFF",
    AudioFormat.MP3: b"\xff",
    AudioFormat.OPUS: b"OggS",
    AudioFormat.FLAC: b"fLaC",
    AudioFormat.AAC: b"\xff",
}


@pytest.fixture(scope="module")
def client(base_url) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="not-needed", timeout=timeout(60), max_retries=0) as c:
        yield c


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_streaming_call_for_every_format(client, fmt):
    with client.audio.speech.with_streaming_response.create(
        model="uttera", voice="default", input=TEXT, response_format=fmt.value
    ) as response:
        parts = list(response.iter_bytes())
    data = b"".join(parts)
    assert len(data) > 500 and data.startswith(MAGIC.get(fmt, b""))


def test_sse(client):
    with client.audio.speech.with_streaming_response.create(
        model="uttera", voice="default", input=TEXT, response_format="pcm", stream_format="sse"
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        rate = int(response.headers["x-sample-rate"])
        lines = [line for line in response.iter_lines() if line]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    *deltas, done = events
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert {e["type"] for e in deltas} == {"speech.audio.delta"} and len(audio) % 2 == 0
    assert done["type"] == "speech.audio.done"
    assert done["usage"]["audio_ms"] == round(1000 * len(audio) / 2 / rate) > 0
    assert set(done["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"}
