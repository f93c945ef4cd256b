"""Warnings for the pauses that cost a real-time stream its audio: a garbage-collector pass, and an
engine step that came long after the one before it.

A listener who has just started has only its first chunk buffered (~0.1 s); a process that stops for
longer than that underruns every such stream it serves. Both watchers log one WARNING per pause past
their threshold, with the wall-clock time (`t=`, seconds since the epoch) so a client's record of an
underrun can be matched against it. `watch_gc()` is installed in every vLLM process by `apply()`
(serving processes and engine cores); `StepGaps` by the model runner patch. Once an engine core or a
worker starts its shutdown, its collector passes are no longer watched (`patch_shutdowns`): vLLM unfreezes
the heap there and collects it whole (~0.4 s), with no stream left to starve.
"""

import atexit
import logging
import os
import time
from collections.abc import Callable

from uttera_server import stalls

log = logging.getLogger(__name__)

GC_WARN_S = 0.05
STEP_GAP_WARN_S = 0.25
_installed: list[Callable[[str, dict[str, int]], None]] = []


def watch_gc(warn_s: float = GC_WARN_S, clock: Callable[[], float] = time.perf_counter) -> None:
    """Log collector passes of at least `warn_s` in this process (once per process)."""
    if _installed:
        return

    def on_pass(generation: int | None, start: float, end: float) -> None:
        if end - start >= warn_s:
            log.warning(
                "garbage collection of generation %s paused process %d for %.0f ms (t=%.3f)",
                generation,
                os.getpid(),
                1000 * (end - start),
                time.time(),
            )

    on_gc = stalls.gc_pass_callback(on_pass, clock)
    stalls.install(on_gc)
    _installed.append(on_gc)
    atexit.register(stalls.uninstall, on_gc)  # the passes of interpreter shutdown starve no one


def stop_watching_gc() -> None:
    """This process's collector passes go unwatched from now on."""
    for on_gc in _installed:
        stalls.uninstall(on_gc)


def _unwatched_from(cls: type, name: str) -> None:
    """`cls.name` stops watching the collector before it runs (once per class)."""
    original = getattr(cls, name)
    if getattr(original, "_uttera_unwatched", False):
        return

    def method(self: object, *args: object, **kwargs: object) -> object:
        stop_watching_gc()
        return original(self, *args, **kwargs)

    method._uttera_unwatched = True  # type: ignore[attr-defined]
    method.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, name, method)  # the patch itself


def patch_shutdowns() -> None:
    """The engine core's and the workers' shutdowns (the CPU worker's is the GPU worker's) stop watching
    the collector first."""
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.gpu_worker import Worker

    _unwatched_from(EngineCore, "shutdown")
    _unwatched_from(Worker, "shutdown")


class StepGaps:
    """Time from the start of one engine step to the start of the next while requests keep running
    (steps that continue at least one request: no idle engine between them). `begin()` at a step's start,
    `end()` once its output is made."""

    def __init__(self, warn_s: float = STEP_GAP_WARN_S, clock: Callable[[], float] = time.monotonic):
        self.warn_s, self._clock = warn_s, clock
        self._began: float | None = None
        self._ended: float | None = None
        self.gaps = 0  # warnings logged

    def begin(self, continuing: int) -> None:
        """`continuing`: requests of this step that the step before also ran."""
        now = self._clock()
        began, ended = self._began, self._ended
        self._began = now
        if continuing and began is not None and now - began >= self.warn_s:
            self.gaps += 1
            ended = ended if ended is not None and ended >= began else now  # no output made: all of it the step
            log.warning(
                "engine step came %.0f ms after the one before (that step %.0f ms, between them %.0f ms; "
                "%d continuing requests, t=%.3f)",
                1000 * (now - began),
                1000 * (ended - began),
                1000 * (now - ended),
                continuing,
                time.time(),
            )

    def end(self) -> None:
        self._ended = self._clock()
