"""Synthesis: text in, PCM and word timings out. This module is the seam between the server and the
speech engine: what the server reads of a synthesizer, and the items a synthesis (one `stream()` call)
streams.

`synthesizer.Synthesizer` is the implementation: the frontend (`uttera_server.frontend`) turns text into
phoneme ids, `mel_engine.MelEngine` drives the patched vLLM (whose in-process code is
`uttera_server.model`) for mel chunks, and a `pcm_stage.PcmStage` turns each sentence into audio: a
`vocoder_worker` in this process, or the engine's own vocoder, PCM arriving through `pcm_receiver`;
`speed` and `word_clock` are shared by both paths. The
HTTP and WebSocket code, the app, `serve` and the CLI are typed against `SpeechSynthesizer` only, so a
test can drive the real app with a small stand-in (`tests/voice_agent/test_server_fault.py`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .word_clock import WordTiming

if TYPE_CHECKING:
    from .mel_engine import EngineStats

DEFAULT_VOICE = "default"  # accepted in every request: the synthesizer's first voice (a single voice's id)


@dataclass(frozen=True, slots=True)
class VoiceInfo:
    """One voice of `SpeechSynthesizer.voices`, as /v1/audio/voices lists it."""

    id: str  # what a request names in `voice`; a single-voice model's is DEFAULT_VOICE
    name: str  # also accepted in `voice`
    language: str  # BCP 47, e.g. "en-US"
    description: str
    random_weights: bool  # a tiny random-weight development model: logs and /v1/models say so
    sample_rate: int  # Hz of the voice's PCM (what `x-sample-rate` and `started` declare)
    gender: str | None = None
    teacher: str | None = None  # the model the voice was distilled from
    license: str | None = None  # SPDX id of the weights' license


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """The next piece of the audio of a synthesis (one `stream()` call), gapless after the previous one."""

    pcm: np.ndarray  # int16, mono, shape (n,), at SpeechSynthesizer.sample_rate Hz
    sentence: int  # index of the sentence this audio belongs to (0 for the synthesis's first)


@dataclass(frozen=True, slots=True)
class WordTimings:
    """Words whose place in the audio is now known, in order; each `WordTiming` has its start and end in
    ms from the synthesis's first sample, and its [char_start, char_end) span in the synthesized text (plus
    `text_offset`)."""

    words: tuple[WordTiming, ...]
    sentence: int  # index of the sentence they belong to


@runtime_checkable
class SpeechSynthesizer(Protocol):
    """Text in, PCM out, streamed. Constructed (not started) by `cli.make_synthesizer` or a serving
    process (`frontends.py`); the app's lifespan calls `start()` and, last on shutdown, `close()`."""

    sample_rate: int  # Hz of every AudioChunk.pcm
    model_id: str  # e.g. "uttera-default"; the server also accepts the alias "uttera"
    voices: dict[str, VoiceInfo]  # by id; the first is the default, which DEFAULT_VOICE also names
    max_input_chars: int  # longest text `stream` accepts, in characters
    sink: int  # which serving process this is (`--api-servers`), 0 with one; GET /health reports it
    vocoder: str  # which vocoder speaks every voice (`--vocoder`: "voice" or a HiFi-GAN); /v1/audio/voices

    async def start(self) -> None:
        """Start the engine and warm it up; `is_ready()` from then on. Raises if the engine cannot start."""
        ...

    async def close(self) -> None:
        """Stop the engine and free its resources; the last step of shutdown."""
        ...

    def is_ready(self) -> bool:
        """Started and healthy: `stream` accepts requests."""
        ...

    def is_failed(self) -> bool:
        """The engine (or its vocoder) died; it will not become ready again."""
        ...

    def engine_stats(self) -> EngineStats:
        """The engine scheduler's latest figures (requests waiting and running, KV cache use...), read at
        each /metrics scrape and by the admission guard; cheap, never blocks."""
        ...

    def stream(
        self,
        text: str,
        *,
        voice: str | VoiceInfo = DEFAULT_VOICE,
        speed: float = 1.0,
        request_id: str | None = None,
        with_timestamps: bool = False,
        text_offset: int = 0,
        lead_s: float = 0.0,
    ) -> AsyncGenerator[AudioChunk | WordTimings, None]:
        """Validate now, then return the speech of `text` as an async iterator.

        `voice`: one of `voices` (resolved once by the caller, `speech_params.resolve_voice`), or a voice id,
        name or DEFAULT_VOICE. Raises before any audio (so a server can answer 4xx): `errors.EmptyInput`,
        `InputTooLong` (over `max_input_chars`), `UnknownVoice` (none of those), `InvalidSpeed` (outside
        0.25..4.0, 1.0 is natural), `EngineNotReady`. While streaming, a fault of the engine ends the
        iterator with `errors.SynthesisFailed`.

        Without `with_timestamps`, only `AudioChunk`s. With it, `WordTimings` interleaved with them: every
        word of `text`, once, in order, each as soon as the engine has moved past it (before or with its
        audio). `text_offset` is added to the words' character spans. `request_id` names the engine
        request in logs. `lead_s`: seconds of audio the client already has buffered ahead of this synthesis
        (a WebSocket context's earlier segments), for deadline scheduling.

        Closing the iterator (`aclose`, cancelling the task that drives it) aborts the engine request.
        """
        ...
