"""Runs the streaming vocoder beside the engine and hands PCM back to asyncio.

One worker thread owns a `vocoder.streaming.StreamingVocoder`. The event loop only queues work
(`open`, `push`, `finish`, `cancel`: cheap, never blocking); the thread takes everything queued since
its last pass and vocodes every ready utterance in ONE batched forward (`StreamingVocoder.submit`), so
while it works the engine keeps stepping, and frames that arrive meanwhile join the next batch. On CUDA
the vocoder runs on its own CUDA stream (see vocoder/streaming.py); on CPU torch kernels release the
GIL, and the thread gets its own intra-op thread count.

PCM is delivered to each utterance's `asyncio.Queue` as float32 arrays; `None` marks the end of an utterance.

`driver="loop"` runs the same passes without the thread: a task on the event loop issues the vocoder's
ops itself, and only waits for CUDA work off the loop (`asyncio.to_thread`). PyTorch releases the GIL
around every op, so a vocoder thread waits for the GIL after each of a pass's ~330 calls while the
event loop is busy (`benchmarks/gil_convoy.py`: 38-91x its idle time at Python's 5 ms switch
interval); on the loop there is no hand-off. On CPU the loop then computes the whole pass itself
(nothing else runs meanwhile), so the thread stays the default there.

Which utterances a pass vocodes, and when the first chunk may grow, is `VocoderSchedule`'s decision
(vocoder_schedule.py: first-chunk priority under `deadline_first=True`); this module only feeds it what
happened (opens, pushes, deliveries, pass times, on `clock`) and runs the passes its `Plan` lists.
"""

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator
from typing import TypeAlias

import numpy as np
import torch

from vocoder.step_result import StepResult
from vocoder.streaming import StreamingVocoder

from ..config import VOCODER_DRIVERS
from .pcm_queue import PcmQueue
from .vocoder_schedule import Backlog, Plan, VocoderSchedule

log = logging.getLogger(__name__)

# Everything queued since the last pass: opened utterances, frames per utterance, finishes, cancels.
_Taken: TypeAlias = tuple[list[Hashable], dict[Hashable, list[np.ndarray]], list[Hashable], list[Hashable]]
# One vocoder pass to run: frames per utterance, utterances to finish, utterances to send out eagerly.
_Pass: TypeAlias = tuple[dict[Hashable, np.ndarray], list[Hashable], frozenset[Hashable]]


