"""Where a sentence's PCM comes from: the stage between the engine and `Synthesizer._generate`.

`Synthesizer` speaks each sentence through one `PcmStage`, chosen by `EngineConfig.vocoder_process`:
- `VocodedHere`: the engine's mel comes to this process with every step (after the speed change) and a
  `VocoderWorker` beside the event loop vocodes it;
- `EngineVocoded`: the vocoder in the engine's worker vocodes it, and its PCM arrives on the PCM channel
  (`PcmReceiver`); the steps here carry pointers only, for word timings.
Either way the sentence's `PcmQueue` gets its PCM and, from `speak`, its word timings (before their audio).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import EngineConfig
from .mel_engine import MelEngine
from .pcm_queue import PcmQueue
from .placement import start_vocoder_worker
from .speed import MelTimeScale, scaled_frames
from .word_clock import SentenceWordClock

if TYPE_CHECKING:
    from .pcm_receiver import PcmReceiver
    from .vocoder_worker import VocoderWorker

# Engine steps per output for a sentence vocoded in the engine whose words are not timed (vLLM's per-request
# stream_interval; `--stream-interval` still sets the least). Serving-loop CPU per audio second, 2-core CPU,
# tiny model, 64 closed-loop HTTP streams, 4 alternated rounds: 1.80-2.00 ms at 1, 1.52-1.70 at 16
# (benchmarks/RESULTS.md, "Engine outputs of sentences whose words are not timed").
UNTIMED_STREAM_INTERVAL = 16


class PcmStage:
    """One utterance (sentence) at a time per request: `open` its queue, `speak` it, `finish` it (or
    `drop` it when the request stops early)."""

    described: str  # for the start-up log line
    worker: "VocoderWorker | None" = None  # the vocoder worker in this process, if there is one

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    @property
    def up(self) -> bool:
        """Started and working."""
        raise NotImplementedError

    @property
    def error(self) -> BaseException | None:
        """Why the stage stopped working (it does not restart)."""
        raise NotImplementedError

    def open(self, utterance_id: str, deadline: float) -> PcmQueue:
        raise NotImplementedError

    async def speak(
        self,
        engine: MelEngine,
        prompt: list[int],
        utterance_id: str,
        due: float,
        speed: float,
        clock: SentenceWordClock | None,
        pcm_queue: PcmQueue,
    ) -> int:
        """Run the engine on one sentence (`prompt`: its voice_prompt); returns its frames after the speed
        change. Word timings go to `pcm_queue` as the engine's pointer passes them."""
        raise NotImplementedError

    def finish(self, utterance_id: str) -> None:
        """The sentence's last frames were spoken (after its last word timings were queued)."""

    def drop(self, utterance_id: str) -> None:
        raise NotImplementedError


class VocodedHere(PcmStage):
    def __init__(self, model_dir: Path, config: EngineConfig, device: str):
        self._args = (model_dir, config, device)

    async def start(self) -> None:
        self.worker, self.described = await start_vocoder_worker(*self._args)

    async def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    @property
    def up(self) -> bool:
        return self.worker is not None and self.worker.error is None

    @property
    def error(self) -> BaseException | None:
        return None if self.worker is None else self.worker.error

    def open(self, utterance_id: str, deadline: float) -> PcmQueue:
        assert self.worker is not None, "the stage was not started"
        queue: PcmQueue = self.worker.open(utterance_id, deadline=deadline)
        return queue

    async def speak(
        self,
        engine: MelEngine,
        prompt: list[int],
        utterance_id: str,
        due: float,
        speed: float,
        clock: SentenceWordClock | None,
        pcm_queue: PcmQueue,
    ) -> int:
        worker = self.worker
        assert worker is not None, "the stage was not started"
        scale = MelTimeScale(speed)
        frames_out = 0
        async for step in engine.generate(prompt, request_id=utterance_id, deadline=due):
            if clock is not None and (words := clock.step(step.pointer)):
                pcm_queue.put_nowait(words)
            assert step.mel is not None  # the engine sends mel when the vocoder runs here
            frames = scale.push(step.mel)
            if frames.shape[0]:
                frames_out += frames.shape[0]
                worker.push(utterance_id, frames)
        tail = scale.flush()
        if tail.size:
            frames_out += tail.shape[0]
            worker.push(utterance_id, tail)
        return frames_out

    def finish(self, utterance_id: str) -> None:
        if self.worker is not None:
            self.worker.finish(utterance_id)

    def drop(self, utterance_id: str) -> None:
        if self.worker is not None:
            self.worker.cancel(utterance_id)


class EngineVocoded(PcmStage):
    described = "in the engine's worker"

    def __init__(self, sink_base: str, sink: int, frames_per_step: int):
        self._sink_base, self._sink, self._frames_per_step = sink_base, sink, frames_per_step
        self._receiver: PcmReceiver | None = None

    async def start(self) -> None:
        from .pcm_receiver import PcmReceiver

        self._receiver = PcmReceiver(self._sink_base, self._sink)  # bound before any request
        self._receiver.start()

    async def close(self) -> None:
        if self._receiver is not None:
            await self._receiver.close()
            self._receiver = None

    @property
    def up(self) -> bool:
        return self._receiver is not None and self._receiver.alive

    @property
    def error(self) -> BaseException | None:
        return None if self._receiver is None else self._receiver.error

    def open(self, utterance_id: str, deadline: float) -> PcmQueue:
        assert self._receiver is not None, "the stage was not started"
        return self._receiver.open(utterance_id)

    async def speak(
        self,
        engine: MelEngine,
        prompt: list[int],
        utterance_id: str,
        due: float,
        speed: float,
        clock: SentenceWordClock | None,
        pcm_queue: PcmQueue,
    ) -> int:
        from engine_patches.pcm_wire import PcmRoute

        steps = 0
        route = PcmRoute(sink=self._sink, key=utterance_id, speed=speed)
        # Without word timings nothing here reads a step before the sentence ends (the PCM has its own
        # channel): the engine's outputs come UNTIMED_STREAM_INTERVAL steps at a time, and the first and
        # the last at once, as always.
        interval = None if clock is not None else UNTIMED_STREAM_INTERVAL
        async for step in engine.generate(
            prompt, request_id=utterance_id, deadline=due, pcm=route, stream_interval=interval
        ):
            steps += 1
            if clock is not None and (words := clock.step(step.pointer)):
                pcm_queue.put_nowait(words)
        return scaled_frames(steps * self._frames_per_step, speed)

    def drop(self, utterance_id: str) -> None:
        if self._receiver is not None:
            self._receiver.drop(utterance_id)
