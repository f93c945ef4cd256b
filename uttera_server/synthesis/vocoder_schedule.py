"""Which utterances the server's vocoder worker vocodes next, and with which frames: its deadline policy, pure.

`VocoderSchedule` holds no thread, lock or clock: the caller reports what happened (`open`, `pushed`,
`delivered`, `close`, `passed`), passing the time as `now` (seconds on one clock: time.monotonic() in the
server), and asks what to do (`first_chunk_frames`, `plan`). `VocoderWorker` (vocoder_worker.py) holds its
lock around every call and runs the passes a `Plan` lists; tests/vocoder/test_vocoder_schedule.py drives
it with plain numbers.

First-chunk priority (`deadline_first=True`, the server's `--scheduling deadline`):

* Each utterance carries the time its client runs out of audio: `open(deadline=)` until its first audio,
  then that audio's delivery time, plus all audio delivered since.
* An utterance is *urgent* when waiting for its next scheduled chunk would leave its client without audio:
  slack < (frames still missing) / (rate its frames arrive at) + margin, the margin being
  `urgent_margin_s` plus two recent vocoder passes. A new utterance's first chunk is always urgent.
* An urgent utterance is vocoded as soon as it has any new frame (after its first chunk, whatever the
  chunk schedule says); in a pass that also holds utterances with more slack, the urgent ones go through a
  forward of their own and are delivered first. The others wait and batch bigger chunks.
* The first chunk must outlast a slow engine step (its playable audio is all the client has until the
  next chunk): it grows from `first_chunk_frames` to cover the p95 of recent frame intervals plus two
  passes.
* `max_relaxed_frames` (the server sets it on CPU, where a big batch takes tens of ms): a pass vocodes
  at most that many frames of non-urgent utterances, earliest deadline first, and leaves the rest to the
  next pass, so an utterance that turns urgent never waits long behind utterances that could wait.

With `deadline_first=False` (`--scheduling fcfs`) every pass vocodes everything that arrived, in one batch.

The in-engine vocoder (engine_patches/engine_vocoder.py) has a rule of its own (`urgent_s`: audio sent
ahead of playback since the first chunk), computed in vLLM's worker process from the vocoder's counts; it
shares the idea of slack, not this bookkeeping (no deadlines from the client, no arrival rates).
"""

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backlog:
    """One live utterance when a pass is planned, in frames (from its `StreamingVocoder`)."""

    new: int | None = None  # frames pushed since the last pass; None: no push (0: an empty one)
    held: int = 0  # frames the vocoder holds from earlier passes, not yet vocoded (`pending_frames`)
    to_next_chunk: int = 0  # frames its chunk schedule still waits for, `new` counted (`frames_to_next_chunk`)


@dataclass(frozen=True, slots=True)
class Pass:
    """One batched vocoder forward (`StreamingVocoder.submit`)."""

    utterances: tuple[Hashable, ...]  # their new frames (none for an urgent utterance sent out for its held frames)
    finish: tuple[Hashable, ...]  # flushed and closed
    eager: frozenset[Hashable]  # ready with any pending frame, whatever the chunk schedule says


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with everything queued since the last pass."""

    passes: tuple[Pass, ...] = ()  # run in order, each delivered before the next (urgent utterances first)
    deferred: tuple[Hashable, ...] = ()  # left for the next pass: their new frames and finish go back


@dataclass(slots=True)
class _Pace:
    """One utterance's timing."""

    deadline: float  # when its client runs out of audio
    started: bool = False  # it has delivered audio
    last_push: float | None = None
    rate: float = 0.0  # frames/s at which its frames arrive (EMA; 0 until measured)


