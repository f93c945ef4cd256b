"""engine_patches/pauses.py: a WARNING for each collector pass or engine step long enough to starve a new
stream, and none for the ordinary ones (controlled clocks; the collector's callback driven directly)."""

import gc
import logging

from engine_patches import pauses
from engine_patches.pauses import StepGaps


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_step_long_after_the_last_while_requests_continue_is_reported(caplog):
    clock = Clock()
    gaps = StepGaps(warn_s=0.25, clock=clock)
    with caplog.at_level(logging.WARNING, logger=pauses.__name__):
        gaps.begin(continuing=0)
        clock.t += 0.03
        gaps.end()
        clock.t += 0.02
        gaps.begin(continuing=10)  # 50 ms after the last began: fine
        clock.t += 0.04
        gaps.end()
        clock.t += 0.26
        gaps.begin(continuing=10)  # 300 ms: 40 ms of step, 260 ms between
    assert gaps.gaps == 1
    [record] = caplog.records
    assert "300 ms after the one before" in record.message
    assert "that step 40 ms, between them 260 ms; 10 continuing requests" in record.message


def test_an_engine_that_was_idle_is_not_a_gap(caplog):
    clock = Clock()
    gaps = StepGaps(warn_s=0.25, clock=clock)
    with caplog.at_level(logging.WARNING, logger=pauses.__name__):
        gaps.begin(continuing=3)
        gaps.end()
        clock.t += 5.0  # every request finished, then new ones came
        gaps.begin(continuing=0)
    assert gaps.gaps == 0 and not caplog.records


def test_a_long_collector_pass_is_logged_once_per_pass(caplog, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(pauses, "_installed", [])
    monkeypatch.setattr(gc, "callbacks", [])
    pauses.watch_gc(warn_s=0.05, clock=clock)
    pauses.watch_gc(warn_s=0.05, clock=clock)  # installed once
    [on_gc] = gc.callbacks
    with caplog.at_level(logging.WARNING, logger=pauses.__name__):
        on_gc("start", {"generation": 0})
        clock.t += 0.001
        on_gc("stop", {"generation": 0})
        on_gc("start", {"generation": 2})
        clock.t += 0.12
        on_gc("stop", {"generation": 2})
    [record] = caplog.records
    assert "generation 2" in record.message and "120 ms" in record.message


def test_a_shutdown_stops_watching_the_collector_first(monkeypatch):
    """vLLM unfreezes the heap in its engine core's and workers' shutdowns and collects it whole: those
    passes starve no stream, so they are not reported."""
    clock = Clock()
    monkeypatch.setattr(pauses, "_installed", [])
    monkeypatch.setattr(gc, "callbacks", [])
    pauses.watch_gc(warn_s=0.05, clock=clock)
    [on_gc] = gc.callbacks
    calls = []

    class Process:
        def shutdown(self, timeout: float = 1.0) -> str:
            calls.append((len(gc.callbacks), timeout))  # what the original sees
            return "done"

    original = Process.shutdown
    pauses._unwatched_from(Process, "shutdown")
    pauses._unwatched_from(Process, "shutdown")  # wrapped once
    assert Process.shutdown.__wrapped__ is original
    assert Process().shutdown(timeout=2.0) == "done"
    assert calls == [(0, 2.0)]  # unwatched before the original ran
    assert on_gc not in gc.callbacks  # later passes (vLLM's whole-heap collection) go unreported


def test_the_engine_core_and_worker_shutdowns_are_patched():
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.cpu_worker import CPUWorker
    from vllm.v1.worker.gpu_worker import Worker

    pauses.patch_shutdowns()
    assert EngineCore.shutdown._uttera_unwatched and Worker.shutdown._uttera_unwatched
    assert CPUWorker.shutdown is Worker.shutdown  # the CPU build's worker inherits it
