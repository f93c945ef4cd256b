"""Stalls of a load client's own event loop, so an underrun the client caused is told apart from one the
server caused.

A chunk's arrival is stamped when the client's event loop reads it. If that loop could not run for a
while (a garbage-collector pass over the records, a burst of new connections), every chunk that came in
meanwhile is stamped late, and a stream with little audio buffered shows an underrun the server did not
cause. `LoopStalls` samples the loop every `period_s` and keeps each interval it could not run for at
least `min_stall_s`, and the collector's pauses of at least `min_gc_s`. `overlapping(starved, stalls)`
counts the underruns (`Playback.starved`: when the audio ran out, when the late chunk was stamped) whose
starvation overlaps a stall of the same client process: those the client may have caused, wholly or in
part.
"""

from collections.abc import Iterable

from uttera_server import stalls


class LoopStalls:
    """Run `watch()` as a task beside the clients; `stalls` and `gc_pauses` are (start, end) in
    `time.perf_counter()` seconds (system-wide on Linux, like the records' times). The probes are the
    server's own (uttera_server/stalls.py)."""

    def __init__(self, period_s: float = 0.005, min_stall_s: float = 0.02, min_gc_s: float = 0.005):
        self.period_s, self.min_stall_s, self.min_gc_s = period_s, min_stall_s, min_gc_s
        self.stalls: list[tuple[float, float]] = []
        self.gc_pauses: list[tuple[float, float]] = []
        self._on_gc = stalls.gc_pass_callback(self._on_pass)

    async def watch(self) -> None:
        await stalls.watch_loop(self.period_s, self._on_tick)

    def _on_tick(self, due: float, ran: float) -> None:
        if ran - due >= self.min_stall_s:
            self.stalls.append((due, ran))

    def _on_pass(self, generation: int | None, start: float, end: float) -> None:
        if end - start >= self.min_gc_s:
            self.gc_pauses.append((start, end))

    def __enter__(self) -> "LoopStalls":
        stalls.install(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        stalls.uninstall(self._on_gc)

    def as_dict(self) -> dict:
        return {"stalls": self.stalls, "gc_pauses": self.gc_pauses}


def overlapping(starved: Iterable[tuple[float, float]], stalls: list[tuple[float, float]]) -> int:
    """How many starvation intervals (ran out, chunk stamped) overlap any stall interval."""
    return sum(1 for a, b in starved if any(s0 < b and s1 > a for s0, s1 in stalls))


def summary(parts: list[dict]) -> dict:
    """Figures over the client processes' `LoopStalls.as_dict()`: time stalled, stalls of >= 50 ms, the
    longest stall and collector pause, in ms."""
    stalls = [b - a for p in parts for a, b in p["stalls"]]
    pauses = [b - a for p in parts for a, b in p["gc_pauses"]]
    return {
        "client_loop_stalled_s": round(sum(stalls), 2),  # all processes' stalls of >= min_stall_s, summed
        "client_loop_stalls_50ms": sum(1 for d in stalls if d >= 0.05),
        "client_loop_stall_ms_max": round(1000 * max(stalls, default=0.0), 1),
        "client_gc_pause_ms_max": round(1000 * max(pauses, default=0.0), 1),
    }
