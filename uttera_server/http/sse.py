"""`stream_format: "sse"`: the encoded audio as OpenAI's speech server-sent events. Pure: no I/O.

    data: {"type": "speech.audio.delta", "audio": "<base64 of the next bytes of the encoded stream>"}
    ...
    data: {"type": "speech.audio.done", "usage": {"input_tokens", "output_tokens", "total_tokens",
                                                   "characters", "audio_ms"}}

Concatenating the decoded `audio` of every delta gives exactly the `stream_format: "audio"` body. This
server has no tokens: `input_tokens` counts the input's characters and `output_tokens` the milliseconds of
audio (also given as `characters` and `audio_ms`).
"""

import base64
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..audio.formats import StreamEncoder, open_encoder
from ..speech_params import SpeechParams, StreamFormat

MEDIA_TYPE = "text/event-stream"


def event(payload: Mapping[str, Any]) -> bytes:
    """One SSE event carrying `payload` as JSON on a single `data:` line."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def delta(audio: bytes) -> bytes:
    return event({"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode()})


def done(characters: int, audio_ms: int) -> bytes:
    return event({"type": "speech.audio.done", "usage": {
        "input_tokens": characters, "output_tokens": audio_ms, "total_tokens": characters + audio_ms,
        "characters": characters, "audio_ms": audio_ms}})  # fmt: skip


class SseEncoder(StreamEncoder):
    """Wraps the encoder of the response format: each chunk of its output becomes one delta event."""

    def __init__(self, inner: StreamEncoder, characters: int, source_rate: int):
        self.inner = inner
        self.format = inner.format
        self.sample_rate = inner.sample_rate
        self.characters = characters
        self.source_rate = source_rate
        self.samples = 0  # source samples encoded

    def encode(self, pcm: np.ndarray) -> bytes:
        self.samples += len(pcm)
        data = self.inner.encode(pcm)
        return delta(data) if data else b""

    def flush(self) -> bytes:
        data = self.inner.flush()
        return (delta(data) if data else b"") + done(self.characters, round(1000 * self.samples / self.source_rate))

    def close(self) -> None:
        self.inner.close()


def open_response_encoder(params: SpeechParams, sample_rate: int) -> StreamEncoder:
    """The body encoder of one `/v1/audio/speech` response; the source is int16 PCM at `sample_rate` Hz."""
    encoder = open_encoder(params.response_format, sample_rate)
    if params.stream_format is StreamFormat.SSE:
        return SseEncoder(encoder, len(params.text), sample_rate)
    return encoder
