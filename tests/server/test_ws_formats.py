"""`format` per WebSocket context: pure protocol tests (fake clock, actions out), then the real server."""

import io
import json

import av
import numpy as np
import pytest
from websockets.asyncio.client import connect

from _speech_client import collect_until, recv_json, send_json
from uttera_server.audio.formats import open_encoder
from uttera_server.speech_params import AudioFormat
from uttera_server.synthesis import VoiceInfo
from uttera_server.ws.text_chunker import ChunkerConfig
from uttera_server.ws.actions import SendAudio, SendMessage, StartSynthesis
from uttera_server.ws.messages import decode_audio_frame
from uttera_server.ws.protocol import SessionLimits, SpeechSessionProtocol

RATE = 22050
LIMITS = SessionLimits(
    sample_rate=RATE,
    voices={"default": VoiceInfo("default", "test", "en-US", "", True, RATE)},
    max_buffered_chars=500,
    max_contexts=4,
    idle_timeout_s=10.0,
    chunking=ChunkerConfig(max_wait_ms=300, min_chunk_chars=10, max_chars=100),
)


def send(p: SpeechSessionProtocol, **message) -> list:
    return p.receive_text(json.dumps(message))


def messages(actions: list) -> list[dict]:
    return [a.message for a in actions if isinstance(a, SendMessage)]


def audio(actions: list) -> bytes:
    return b"".join(decode_audio_frame(a.frame)[1] for a in actions if isinstance(a, SendAudio))


def tone(n: int) -> bytes:
    return (3000 * np.sin(np.arange(n) * 0.05)).astype("<i2").tobytes()


@pytest.mark.parametrize("fmt", [AudioFormat.MP3, AudioFormat.OPUS, AudioFormat.FLAC, AudioFormat.WAV])
def test_context_audio_is_the_formats_stream(fmt):
    """The frames of a context concatenate to the same bytes as the format's one-shot encoding."""
    p = SpeechSessionProtocol(LIMITS, lambda: 0.0)
    opened = send(p, type="text", context_id="c", text="Hello there.", format=fmt.value)
    started = messages(opened)[0]
    assert started["format"] == fmt.value
    assert started["sample_rate"] == (48000 if fmt is AudioFormat.OPUS else RATE)
    acts = send(p, type="end", context_id="c")
    (segment,) = [a.segment for a in opened + acts if isinstance(a, StartSynthesis)]
    pcm = [tone(n) for n in (100, 5000, 1, 3000)]
    out = []
    for part in pcm:
        out += p.audio(segment.id, part)
    out += p.segment_done(segment.id)
    assert messages(out)[-1]["type"] == "done"
    assert messages(out)[-1]["audio_ms"] == round(1000 * sum(map(len, pcm)) / 2 / RATE)
    with open_encoder(fmt, RATE) as enc:
        expected = enc.encode(np.frombuffer(b"".join(pcm), "<i2")) + enc.flush()
    assert audio(out) == expected
    last_audio = max(i for i, a in enumerate(out) if isinstance(a, SendAudio))
    assert last_audio < out.index(next(a for a in out if isinstance(a, SendMessage) and a.message["type"] == "done"))


def test_default_is_pcm_and_bad_or_changed_formats_are_refused():
    p = SpeechSessionProtocol(LIMITS, lambda: 0.0)
    assert messages(send(p, type="text", context_id="a", text="Hi"))[0]["format"] == "pcm_s16le"
    (err,) = messages(send(p, type="text", context_id="b", text="Hi", format="ogg"))
    assert (err["type"], err["code"], err["context_id"]) == ("error", "unsupported_format", "b")
    (conflict,) = messages(send(p, type="text", context_id="a", text=" there", format="mp3"))
    assert conflict["code"] == "context_conflict"


async def test_real_server_mp3_and_pcm_contexts_side_by_side(ws_url):
    async with connect(ws_url) as ws:
        await send_json(ws, type="text", context_id="m", text="An mp3 context.", format="mp3")
        await send_json(ws, type="text", context_id="p", text="A pcm context.")
        starts = {m["context_id"]: m for m in [await recv_json(ws), await recv_json(ws)]}
        assert (starts["m"]["format"], starts["p"]["format"]) == ("mp3", "pcm_s16le")
        await send_json(ws, type="end", context_id="m")
        await send_json(ws, type="end", context_id="p")
        done, audio_by_ctx = {}, {}
        while len(done) < 2:
            msgs, got = await collect_until(ws, "done")
            for cid, data in got.items():
                audio_by_ctx.setdefault(cid, bytearray()).extend(data)
            done[msgs[-1]["context_id"]] = msgs[-1]
    with av.open(io.BytesIO(bytes(audio_by_ctx["m"]))) as c:
        samples = sum(f.samples for f in c.decode(audio=0))
        rate = c.streams.audio[0].codec_context.sample_rate
    assert rate == starts["m"]["sample_rate"]
    # no gapless header in a streamed MP3: the decoder adds the encoder's delay and padding (< 0.1 s)
    assert 0 <= samples / rate - done["m"]["audio_ms"] / 1000 < 0.1
    assert len(audio_by_ctx["p"]) / 2 / starts["p"]["sample_rate"] == pytest.approx(
        done["p"]["audio_ms"] / 1000, abs=1e-3
    )
