"""Text in, PCM out, streamed: frontend -> patched vLLM engine (mel) -> streaming vocoder (PCM).

`Synthesizer.stream()` validates the request synchronously (so a server can answer 4xx before any
audio), then returns an async iterator of `AudioChunk`s (and, with `with_timestamps=True`, of
`WordTimings` too, each one before or with the audio it describes). Sentences are generated one after another by
a producer task that runs ahead of the consumer: the next sentence's engine request starts as soon as
the previous one has generated its last step, while its audio is still being vocoded and sent. Closing
the iterator (or cancelling its task) cancels the producer, which aborts the engine request, and drops
the vocoder streams.
"""

import asyncio
import json
import itertools
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import EngineConfig
from .engine import EngineStats, MelEngine
from .errors import ConfigError, EmptyInput, EngineNotReady, InputTooLong, InvalidSpeed, SynthesisFailed, UnknownVoice
from .model_dir import VoiceModelConfig
from .speed import MAX_SPEED, MIN_SPEED, MelTimeScale
from .word_clock import SentenceWordClock, WordTiming

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


@dataclass(frozen=True, slots=True)
class WordTimings:
    """Words whose place in the audio is now known, in order; times are from the stream's first sample."""

    words: tuple[WordTiming, ...]
    sentence: int  # index of the sentence they belong to


def vocoder_device(setting: str) -> str:
    """`EngineConfig.vocoder_device` resolved in this process: "auto" is CUDA when torch sees a GPU."""
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--vocoder-device cuda: this process sees no CUDA device (use auto or cpu)")
    return setting


@dataclass(slots=True)
class _Deadline:
    """When the client of one `stream()` runs out of audio, for ordering engine requests and vocoder
    batches (`EngineConfig.scheduling`): before its first audio, at arrival plus the audio it already
    had buffered (`lead_s`); after, at its first audio plus the audio generated so far."""

    arrival: float
    lead_s: float
    first_audio: float | None = None
    generated_s: float = 0.0  # audio of the sentences whose generation has ended

    def at(self) -> float:
        start = self.arrival + self.lead_s
        if self.first_audio is not None:
            start = max(start, self.first_audio)
        return start + self.generated_s


def to_int16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


