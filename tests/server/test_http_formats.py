"""Every response_format, SSE and GET on /v1/audio/speech against the real server: streamed, the right
Content-Type, and decoding (FFmpeg's decoders) to the audio of the `pcm` response of the same request."""

import base64
import io
import json
import urllib.parse

import av
import numpy as np
import pytest

from uttera_server.audio.formats import MEDIA_TYPES
from uttera_server.speech_params import AudioFormat

TEXT = "Hello there, this is a test of every format."
# An MP3 or ADTS stream has no gapless header (it would need a seek back): decoders play the encoder's
# priming and last frame padding, at most this much more than the source.
CODEC_SLACK_S = {AudioFormat.MP3: 0.1, AudioFormat.AAC: 0.1}


def speech(**fields) -> dict:
    return {"model": "uttera", "input": TEXT, **fields}


def decode(fmt: AudioFormat, data: bytes) -> tuple[np.ndarray, int]:
    """(float samples in [-1, 1], rate) of an encoded body; raw mu-law needs its rate named."""
    if fmt is AudioFormat.PCM:
        return np.frombuffer(data, "<i2") / 32768, 0
    options = {"sample_rate": "8000", "ch_layout": "mono"} if fmt is AudioFormat.MULAW else {}
    with av.open(io.BytesIO(data), "r", format="mulaw" if fmt is AudioFormat.MULAW else None, options=options) as c:
        frames = [f.to_ndarray().astype(np.float64).reshape(-1) for f in c.decode(audio=0)]
        rate = c.streams.audio[0].codec_context.sample_rate
    samples = np.concatenate(frames)
    return (samples / 32768 if np.abs(samples).max() > 2 else samples), rate


def resample(x: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Float samples `x` at `to_rate` Hz (FFmpeg's resampler, which also low-passes to the new band)."""
    if from_rate == to_rate:
        return x
    frame = av.AudioFrame.from_ndarray(x.astype(np.float32).reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = from_rate
    r = av.AudioResampler(format="flt", layout="mono", rate=to_rate)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in [*r.resample(frame), *r.resample(None)]])


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if len(x) else 0.0


@pytest.fixture(scope="module")
async def reference(base_url) -> tuple[np.ndarray, int]:
    """The `pcm` response for TEXT (the engine is deterministic for one text and voice)."""
    import httpx

    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        r = await client.post("/v1/audio/speech", json=speech(response_format="pcm"))
    assert r.status_code == 200
    return np.frombuffer(r.content, "<i2") / 32768, int(r.headers["x-sample-rate"])


@pytest.mark.parametrize("fmt", list(AudioFormat))
async def test_every_format_streams_and_decodes(http, reference, fmt):
    ref, ref_rate = reference
    parts = []
    async with http.stream("POST", "/v1/audio/speech", json=speech(response_format=fmt.value)) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"] == MEDIA_TYPES[fmt]
        assert "content-length" not in r.headers
        rate = int(r.headers["x-sample-rate"])
        async for part in r.aiter_raw():
            parts.append(part)
    decoded, decoded_rate = decode(fmt, b"".join(parts))
    decoded_rate = decoded_rate or ref_rate
    assert decoded_rate == rate
    duration, ref_duration = len(decoded) / decoded_rate, len(ref) / ref_rate
    assert ref_duration * 0.99 <= duration <= ref_duration * 1.01 + CODEC_SLACK_S.get(fmt, 0.0), (
        duration,
        ref_duration,
    )
    # the same loudness (in the band the format keeps): not silent, not noise
    assert abs(rms(decoded) - rms(resample(ref, ref_rate, rate))) < 0.25 * rms(ref)


def sse_events(text: str) -> list[dict]:
    return [json.loads(block.removeprefix("data: ")) for block in text.split("\n\n") if block]


@pytest.mark.parametrize("fmt", list(AudioFormat))
async def test_sse_deltas_are_the_stream_and_usage_counts_it(http, fmt):
    """Within one response (the engine need not repeat itself across requests under load): the decoded
    deltas form one stream of the format, whose duration is the `audio_ms` that `speech.audio.done` reports
    (to the ms for PCM-based and lossless formats; plus the codec's priming and padding for mp3/aac/opus)."""
    r = await http.post("/v1/audio/speech", json=speech(response_format=fmt.value, stream_format="sse"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    *deltas, done = sse_events(r.text)
    assert {e["type"] for e in deltas} == {"speech.audio.delta"} and done["type"] == "speech.audio.done"
    data = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    decoded, rate = decode(
        AudioFormat.PCM if fmt is AudioFormat.WAV else fmt, data[44:] if fmt is AudioFormat.WAV else data
    )
    rate = rate or int(r.headers["x-sample-rate"])
    usage = done["usage"]
    exact = fmt in (AudioFormat.PCM, AudioFormat.WAV, AudioFormat.FLAC, AudioFormat.MULAW)
    slack_ms = 1 if exact else 1000 * CODEC_SLACK_S.get(fmt, 0.03)
    assert 0 <= 1000 * len(decoded) / rate - usage["audio_ms"] + 1 <= slack_ms + 1, (len(decoded), usage)
    assert usage["characters"] == usage["input_tokens"] == len(TEXT)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert rms(decoded) > 0


async def test_get_for_an_audio_element(http):
    query = urllib.parse.urlencode({"input": TEXT, "response_format": "mp3", "speed": "1.25"})
    r = await http.get(f"/v1/audio/speech?{query}")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"
    assert len(decode(AudioFormat.MP3, r.content)[0]) > 0


@pytest.mark.parametrize("query, code, param", [
    ({"input": TEXT, "response_format": "ogg"}, "unsupported_format", "response_format"),
    ({"input": TEXT, "speed": "fast"}, "invalid_type", "speed"),
    ({"voice": "default"}, "missing_field", "input"),
])  # fmt: skip
async def test_get_errors(http, query, code, param):
    r = await http.get("/v1/audio/speech", params=query)
    assert r.status_code == 400
    assert (r.json()["error"]["code"], r.json()["error"]["param"]) == (code, param)
