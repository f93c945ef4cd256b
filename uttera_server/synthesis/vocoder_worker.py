"""Runs the streaming vocoder beside the engine and hands PCM back to asyncio.

One worker thread owns a `vocoder.streaming.StreamingVocoder`. The event loop only queues work
(`open`, `push`, `finish`, `cancel`: cheap, never blocking); the thread takes everything queued since
its last pass and vocodes every ready stream in ONE batched forward (`StreamingVocoder.submit`), so
while it works the engine keeps stepping, and frames that arrive meanwhile join the next batch. On CUDA
the vocoder runs on its own CUDA stream (see vocoder/streaming.py); on CPU torch kernels release the
GIL, and the thread gets its own intra-op thread count.

PCM is delivered to each stream's `asyncio.Queue` as float32 arrays; `None` marks the end of a stream.

`driver="loop"` runs the same passes without the thread: a task on the event loop issues the vocoder's
ops itself, and only waits for CUDA work off the loop (`asyncio.to_thread`). PyTorch releases the GIL
around every op, so a vocoder thread waits for the GIL after each of a pass's ~330 calls while the
event loop is busy (`benchmarks/gil_convoy.py`: 38-91x its idle time at Python's 5 ms switch
interval); on the loop there is no hand-off. On CPU the loop then computes the whole pass itself
(nothing else runs meanwhile), so the thread stays the default there.

First-chunk priority (`deadline_first=True`, the server's `--scheduling deadline`):

* Each stream carries the time its client runs out of audio: `open(deadline=)` until its first audio,
  then that audio's delivery time, plus all audio delivered since.
* A stream is *urgent* when waiting for its next scheduled chunk would leave its client without audio:
  slack < (frames still missing) / (rate its frames arrive at) + margin, the margin being
  `urgent_margin_s` plus two recent vocoder passes. A new stream's first chunk is always urgent.
* An urgent stream is vocoded as soon as it has any new frame (after its first chunk, whatever the
  chunk schedule says); in a pass that also holds streams with more slack, the urgent ones go through a
  forward of their own and are delivered first. The others wait and batch bigger chunks.
* The first chunk must outlast a slow engine step (its playable audio is all the client has until the
  next chunk): it grows from `first_chunk_frames` to cover the p95 of recent frame intervals plus two
  passes.
* `max_relaxed_frames` (the server sets it on CPU, where a big batch takes tens of ms): a pass vocodes
  at most that many frames of non-urgent streams, earliest deadline first, and leaves the rest to the
  next pass, so a stream that turns urgent never waits long behind streams that could wait.
"""

import asyncio
import logging
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from vocoder.step_result import StepResult
from vocoder.streaming import StreamingVocoder