class Synthesizer:
    def __init__(self, model_dir: str | Path, engine: EngineConfig, *, max_input_chars: int = 4096):
        import engine_patches

        try:  # fail at once, before the server listens, with a message that says what to install
            engine_patches.check_vllm_version()
        except engine_patches.UnsupportedVLLMVersion as e:
            raise ConfigError(str(e)) from None
        self.model = VoiceModelConfig.load(model_dir)
        self.engine_config = engine
        self.vocoder_device = vocoder_device(engine.vocoder_device)  # fails before the server listens
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
        if c.switch_interval_ms is not None:
            sys.setswitchinterval(c.switch_interval_ms / 1000.0)  # see EngineConfig.switch_interval_ms
        vocoder = Vocoder.from_dir(self.model.path / "vocoder")
        vocoder.config.check_matches(json.loads((self.model.path / "config.json").read_text()))
        graphs = self.vocoder_device != "cpu" and c.vocoder_cuda_graphs
        # With CUDA graphs: a state slot per engine sequence from the start (growing the pool reallocates
        # it, which makes every captured graph stale), and the graphs captured before the first request.
        streaming = StreamingVocoder(vocoder, chunk_frames=c.vocoder_chunk_frames,
                                     first_chunk_frames=c.first_chunk_frames, device=self.vocoder_device,
                                     initial_capacity=c.max_num_seqs + 1 if graphs else 8, cuda_graphs=graphs)
        if streaming.cuda_graphs:
            t0 = time.monotonic()
            graphs = await asyncio.to_thread(streaming.capture_graphs, c.max_num_seqs)
            log.info("vocoder: %d CUDA graphs captured in %.1f s", graphs, time.monotonic() - t0)
        # On CPU a big vocoder batch takes tens of ms: cap the non-urgent work of a pass (see VocoderWorker).
        self._worker = VocoderWorker(streaming, deadline_first=c.scheduling == "deadline",
                                     max_relaxed_frames=2 * c.vocoder_chunk_frames if self.vocoder_device == "cpu" else None,
                                     driver=c.vocoder_driver)
        frontend.prepare("Warm up.")  # loads espeak-ng data before the first request
        await asyncio.to_thread(self._engine.start)
        # One short utterance through the whole path, so the first client does not pay for cold
        # caches (the first request after start took ~0.9 s to its first byte, later ones ~70 ms).
        async for _ in self.stream("Warm up."):
            pass
        log.info("engine ready: model %s (%s), vocoder on %s%s, %s scheduling, GIL switch interval %.2f ms",
                 self.model.path, self.model_id, self.vocoder_device,
                 " (CUDA graphs)" if streaming.cuda_graphs else "", c.scheduling, 1000 * sys.getswitchinterval())

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
               request_id: str | None = None, with_timestamps: bool = False,
               text_offset: int = 0, lead_s: float = 0.0) -> AsyncIterator[AudioChunk | WordTimings]:
        """Validate now, then return the audio of `text` as an async iterator of chunks.

        With `with_timestamps`, `WordTimings` items are interleaved with the chunks: every word of `text`
        as written (`Sentence.words`), once, in order, each sent once the engine's pointer has moved past
        it (so before or with its audio), times in ms from the first sample of this stream. Character
        spans are indices into `text` plus `text_offset`. `lead_s`: audio the client already has
        buffered ahead of this stream (a WebSocket context's earlier segments), for deadline scheduling.
        """
        from .frontend import prepare

        self.validate(text, voice, speed)
        if not self.is_ready():
            raise EngineNotReady()
        try:
            sentences = prepare(text, max_phonemes=min(self.model.max_phonemes, 400), offset=text_offset)
        except ValueError as e:
            raise EmptyInput(f"nothing to speak in the input: {e}") from None
        if not sentences:
            raise EmptyInput("nothing to speak in the input")
        deadline = _Deadline(arrival=time.monotonic(), lead_s=max(0.0, float(lead_s)))
        return self._generate(sentences, float(speed), request_id or uuid.uuid4().hex, with_timestamps, deadline)

    async def _generate(self, sentences, speed: float, request_id: str, with_timestamps: bool,
                        deadline: _Deadline) -> AsyncIterator[AudioChunk | WordTimings]:
        worker = self._worker
        opened: list[str] = []
        handoff: asyncio.Queue = asyncio.Queue()  # (sentence index, pcm queue) or an exception
        producer = asyncio.create_task(self._produce(sentences, speed, request_id, handoff, opened,
                                                     with_timestamps, deadline))
        samples = 0  # yielded so far: the start of the next sentence's audio
        last_span = None  # a word cut in two by a long-sentence split is reported once
        try:
            for _ in sentences:
                item = await handoff.get()
                if isinstance(item, BaseException):
                    raise item
                index, pcm_queue = item
                base_ms = 1000.0 * samples / self.sample_rate
                while (pcm := await pcm_queue.get()) is not None:
                    if isinstance(pcm, BaseException):
                        raise SynthesisFailed() from pcm
                    if isinstance(pcm, list):  # WordTiming of this sentence, relative to its start
                        words = []
                        for w in pcm:
                            if (w.char_start, w.char_end) != last_span:
                                last_span = (w.char_start, w.char_end)
                                words.append(WordTiming(w.word, base_ms + w.start_ms, base_ms + w.end_ms,
                                                        w.char_start, w.char_end))
                        if words:
                            yield WordTimings(tuple(words), index)
                        continue
                    if deadline.first_audio is None:
                        deadline.first_audio = time.monotonic()
                    samples += pcm.shape[0]
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

    async def _produce(self, sentences, speed, request_id, handoff: asyncio.Queue, opened: list[str],
                       with_timestamps: bool, deadline: _Deadline) -> None:
        """Run the engine for each sentence in turn; mel goes to the vocoder, which delivers PCM to the
        sentence's queue, and word timings go straight to the same queue (so they precede their audio)."""
        worker, m = self._worker, self.model
        step_ms = 1000.0 * m.frames_per_step * m.hop_length / m.sample_rate / speed
        max_lead = self.engine_config.max_lead_s
        for index, sentence in enumerate(sentences):
            if index and max_lead is not None:  # pacing: see EngineConfig.max_lead_s
                ahead = deadline.at() - time.monotonic()
                if ahead > max_lead:
                    await asyncio.sleep(ahead - max_lead)
            sid = f"{request_id}-{index}-{next(self._ids)}"
            due = deadline.at()
            pcm_queue = worker.open(sid, deadline=due)
            opened.append(sid)
            handoff.put_nowait((index, pcm_queue))
            scale = MelTimeScale(speed)
            clock = SentenceWordClock(sentence.phoneme_words, sentence.words, step_ms) if with_timestamps else None
            frames_out = 0
            try:
                async for step in self._engine.generate(sentence.phoneme_ids, request_id=sid, deadline=due):
                    if clock is not None and (words := clock.step(step.pointer)):
                        pcm_queue.put_nowait(words)
                    frames = scale.push(step.mel)
                    if frames.shape[0]:
                        frames_out += frames.shape[0]
                        worker.push(sid, frames)
                tail = scale.flush()
                if tail.size:
                    frames_out += tail.shape[0]
                    worker.push(sid, tail)
                deadline.generated_s += frames_out * m.frame_ms / 1000.0
                if clock is not None and (words := clock.finish(frames_out * m.frame_ms)):
                    pcm_queue.put_nowait(words)
                worker.finish(sid)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("engine request %s failed", sid)
                pcm_queue.put_nowait(e)
                return
