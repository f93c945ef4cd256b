"""Two probes of a process that stops running its work: how late its event loop runs a timer, and how
long each garbage-collector pass holds it. The serving process's metrics (`uttera_event_loop_lag_seconds`),
the engine's pause warnings (engine_patches/pauses.py) and the load client's own stall record
(benchmarks/client_stalls.py) are all built on these.
"""

import asyncio
import gc
import time
from collections.abc import Callable


async def watch_loop(
    tick_s: float, on_tick: Callable[[float, float], None], clock: Callable[[], float] = time.perf_counter
) -> None:
    """Until cancelled, sleep `tick_s` at a time on the running loop and call `on_tick(due, ran)`: when the
    timer was due and when the loop got to it (`clock()` seconds)."""
    while True:
        due = clock() + tick_s
        await asyncio.sleep(tick_s)
        on_tick(due, clock())


def gc_pass_callback(
    on_pass: Callable[[int | None, float, float], None], clock: Callable[[], float] = time.perf_counter
) -> Callable[[str, dict[str, int]], None]:
    """A `gc.callbacks` entry that calls `on_pass(generation, start, end)` after every collector pass."""
    start = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        now = clock()
        if phase == "start":
            start[0] = now
        else:
            on_pass(info.get("generation"), start[0], now)

    return on_gc


def install(callback: Callable[[str, dict[str, int]], None]) -> None:
    gc.callbacks.append(callback)


def uninstall(callback: Callable[[str, dict[str, int]], None]) -> None:
    if callback in gc.callbacks:
        gc.callbacks.remove(callback)