class VocoderSchedule:
    """The vocoder worker's policy (see module docstring). Times are seconds on the caller's clock; audio
    is counted in samples at `sample_rate` Hz, mel in frames of `hop_length` samples."""

    def __init__(
        self,
        *,
        sample_rate: int,
        hop_length: int,
        lag_samples: int,
        first_chunk_frames: int,
        chunk_frames: int,
        deadline_first: bool = True,
        urgent_margin_s: float = 0.05,
        max_relaxed_frames: int | None = None,
    ):
        self.sample_rate, self.hop_length, self.lag_samples = sample_rate, hop_length, lag_samples
        self.base_first_chunk_frames, self.chunk_frames = first_chunk_frames, chunk_frames
        self.deadline_first = deadline_first
        self.urgent_margin_s = urgent_margin_s
        self.max_relaxed_frames = max_relaxed_frames
        self.split_passes = 0  # plans that vocode urgent utterances ahead of the others
        self.deferred_passes = 0  # plans that left non-urgent work for the next one
        self._pace: dict[Hashable, _Pace] = {}
        self._intervals: deque[float] = deque(maxlen=256)  # recent times between an utterance's pushes
        self._pass_s = 0.0  # EMA of a vocoder pass's wall time

    # --- what happened ---
    def open(self, utterance_id: Hashable, deadline: float) -> None:
        """A new utterance, whose client runs out of audio at `deadline` until it gets some."""
        self._pace[utterance_id] = _Pace(deadline)

    def pushed(self, utterance_id: Hashable, frames: int, now: float) -> None:
        """`frames` mel frames arrived for the utterance (measures frame intervals and its frame rate)."""
        pace = self._pace.get(utterance_id)
        if pace is None:
            return
        if pace.last_push is not None:
            self._intervals.append(now - pace.last_push)
            if now > pace.last_push:
                sample = frames / (now - pace.last_push)
                pace.rate = sample if pace.rate == 0.0 else 0.8 * pace.rate + 0.2 * sample
        pace.last_push = now

    def passed(self, seconds: float) -> None:
        """A vocoder pass took `seconds`, submission to delivery."""
        self._pass_s = 0.9 * self._pass_s + 0.1 * seconds

    def delivered(self, utterance_id: Hashable, samples: int, now: float) -> None:
        """`samples` of the utterance's audio reached its client: its client has that much more to play, from
        now on if this is its first audio."""
        pace = self._pace.get(utterance_id)
        if pace is None or not samples:
            return
        if not pace.started:  # its client starts playing about now
            pace.started = True
            pace.deadline = max(pace.deadline, now)
        pace.deadline += samples / self.sample_rate

    def close(self, utterance_id: Hashable) -> None:
        """The utterance finished or was cancelled (unknown ids are ignored)."""
        self._pace.pop(utterance_id, None)

    # --- what to do ---
    def deadline(self, utterance_id: Hashable) -> float | None:
        """When the utterance's client runs out of audio; None for an utterance not open."""
        pace = self._pace.get(utterance_id)
        return None if pace is None else pace.deadline

    def first_chunk_frames(self) -> int:
        """Frames of an utterance's first chunk: enough that its playable audio outlasts a slow step (p95 of
        recent frame intervals) plus two passes, between `first_chunk_frames` and `chunk_frames`."""
        base = self.base_first_chunk_frames
        if not self.deadline_first or len(self._intervals) < 16:
            return base
        intervals = sorted(self._intervals)
        cover_s = intervals[int(0.95 * (len(intervals) - 1))] + 2.0 * self._pass_s
        frames = math.ceil((cover_s * self.sample_rate + self.lag_samples) / self.hop_length)
        return max(base, min(self.chunk_frames, frames))

    def urgent(self, now: float, utterances: Mapping[Hashable, Backlog]) -> set[Hashable]:
        """The utterances whose client would run out of audio before their next scheduled chunk (any live
        utterance: one whose frames the chunk schedule holds back may be urgent without new frames)."""
        margin = self.urgent_margin_s + 2.0 * self._pass_s
        urgent = set()
        for uid, backlog in utterances.items():
            pace = self._pace.get(uid)
            deadline, rate = (now, 0.0) if pace is None else (pace.deadline, pace.rate)
            wait = backlog.to_next_chunk / rate if rate > 0 else 0.0
            if deadline - now < wait + margin:
                urgent.add(uid)
        return urgent

    def plan(self, now: float, utterances: Mapping[Hashable, Backlog], finishing: Sequence[Hashable] = ()) -> Plan:
        """The passes for what arrived since the last pass. `utterances`: every live utterance (its frames in
        this order in each pass); `finishing`: utterances whose client sent its last frame."""
        new = [uid for uid, backlog in utterances.items() if backlog.new is not None]
        finishing = [uid for uid in finishing if uid in utterances]
        if not new and not finishing:
            return Plan()
        if not self.deadline_first:
            return Plan((Pass(tuple(new), tuple(finishing), frozenset()),))
        urgent = self.urgent(now, utterances)
        taken = {*new, *finishing}
        held = [uid for uid in utterances if uid in urgent and uid not in taken and utterances[uid].held]
        first = [uid for uid in new if uid in urgent] + held
        first_finish = [uid for uid in finishing if uid in urgent]
        rest = [uid for uid in new if uid not in urgent]
        rest_finish = [uid for uid in finishing if uid not in urgent]
        deferred: tuple[Hashable, ...] = ()
        if self.max_relaxed_frames is not None:
            rest, rest_finish, deferred = self._cap(rest, rest_finish, utterances)
        eager = frozenset(urgent)
        if (first or first_finish) and (rest or rest_finish):
            self.split_passes += 1
            return Plan(
                (Pass(tuple(first), tuple(first_finish), eager), Pass(tuple(rest), tuple(rest_finish), frozenset())),
                deferred,
            )
        if not (first or first_finish or rest or rest_finish):
            return Plan(deferred=deferred)
        return Plan((Pass((*rest, *first), (*rest_finish, *first_finish), eager),), deferred)

    def _cap(
        self, rest: list[Hashable], rest_finish: list[Hashable], utterances: Mapping[Hashable, Backlog]
    ) -> tuple[list[Hashable], list[Hashable], tuple[Hashable, ...]]:
        """Keep at most `max_relaxed_frames` frames of vocoding among non-urgent utterances (earliest deadline
        first, at least one utterance; an utterance the chunk schedule holds back costs nothing): (kept new, kept
        finishing, the utterances left for the next pass)."""
        cap = self.max_relaxed_frames
        assert cap is not None  # plan() caps only when a cap is set
        finishing = set(rest_finish)
        cost: dict[Hashable, int] = {}
        for uid in dict.fromkeys([*rest, *rest_finish]):
            backlog = utterances[uid]
            ready = uid in finishing or backlog.to_next_chunk == 0
            cost[uid] = backlog.held + (backlog.new or 0) if ready else 0
        order = sorted(cost, key=lambda uid: self._pace[uid].deadline if uid in self._pace else 0.0)
        keep: set[Hashable] = set()
        total = 0
        for uid in order:
            if cost[uid] and keep and total + cost[uid] > cap:
                continue
            keep.add(uid)
            total += cost[uid]
        later = tuple(uid for uid in order if uid not in keep)
        if later:
            self.deferred_passes += 1
        return [uid for uid in rest if uid in keep], [uid for uid in rest_finish if uid in keep], later