from ..config import VOCODER_DRIVERS

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pace:
    """One stream's timing, for deadline scheduling."""

    deadline: float  # when its client runs out of audio (time.monotonic())
    started: bool = False  # it has delivered audio
    last_push: float | None = None
    rate: float = 0.0  # frames/s at which its frames arrive (EMA; 0 until measured)


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
    ):
        if driver not in VOCODER_DRIVERS:
            raise ValueError(f"driver must be one of {', '.join(VOCODER_DRIVERS)}, got {driver!r}")
        self.vocoder = vocoder
        self.driver = driver
        self.torch_threads = torch_threads
        self.deadline_first = deadline_first
        self.urgent_margin_s = urgent_margin_s
        self.max_relaxed_frames = max_relaxed_frames
        self.deferred_passes = 0  # passes that left non-urgent work for the next one
        self._pass_s = 0.0  # EMA of a vocoder forward's wall time
        self._intervals: deque[float] = deque(maxlen=256)  # recent times between a stream's pushes
        self.base_first_chunk_frames = vocoder.first_chunk_frames
        self._pace: dict[Hashable, _Pace] = {}
        self._cv = threading.Condition()
        self._frames: dict[Hashable, list[np.ndarray]] = defaultdict(list)
        self._open: list[Hashable] = []
        self._finish: list[Hashable] = []
        self._cancel: list[Hashable] = []
        self._queues: dict[Hashable, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._stopping = False
        self._error: BaseException | None = None
        self.batches = 0  # vocoder forwards run (for metrics and tests)
        self.batched_streams = 0  # sum over forwards of streams in the batch
        self.split_passes = 0  # passes that vocoded urgent streams ahead of the others
        self.trace: list[tuple[float, float, int]] | None = None  # set to [] to record (start, end, streams)
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task | None = None
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
    def open(self, stream_id: Hashable, deadline: float | None = None) -> asyncio.Queue:
        """Start a stream; its PCM chunks (then `None`) arrive on the returned queue. `deadline`
        (time.monotonic()): when its client runs out of audio without it; default now."""
        queue: asyncio.Queue = asyncio.Queue()
        with self._cv:
            if self._error is not None:
                raise RuntimeError("vocoder worker failed") from self._error
            self._queues[stream_id] = (asyncio.get_running_loop(), queue)
            self._pace[stream_id] = _Pace(time.monotonic() if deadline is None else deadline)
            self._open.append(stream_id)
            self._notify()
        return queue

    def push(self, stream_id: Hashable, frames: np.ndarray) -> None:
        """Queue `(k, n_mels)` log-mel frames."""
        now = time.monotonic()
        with self._cv:
            pace = self._pace.get(stream_id)
            if pace is not None:
                if pace.last_push is not None:
                    self._intervals.append(now - pace.last_push)
                    if now > pace.last_push:
                        sample = frames.shape[0] / (now - pace.last_push)
                        pace.rate = sample if pace.rate == 0.0 else 0.8 * pace.rate + 0.2 * sample
                pace.last_push = now
            self._frames[stream_id].append(frames)
            self._notify()

    def finish(self, stream_id: Hashable) -> None:
        """No more frames: vocode what is left, then deliver `None`."""
        with self._cv:
            self._finish.append(stream_id)
            self._notify()

    def cancel(self, stream_id: Hashable) -> None:
        """Drop the stream and whatever it has queued; nothing more is delivered."""
        with self._cv:
            self._queues.pop(stream_id, None)
            self._frames.pop(stream_id, None)
            self._pace.pop(stream_id, None)
            self._cancel.append(stream_id)
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

    def _take(self) -> tuple | None:
        """Everything queued since the last pass (with `_cv` held); None once stopping."""
        if self._stopping:
            return None
        taken = self._open, self._frames, self._finish, self._cancel
        self._open, self._frames, self._finish, self._cancel = [], defaultdict(list), [], []
        return taken

    def _fail(self, e: BaseException) -> None:
        """Deliver the failure to every waiting stream (the worker stops: the server is no longer ready)."""
        log.error("vocoder worker failed; it serves nothing more", exc_info=e)
        with self._cv:
            self._error = e
            queues = list(self._queues.values())
            self._queues.clear()
        for loop, queue in queues:
            loop.call_soon_threadsafe(queue.put_nowait, e)

    def _passes(self, taken: tuple) -> Iterator[tuple[StepResult, list, float]]:
        """Submit the planned passes one at a time, each once the one before has been delivered:
        (its result, its finished streams, when it was submitted)."""
        for batch, finish, eager in self._plan(*taken):
            t0 = time.monotonic()
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
                    self._deliver(result.wait(), finish, t0, time.monotonic())
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
                    self._deliver(result.wait(), finish, t0, time.monotonic())
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                self._fail(e)
                return

    def _plan(self, opened, frames, finish, cancel) -> list[tuple[dict, list, set]]:
        """Open and cancel streams, then the passes to run in order: (frames, finishes, eager streams)."""
        for sid in opened:
            self.vocoder.open(sid)
        for sid in cancel:
            frames.pop(sid, None)
            if sid in self.vocoder.active:
                self.vocoder.cancel(sid)
        live = set(self.vocoder.active)
        batch = {sid: np.concatenate(chunks) for sid, chunks in frames.items() if sid in live}
        finish = [sid for sid in finish if sid in live]
        if not batch and not finish:
            return []
        if not self.deadline_first:
            return [(batch, finish, set())]
        self.vocoder.first_chunk_frames = self._first_chunk_frames()
        urgent = self._urgent(live, batch)
        first = {sid: f for sid, f in batch.items() if sid in urgent}
        first_finish = [sid for sid in finish if sid in urgent]
        for sid in urgent - set(batch) - set(finish):  # frames held back by the chunk schedule
            if self.vocoder.pending_frames(sid):
                first[sid] = np.zeros((0, self.vocoder.config.n_mels), np.float32)
        rest = {sid: f for sid, f in batch.items() if sid not in urgent}
        rest_finish = [sid for sid in finish if sid not in urgent]
        if self.max_relaxed_frames is not None:
            rest, rest_finish = self._cap(rest, rest_finish)
        if (first or first_finish) and (rest or rest_finish):
            self.split_passes += 1
            return [(first, first_finish, urgent), (rest, rest_finish, set())]
        if not (first or first_finish or rest or rest_finish):
            return []
        return [({**rest, **first}, rest_finish + first_finish, urgent)]

    def _cap(self, rest: dict, rest_finish: list) -> tuple[dict, list]:
        """Keep at most `max_relaxed_frames` frames of vocoding among non-urgent streams (earliest
        deadline first, at least one stream); give the others' frames and finishes back to the queue."""
        finishing = set(rest_finish)
        cost = {}
        for sid in set(rest) | finishing:
            new = rest[sid].shape[0] if sid in rest else 0
            ready = sid in finishing or self.vocoder.frames_to_next_chunk(sid, extra=new) == 0
            cost[sid] = self.vocoder.pending_frames(sid) + new if ready else 0
        with self._cv:
            order = sorted(cost, key=lambda sid: self._pace[sid].deadline if sid in self._pace else 0.0)
        keep, total = set(), 0
        for sid in order:
            if cost[sid] and keep and total + cost[sid] > self.max_relaxed_frames:
                continue
            keep.add(sid)
            total += cost[sid]
        later = set(order) - keep
        if not later:
            return rest, rest_finish
        self.deferred_passes += 1
        with self._cv:
            for sid in later:
                if sid not in self._queues:
                    continue  # cancelled meanwhile
                if sid in rest:
                    self._frames[sid].insert(0, rest[sid])
                if sid in finishing:
                    self._finish.insert(0, sid)
        return ({sid: f for sid, f in rest.items() if sid in keep}, [sid for sid in rest_finish if sid in keep])

    def _first_chunk_frames(self) -> int:
        """Frames whose playable audio outlasts a slow step (p95 of recent frame intervals) plus two passes."""
        with self._cv:
            intervals = sorted(self._intervals)
        base = self.base_first_chunk_frames
        if len(intervals) < 16:
            return base
        c = self.vocoder.config
        cover_s = intervals[int(0.95 * (len(intervals) - 1))] + 2.0 * self._pass_s
        frames = math.ceil((cover_s * c.sample_rate + self.vocoder.lag_samples) / c.hop_length)
        return max(base, min(self.vocoder.chunk_frames, frames))

    def _urgent(self, live: set, batch: dict) -> set:
        """Streams whose client would run out of audio before their next scheduled chunk (every live
        stream: one whose frames the schedule holds back may be urgent without new frames)."""
        now = time.monotonic()
        with self._cv:
            paces = {sid: (p.deadline, p.rate) for sid, p in self._pace.items()}
        margin = self.urgent_margin_s + 2.0 * self._pass_s
        urgent = set()
        for sid in live:
            deadline, rate = paces.get(sid, (now, 0.0))
            slack = deadline - now
            missing = self.vocoder.frames_to_next_chunk(sid, extra=batch[sid].shape[0] if sid in batch else 0)
            wait = missing / rate if rate > 0 else 0.0
            if slack < wait + margin:
                urgent.add(sid)
        return urgent

    def _deliver(self, pcm: dict, finish: list, t0: float, t1: float) -> None:
        """Hand one pass's PCM to the streams' queues and advance their deadlines."""
        self._pass_s = 0.9 * self._pass_s + 0.1 * (t1 - t0)
        if self.trace is not None:
            self.trace.append((t0, t1, len(pcm)))
        self.batches += 1
        self.batched_streams += len(pcm)
        done = set(finish)
        sample_rate = self.vocoder.config.sample_rate
        for sid, audio in pcm.items():
            with self._cv:
                target = self._queues.get(sid)
                if sid in done:
                    self._queues.pop(sid, None)
                    self._pace.pop(sid, None)
                elif (pace := self._pace.get(sid)) is not None and audio.size:
                    if not pace.started:  # its client starts playing about now
                        pace.started = True
                        pace.deadline = max(pace.deadline, time.monotonic())
                    pace.deadline += audio.shape[0] / sample_rate
            if target is None:
                continue  # cancelled meanwhile
            loop, queue = target
            if audio.size:
                loop.call_soon_threadsafe(queue.put_nowait, audio)
            if sid in done:
                loop.call_soon_threadsafe(queue.put_nowait, None)
