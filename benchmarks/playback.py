"""What a listening client experiences, computed from when each audio chunk arrived (pure, no I/O).

`RequestRecord` holds one request's timeline: send time, `(arrival time, samples)` per audio chunk,
end time, error code. `playback(record)` simulates a client that starts playing at its first chunk,
in real time, with no extra buffer: an *underrun* is a chunk that arrives after the audio before it
has finished playing (playback stalls until it arrives, then resumes). All times are seconds from
`time.perf_counter()`; chunk sizes are in samples at `sample_rate` Hz.
"""

from dataclasses import dataclass, field


@dataclass(slots=True)
class RequestRecord:
    transport: str  # "http" | "ws" | an in-process pipeline name
    kind: str  # text kind (texts.py)
    chars: int
    t_send: float
    sample_rate: int = 22050
    arrivals: list = field(default_factory=list)  # [(t, samples)], in arrival order
    t_done: float | None = None
    error: str | None = None  # None when the request completed
    voice: str = "default"  # what the request asked for

    def add(self, t: float, samples: float) -> None:
        if samples > 0:
            self.arrivals.append((t, samples))

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_done is not None and bool(self.arrivals)

    @property
    def ttfa_s(self) -> float | None:
        return self.arrivals[0][0] - self.t_send if self.arrivals else None

    @property
    def audio_s(self) -> float:
        return sum(n for _, n in self.arrivals) / self.sample_rate

    @property
    def wall_s(self) -> float | None:
        return None if self.t_done is None else self.t_done - self.t_send

    @property
    def rtf(self) -> float | None:
        """Wall time from send to the last chunk / audio duration (< 1 is faster than real time)."""
        audio = self.audio_s
        return None if self.t_done is None or audio <= 0 else (self.arrivals[-1][0] - self.t_send) / audio

    def gaps_s(self) -> list[float]:
        """Time between consecutive chunk arrivals."""
        times = [t for t, _ in self.arrivals]
        return [b - a for a, b in zip(times, times[1:])]

    def to_json(self) -> dict:
        """Compact form for result files: times relative to t_send, ms."""
        return {
            "transport": self.transport,
            "kind": self.kind,
            "chars": self.chars,
            "error": self.error,
            "voice": self.voice,
            "t_send": self.t_send,
            "chunks_ms": [[round(1000 * (t - self.t_send), 2), int(n)] for t, n in self.arrivals],
        }


@dataclass(frozen=True, slots=True)
class Playback:
    underrun_at_s: tuple[float, ...]  # one per chunk that arrived after the audio before it had finished
    # playing: seconds of audio played before it
    starved: tuple[tuple[float, float], ...]  # per underrun: (when the audio ran out, when the chunk arrived)
    stall_s: float  # total time playback waited for audio (after it started)
    prebuffer_s: float  # start delay after the first chunk that would have avoided every underrun

    @property
    def underruns(self) -> int:
        return len(self.underrun_at_s)


def playback(record: RequestRecord) -> Playback:
    """Simulate real-time playback from the first chunk's arrival (see module docstring).

    `prebuffer_s`: a client that waits B seconds after the first chunk before playing never stalls iff
    every chunk arrives by t0 + B + (audio before it), so B = max(0, max_i(t_i - t0 - audio before i)).
    """
    if not record.arrivals:
        return Playback((), (), 0.0, 0.0)
    t0, n0 = record.arrivals[0]
    plays_until = t0 + n0 / record.sample_rate  # when the audio received so far runs out
    stall, prebuffer, before = 0.0, 0.0, n0 / record.sample_rate
    at: list[float] = []
    starved: list[tuple[float, float]] = []
    for t, n in record.arrivals[1:]:
        if t > plays_until:
            at.append(before)
            starved.append((plays_until, t))
            stall += t - plays_until
            plays_until = t
        plays_until += n / record.sample_rate
        prebuffer = max(prebuffer, t - t0 - before)
        before += n / record.sample_rate
    return Playback(tuple(at), tuple(starved), stall, prebuffer)
