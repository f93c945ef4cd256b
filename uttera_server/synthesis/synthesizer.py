"""Text in, PCM out, streamed: frontend -> patched vLLM engine (mel) -> streaming vocoder (PCM).

`Synthesizer.stream()` validates the request synchronously (so a server can answer 4xx before any
audio), then returns an async iterator of `AudioChunk`s (and, with `with_timestamps=True`, of
`WordTimings` too, each one before or with the audio it describes). Sentences (one utterance, one engine request each) are generated one after another by
a producer task that runs ahead of the consumer: the next sentence's engine request starts as soon as
the previous one has generated its last step, while its audio is still being vocoded and sent. Closing
the iterator (or cancelling its task) cancels the producer, which aborts the engine request, and drops
its utterances from the vocoder.
"""

import asyncio
import itertools
import logging
import sys
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import EngineConfig
from .mel_engine import EngineClientSlot, EngineStats, MelEngine
from ..errors import ConfigError, EngineNotReady, SynthesisFailed, UnknownVoice
from ..model_dir import VoiceModelConfig
from ..speech_params import check_speed, check_text, resolve_voice
from .deadline import PlaybackDeadline
from .placement import check_vocoder, vocoder_device, vocoder_process
from ..audio.pcm import to_int16
from . import DEFAULT_VOICE, AudioChunk, VoiceInfo, WordTimings
from .voices import accepted_voices, served_voices, voice_prompt
from .pcm_queue import PcmQueue
from .pcm_stage import EngineVocoded, PcmStage, VocodedHere
from .sentences import first_and_later, sentence_stream
from .word_clock import SentenceWordClock, WordTiming

if TYPE_CHECKING:
    from vllm.engine.arg_utils import AsyncEngineArgs

    from ..frontend.prepare import Sentence
    from .vocoder_worker import VocoderWorker

log = logging.getLogger(__name__)