class VocoderWorker:
    def __init__(
        self,
        vocoder: StreamingVocoder,
        *,
        torch_threads: int = 1,
        deadline_first: bool = True,
        urgent_margin_s: float = 0.05,
        max_relaxed_frames: int | None = None,
        driver: str = "thread",
        clock: Callable[[], float] = time.monotonic,
    ):
        """`deadline_first`, `urgent_margin_s`, `max_relaxed_frames`: the schedule's (vocoder_schedule.py).
        `clock`: the time deadlines are given in (seconds); tests pass a fake one."""
        if driver not in VOCODER_DRIVERS:
            raise ValueError(f"driver must be one of {', '.join(VOCODER_DRIVERS)}, got {driver!r}")
        self.vocoder = vocoder
        self.driver = driver
        self.torch_threads = torch_threads
        c = vocoder.config
        self.schedule = VocoderSchedule(
            sample_rate=c.sample_rate,
            hop_length=c.hop_length,
            lag_samples=vocoder.lag_samples,
            first_chunk_frames=vocoder.first_chunk_frames,
            chunk_frames=vocoder.chunk_frames,
            deadline_first=deadline_first,
            urgent_margin_s=urgent_margin_s,
            max_relaxed_frames=max_relaxed_frames,
        )  # touched from both drivers' sides: only with `_cv` held
        self._clock = clock
        self._cv = threading.Condition()
        self._frames: dict[Hashable, list[np.ndarray]] = defaultdict(list)
        self._open: list[Hashable] = []
        self._finish: list[Hashable] = []
        self._cancel: list[Hashable] = []
        self._queues: dict[Hashable, tuple[asyncio.AbstractEventLoop, PcmQueue]] = {}
        self._stopping = False
        self._error: BaseException | None = None
        self.batches = 0  # vocoder forwards run (for metrics and tests)
        self.batched_utterances = 0  # sum over forwards of utterances in the batch
        self.trace: list[tuple[float, float, int]] | None = None  # set to [] to record (start, end, utterances)
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        if driver == "thread":
            self._thread = threading.Thread(target=self._run, name="uttera-vocoder", daemon=True)
            self._thread.start()
        else:  # constructed on the event loop that will drive it
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = self._loop.create_task(self._drive(), name="uttera-vocoder")

    @property
    def error(self) -> BaseException | None:
        """What stopped the worker, if it failed (it then serves nothing more)."""
        return self._error

    @property
    def split_passes(self) -> int:
        """Passes that vocoded urgent utterances ahead of the others."""
        return self.schedule.split_passes

    @property
    def deferred_passes(self) -> int:
        """Passes that left non-urgent work for the next one."""
        return self.schedule.deferred_passes

    def _notify(self) -> None:
        """Wake the driver; call with `_cv` held."""
        self._cv.notify()
        if self._task is not None:
            try:
                on_loop = asyncio.get_running_loop() is self._loop
            except RuntimeError:
                on_loop = False
            if on_loop:
                self._wake.set()
            else:
                self._loop.call_soon_threadsafe(self._wake.set)

    # --- called from the event loop ---
    def open(self, utterance_id: Hashable, deadline: float | None = None) -> PcmQueue:
        """Start an utterance; its PCM chunks (then `None`) arrive on the returned queue. `deadline`
        (on `clock`, time.monotonic() by default): when its client runs out of audio without it; default now."""
        queue: PcmQueue = asyncio.Queue()
        with self._cv:
            if self._error is not None:
                raise RuntimeError("vocoder worker failed") from self._error
            self._queues[utterance_id] = (asyncio.get_running_loop(), queue)
            self.schedule.open(utterance_id, self._clock() if deadline is None else deadline)
            self._open.append(utterance_id)
            self._notify()
        return queue

    def push(self, utterance_id: Hashable, frames: np.ndarray) -> None:
        """Queue `(k, n_mels)` log-mel frames."""
        now = self._clock()
        with self._cv:
            self.schedule.pushed(utterance_id, frames.shape[0], now)
            self._frames[utterance_id].append(frames)
            self._notify()

    def finish(self, utterance_id: Hashable) -> None:
        """No more frames: vocode what is left, then deliver `None`."""
        with self._cv:
            self._finish.append(utterance_id)
            self._notify()

    def cancel(self, utterance_id: Hashable) -> None:
        """Drop the utterance and whatever it has queued; nothing more is delivered."""
        with self._cv:
            self._queues.pop(utterance_id, None)
            self._frames.pop(utterance_id, None)
            self.schedule.close(utterance_id)
            self._cancel.append(utterance_id)
            self._notify()

    def close(self) -> None:
        with self._cv:
            self._stopping = True
            self._notify()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._task is not None:
            self._task.cancel()

    # --- the drivers: a thread (default) or a task on the event loop ---
    def _has_work(self) -> bool:
        return bool(self._open or self._frames or self._finish or self._cancel or self._stopping)

    def _take(self) -> _Taken | None:
        """Everything queued since the last pass (with `_cv` held); None once stopping."""
        if self._stopping:
            return None
        taken = self._open, self._frames, self._finish, self._cancel
        self._open, self._frames, self._finish, self._cancel = [], defaultdict(list), [], []
        return taken

    def _fail(self, e: BaseException) -> None:
        """Deliver the failure to every waiting utterance (the worker stops: the server is no longer ready)."""
        log.error("vocoder worker failed; it serves nothing more", exc_info=e)
        with self._cv:
            self._error = e
            queues = list(self._queues.values())
            self._queues.clear()
        for loop, queue in queues:
            loop.call_soon_threadsafe(queue.put_nowait, e)

    def _passes(self, taken: _Taken) -> Iterator[tuple[StepResult, list[Hashable], float]]:
        """Submit the planned passes one at a time, each once the one before has been delivered:
        (its result, its finished utterances, when it was submitted)."""
        for batch, finish, eager in self._plan(*taken):
            t0 = self._clock()
            yield self.vocoder.submit(batch, finish=finish, eager=eager), finish, t0

    def _run(self) -> None:
        torch.set_num_threads(self.torch_threads)
        while True:
            with self._cv:
                while not self._has_work():
                    self._cv.wait()
                taken = self._take()
            if taken is None:
                return
            try:
                for result, finish, t0 in self._passes(taken):
                    self._deliver(result.wait(), finish, t0, self._clock())
            except BaseException as e:
                self._fail(e)
                return

    async def _drive(self) -> None:
        while True:
            self._wake.clear()  # before looking: work queued after this sets it again
            with self._cv:
                busy = self._has_work()  # (work a capped pass gave back is queued without a wake-up)
                taken = self._take() if busy else None
            if not busy:
                await self._wake.wait()
                continue
            if taken is None:
                return
            try:
                for result, finish, t0 in self._passes(taken):
                    if not result.done():  # CUDA work in flight: wait off the loop (one GIL hand-off)
                        await asyncio.to_thread(result.wait)
                    self._deliver(result.wait(), finish, t0, self._clock())
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                self._fail(e)
                return

    def _plan(
        self,
        opened: list[Hashable],
        frames: dict[Hashable, list[np.ndarray]],
        finish: list[Hashable],
        cancel: list[Hashable],
    ) -> list[_Pass]:
        """Open and cancel utterances, then the schedule's passes to run in order: (frames, finishes, eager
        utterances). Utterances the schedule defers go back to the queue."""
        vocoder = self.vocoder
        for uid in opened:
            vocoder.open(uid)
        for uid in cancel:
            frames.pop(uid, None)
            if uid in vocoder.active:
                vocoder.cancel(uid)
        live = vocoder.active
        alive = set(live)
        batch = {uid: np.concatenate(chunks) for uid, chunks in frames.items() if uid in alive}
        finish = [uid for uid in finish if uid in alive]
        if not batch and not finish:
            return []
        with self._cv:
            first_chunk_frames = self.schedule.first_chunk_frames()
        vocoder.first_chunk_frames = first_chunk_frames  # before asking where each utterance's next chunk is
        utterances = {}
        for uid in dict.fromkeys([*batch, *live]):
            new = batch[uid].shape[0] if uid in batch else None
            utterances[uid] = Backlog(
                new, vocoder.pending_frames(uid), vocoder.frames_to_next_chunk(uid, extra=new or 0)
            )
        with self._cv:
            plan = self.schedule.plan(self._clock(), utterances, finish)
            self._give_back(plan, batch, finish)
        empty = np.zeros((0, vocoder.config.n_mels), np.float32)
        return [({uid: batch.get(uid, empty) for uid in p.utterances}, list(p.finish), p.eager) for p in plan.passes]

    def _give_back(self, plan: Plan, batch: dict[Hashable, np.ndarray], finish: list[Hashable]) -> None:
        """Queue the deferred utterances' frames and finishes again, ahead of newer ones (with `_cv` held)."""
        for uid in plan.deferred:
            if uid not in self._queues:
                continue  # cancelled meanwhile
            if uid in batch:
                self._frames[uid].insert(0, batch[uid])
            if uid in finish:
                self._finish.insert(0, uid)

    def _deliver(self, pcm: dict[Hashable, np.ndarray], finish: list[Hashable], t0: float, t1: float) -> None:
        """Hand one pass's PCM to the utterances' queues, and tell the schedule."""
        if self.trace is not None:
            self.trace.append((t0, t1, len(pcm)))
        self.batches += 1
        self.batched_utterances += len(pcm)
        done = set(finish)
        with self._cv:
            self.schedule.passed(t1 - t0)
            targets = {uid: self._queues.get(uid) for uid in pcm}
            for uid, audio in pcm.items():
                if uid in done:
                    self._queues.pop(uid, None)
                    self.schedule.close(uid)
                else:
                    self.schedule.delivered(uid, audio.shape[0], t1)
        for uid, audio in pcm.items():
            if (target := targets[uid]) is None:
                continue  # cancelled meanwhile
            loop, queue = target
            if audio.size:
                loop.call_soon_threadsafe(queue.put_nowait, audio)
            if uid in done:
                loop.call_soon_threadsafe(queue.put_nowait, None)
