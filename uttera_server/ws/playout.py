"""Underrun detection for one stream of audio sent to a real-time player. Pure: time is passed in.

The model is a client that starts playing a context's audio the moment its first frame arrives and
plays without pause. An underrun is a frame that arrives after everything sent before it would have
finished playing. A gap the client caused (its text arrived only after the audio ran out) is not an
underrun: the player simply starts again.
"""


class PlayoutClock:
    def __init__(self) -> None:
        self.end: float | None = None  # clock time the audio sent so far finishes playing

    def sent(self, seconds: float, now: float, ready_since: float) -> bool:
        """`seconds` of audio leave at `now`; the text they speak was there from `ready_since`.
        Returns True for an underrun."""
        if self.end is None:
            self.end = now + seconds
            return False
        underrun = now > self.end and ready_since <= self.end
        self.end = max(self.end, now) + seconds
        return underrun

    def lead(self, now: float) -> float:
        """Seconds of audio sent and not yet played at `now` (0 before any)."""
        return 0.0 if self.end is None else max(0.0, self.end - now)