class Synthesizer:
    def __init__(
        self,
        model_dir: str | Path,
        engine: EngineConfig,
        *,
        max_input_chars: int = 4096,
        client: EngineClientSlot | None = None,
        sink_base: str | None = None,
    ):
        """`client`: this process's slot among several serving processes sharing one engine core
        (frontends.py); `sink_base`: the server's PCM channel base address (pcm_receiver.py), one per
        server, shared by its serving processes."""
        import engine_patches
        from engine_patches.gpu_model_runner import UnsupportedRunnerOutput, check_runner_mode

        try:  # fail at once, before the server listens, with a message that says what to install
            engine_patches.check_vllm_version()
            check_runner_mode()
        except (engine_patches.UnsupportedVLLMVersion, UnsupportedRunnerOutput) as e:
            raise ConfigError(str(e)) from None
        self.model = VoiceModelConfig.load(model_dir)
        check_vocoder(engine.vocoder, self.model.path)  # the engine's worker loads it: fail before listening
        self.engine_config = engine
        self.vocoder_device = vocoder_device(engine.vocoder_device)  # fails before the server listens
        self.max_input_chars = max_input_chars
        self.sample_rate = self.model.sample_rate
        self.vocoder = engine.vocoder  # which vocoder speaks every voice (`--vocoder`)
        self.model_id = f"uttera-{self.model.voice_name}"
        from ..frontend.phoneme_table import en_us

        self.voices, self._voice_tokens = served_voices(self.model, en_us().bos_ids[0])
        self._accepted = accepted_voices(self.voices)  # what `voice` may say, as a request names it
        # Where the vocoder runs: inside the engine's worker (one CUDA context, PCM on the PCM channel)
        # or here, in a VocoderWorker beside the event loop.
        self.vocoder_process = vocoder_process(engine.vocoder_process, self.vocoder_device, engine.vocoder)
        engine_vocoder = None
        self.sink = client.index if client is not None else 0
        self._stage: PcmStage
        self._warm = False  # the warm-up utterance went through: `is_ready()` from then on
        if self.vocoder_process == "engine":
            from engine_patches.engine_vocoder import EngineVocoderConfig

            from .pcm_receiver import new_sink_base

            self.sink_base = sink_base or new_sink_base()
            engine_vocoder = EngineVocoderConfig(
                sink_base=self.sink_base,
                chunk_frames=engine.vocoder_chunk_frames,
                first_chunk_frames=engine.first_chunk_frames,
                cuda_graphs=engine.vocoder_cuda_graphs is not False,  # None: on in the engine (CUDA only)
                vocoder=engine.vocoder,
                max_utterances=engine.max_num_seqs,
            )
            self._stage = EngineVocoded(self.sink_base, self.sink, self.model.frames_per_step)
        else:
            self._stage = VocodedHere(self.model.path, engine, self.vocoder_device)
        self._engine = MelEngine(self.model, engine, engine_vocoder=engine_vocoder, client=client)
        self._ids = itertools.count()

    # --- lifecycle ---
    async def start(self) -> None:
        from .. import frontend

        c = self.engine_config
        if c.switch_interval_ms is not None:
            sys.setswitchinterval(c.switch_interval_ms / 1000.0)  # see EngineConfig.switch_interval_ms
        await self._stage.start()
        frontend.prepare("Warm up.")  # loads espeak-ng data before the first request
        await asyncio.to_thread(self._engine.start)
        # One short utterance through the whole path, so the first client does not pay for cold
        # caches (the first request after start took ~0.9 s to its first byte, later ones ~70 ms).
        # Ready (GET /health 200) only after it: a client, or a test reading the engine's counters, then
        # sees a server with nothing of its own in flight.
        async for _ in self.stream("Warm up."):
            pass
        self._warm = True
        log.info(
            "engine ready: model %s (%s), vocoder %s, %s scheduling, GIL switch interval %.2f ms",
            self.model.path,
            self.model_id,
            self._stage.described,
            c.scheduling,
            1000 * sys.getswitchinterval(),
        )

    async def close(self) -> None:
        await self._stage.close()
        await asyncio.to_thread(self._engine.shutdown)

    def is_ready(self) -> bool:
        return self._warm and self._serving()

    def _serving(self) -> bool:
        """The engine and the stage that makes its PCM are up (the warm-up's own check)."""
        return self._engine.started and not self._engine.failed and self._stage.up

    def is_failed(self) -> bool:
        """The engine died, or the stage that turns its output into PCM did (the vocoder worker in this
        process, or the PCM channel from the engine's worker): neither restarts."""
        return self._engine.failed or self._stage.error is not None

    def engine_args(self) -> "AsyncEngineArgs":
        """The vLLM engine arguments this synthesizer starts (or joins) its engine with."""
        return self._engine.engine_args()

    def engine_stats(self) -> EngineStats:
        return self._engine.stats

    @property
    def vocoder_worker(self) -> "VocoderWorker | None":
        return self._stage.worker

    # --- requests ---
    def validate(self, text: str, voice: str | VoiceInfo, speed: float) -> VoiceInfo:
        """The request checks of every transport (speech_params.py), for direct callers; returns the voice."""
        resolved = voice if isinstance(voice, VoiceInfo) else resolve_voice(voice, self._accepted)
        if self.voices.get(resolved.id) != resolved:
            raise UnknownVoice(f"voice {resolved.id!r} is not one of this model's: {', '.join(self.voices)}")
        check_speed(speed)
        check_text(text, self.max_input_chars)
        return resolved

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
        """Validate now, then return the audio of `text` as an async iterator of chunks.

        With `with_timestamps`, `WordTimings` items are interleaved with the chunks: every word of `text`
        as written (`Sentence.words`), once, in order, each sent once the engine's pointer has moved past
        it (so before or with its audio), times in ms from the first sample of this synthesis. Character
        spans are indices into `text` plus `text_offset`. `lead_s`: audio the client already has
        buffered ahead of this synthesis (a WebSocket context's earlier segments), for deadline scheduling.
        """
        token = self._voice_tokens[self.validate(text, voice, speed).id]  # the prompts' first id
        if not self._serving():
            raise EngineNotReady()
        deadline = PlaybackDeadline(arrival=time.monotonic(), lead_s=max(0.0, float(lead_s)))
        return self._generate(
            text, text_offset, float(speed), request_id or uuid.uuid4().hex, with_timestamps, deadline, token
        )

    async def _generate(
        self,
        text: str,
        text_offset: int,
        speed: float,
        request_id: str,
        with_timestamps: bool,
        deadline: PlaybackDeadline,
        voice_token: int,
    ) -> AsyncGenerator[AudioChunk | WordTimings, None]:
        """Raises `EmptyInput` before anything else when the text has nothing to speak. `voice_token`:
        the first id of every sentence's prompt (voices.voice_prompt)."""
        first, later = await first_and_later(text, text_offset, min(self.model.max_phonemes, 400))
        opened: list[str] = []
        # (sentence index, its PCM queue), or an exception, or None after the last sentence
        handoff: asyncio.Queue[tuple[int, PcmQueue] | BaseException | None] = asyncio.Queue()
        producer = asyncio.create_task(
            self._produce(
                sentence_stream(first, later),
                speed,
                request_id,
                handoff,
                opened,
                with_timestamps,
                deadline,
                voice_token,
            )
        )
        samples = 0  # yielded so far: the start of the next sentence's audio
        last_span: tuple[int, int] | None = None  # a word cut in two by a long-sentence split is reported once
        try:
            while (item := await handoff.get()) is not None:
                if isinstance(item, BaseException):
                    raise SynthesisFailed() from item
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
                                words.append(
                                    WordTiming(
                                        w.word, base_ms + w.start_ms, base_ms + w.end_ms, w.char_start, w.char_end
                                    )
                                )
                        if words:
                            yield WordTimings(tuple(words), index)
                        continue
                    if deadline.first_audio is None:
                        deadline.first_audio = time.monotonic()
                    samples += pcm.shape[0]
                    yield AudioChunk(pcm if pcm.dtype == np.int16 else to_int16(pcm), index)
            await producer
        finally:
            if not producer.done():
                producer.cancel()  # aborts the engine request
                # Wait for it, but let a cancellation of this consumer itself propagate.
                await asyncio.wait({producer})
            if not later.cancel() and not later.cancelled():  # done: its thread finishes on its own otherwise
                later.exception()  # retrieved (the producer raised it already, if any)
            for utterance_id in opened:
                self._stage.drop(utterance_id)

    async def _produce(
        self,
        sentences: "AsyncIterator[Sentence]",
        speed: float,
        request_id: str,
        handoff: asyncio.Queue[tuple[int, PcmQueue] | BaseException | None],
        opened: list[str],
        with_timestamps: bool,
        deadline: PlaybackDeadline,
        voice_token: int,
    ) -> None:
        """Run the engine for each sentence in turn; mel goes to the vocoder (here, or in the engine),
        which delivers PCM to the sentence's queue, and word timings go straight to the same queue (so
        they precede their audio); None on the hand-off queue after the last sentence. Any failure
        reaches the consumer: on the sentence's queue while it runs, else on the hand-off queue."""
        m = self.model
        step_ms = 1000.0 * m.frames_per_step * m.hop_length / m.sample_rate / speed
        max_lead = self.engine_config.max_lead_s
        pcm_queue: PcmQueue | None = None
        index = -1
        try:
            async for sentence in sentences:
                index += 1
                # Pacing (EngineConfig.max_lead_s): a later sentence, or a WebSocket segment's first
                # one when its context already has audio buffered ahead of playback (lead_s).
                if max_lead is not None and (index or deadline.lead_s > 0):
                    ahead = deadline.at() - time.monotonic()
                    if ahead > max_lead:
                        await asyncio.sleep(ahead - max_lead)
                utterance_id = f"{request_id}-{index}-{next(self._ids)}"  # also its engine request id
                due = deadline.at()
                pcm_queue = self._stage.open(utterance_id, due)
                opened.append(utterance_id)
                handoff.put_nowait((index, pcm_queue))
                clock = SentenceWordClock(sentence.phoneme_words, sentence.words, step_ms) if with_timestamps else None
                prompt = voice_prompt(sentence.phoneme_ids, voice_token)
                frames_out = await self._stage.speak(self._engine, prompt, utterance_id, due, speed, clock, pcm_queue)
                deadline.generated_s += frames_out * m.frame_ms / 1000.0
                if clock is not None and (words := clock.finish(frames_out * m.frame_ms)):
                    pcm_queue.put_nowait(words)
                self._stage.finish(utterance_id)
                pcm_queue = None  # a failure getting the next sentence goes to the hand-off queue
            handoff.put_nowait(None)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("engine request %s failed", request_id)
            (pcm_queue if pcm_queue is not None else handoff).put_nowait(e)
