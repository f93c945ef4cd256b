"""Text in, PCM out, streamed: frontend -> patched vLLM engine (mel) -> streaming vocoder (PCM).

`Synthesizer.stream()` validates the request synchronously (so a server can answer 4xx before any
audio), then returns an async iterator of `AudioChunk`s. Sentences are generated one after another by
a producer task that runs ahead of the consumer: the next sentence's engine request starts as soon as
the previous one has generated its last step, while its audio is still being vocoded and sent. Closing
the iterator (or cancelling its task) cancels the producer, which aborts the engine request, and drops
the vocoder streams.
"""

import asyncio
import json
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import EngineConfig
from .engine import EngineStats, MelEngine
from .errors import EmptyInput, EngineNotReady, InputTooLong, InvalidSpeed, SynthesisFailed, UnknownVoice
from .model_dir import VoiceModelConfig
from .speed import MAX_SPEED, MIN_SPEED, MelTimeScale

log = logging.getLogger(__name__)

DEFAULT_VOICE = "default"


@dataclass(frozen=True, slots=True)
class VoiceInfo:
    id: str
    name: str
    language: str
    description: str
    random_weights: bool


@dataclass(frozen=True, slots=True)
class AudioChunk:
    pcm: np.ndarray  # int16, mono, (n,), at Synthesizer.sample_rate
    sentence: int  # index of the sentence this audio belongs to


def to_int16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


class Synthesizer:
    def __init__(self, model_dir: str | Path, engine: EngineConfig, *, max_input_chars: int = 4096):
        self.model = VoiceModelConfig.load(model_dir)
        self.engine_config = engine
        self.max_input_chars = max_input_chars
        self.sample_rate = self.model.sample_rate
        self.model_id = f"uttera-{self.model.voice_name}"
        self.voices = {
            DEFAULT_VOICE: VoiceInfo(DEFAULT_VOICE, self.model.voice_name, self.model.language,
                                     self.model.description, self.model.random_weights),
        }
        self._engine = MelEngine(self.model, engine)
        self._worker = None
        self._ids = itertools.count()

    # --- lifecycle ---
    async def start(self) -> None:
        from vocoder.model import Vocoder
        from vocoder.streaming import StreamingVocoder

        from . import frontend
        from .vocoder_worker import VocoderWorker

        c = self.engine_config
        vocoder = Vocoder.from_dir(self.model.path / "vocoder")
        vocoder.config.check_matches(json.loads((self.model.path / "config.json").read_text()))
        streaming = StreamingVocoder(vocoder, chunk_frames=c.vocoder_chunk_frames,
                                     first_chunk_frames=c.first_chunk_frames)
        self._worker = VocoderWorker(streaming)
        frontend.prepare("Warm up.")  # loads espeak-ng data before the first request
        await asyncio.to_thread(self._engine.start)
        log.info("engine ready: model %s (%s)", self.model.path, self.model_id)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        await asyncio.to_thread(self._engine.shutdown)

    def is_ready(self) -> bool:
        return self._engine.started and self._worker is not None and not self._engine.failed

    def is_failed(self) -> bool:
        return self._engine.failed

    def engine_stats(self) -> EngineStats:
        return self._engine.stats

    @property
    def vocoder_worker(self):
        return self._worker

    # --- requests ---
    def validate(self, text: str, voice: str, speed: float) -> None:
        if voice not in self.voices and voice != self.model.voice_name:
            raise UnknownVoice(f"unknown voice {voice!r}: available voices are {', '.join(self.voices)}")
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not MIN_SPEED <= speed <= MAX_SPEED:
            raise InvalidSpeed(f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}, got {speed!r}")
        if not isinstance(text, str) or not text.strip():
            raise EmptyInput()
        if len(text) > self.max_input_chars:
            raise InputTooLong(f"input has {len(text)} characters; the limit is {self.max_input_chars}: "
                               "split the text into several requests")

    def stream(self, text: str, *, voice: str = DEFAULT_VOICE, speed: float = 1.0,
               request_id: str | None = None) -> AsyncIterator[AudioChunk]:
        """Validate now, then return the audio of `text` as an async iterator of chunks."""
        from .frontend import prepare

        self.validate(text, voice, speed)
        if not self.is_ready():
            raise EngineNotReady()
        try:
            sentences = prepare(text, max_phonemes=min(self.model.max_phonemes, 400))
        except ValueError as e:
            raise EmptyInput(f"nothing to speak in the input: {e}") from None
        if not sentences:
            raise EmptyInput("nothing to speak in the input")
        return self._generate([s.phoneme_ids for s in sentences], float(speed),
                              request_id or uuid.uuid4().hex)

    async def _generate(self, prompts: list[list[int]], speed: float, request_id: str) -> AsyncIterator[AudioChunk]:
        worker = self._worker
        opened: list[str] = []
        handoff: asyncio.Queue = asyncio.Queue()  # (sentence index, pcm queue) or an exception
        producer = asyncio.create_task(self._produce(prompts, speed, request_id, handoff, opened))
        try:
            for _ in prompts:
                item = await handoff.get()
                if isinstance(item, BaseException):
                    raise item
                index, pcm_queue = item
                while (pcm := await pcm_queue.get()) is not None:
                    if isinstance(pcm, BaseException):
                        raise SynthesisFailed() from pcm
                    yield AudioChunk(to_int16(pcm), index)
            await producer
        finally:
            if not producer.done():
                producer.cancel()  # aborts the engine request
                try:
                    await producer
                except BaseException:
                    pass
            for sid in opened:
                worker.cancel(sid)

    async def _produce(self, prompts, speed, request_id, handoff: asyncio.Queue, opened: list[str]) -> None:
        worker = self._worker
        for index, ids in enumerate(prompts):
            sid = f"{request_id}-{index}-{next(self._ids)}"
            pcm_queue = worker.open(sid)
            opened.append(sid)
            handoff.put_nowait((index, pcm_queue))
            scale = MelTimeScale(speed)
            try:
                async for step in self._engine.generate(ids, request_id=sid):
                    frames = scale.push(step.mel)
                    if frames.shape[0]:
                        worker.push(sid, frames)
                tail = scale.flush()
                if tail.size:
                    worker.push(sid, tail)
                worker.finish(sid)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("engine request %s failed", sid)
                pcm_queue.put_nowait(e)
                return
