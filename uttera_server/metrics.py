"""Prometheus metrics of one app, in its own `CollectorRegistry` (so tests can build several apps).

Engine queue gauges are read from `SpeechSynthesizer.engine_stats()` at scrape time, not pushed.

Several serving processes (`--api-servers N`, frontends.py) share one Prometheus multiprocess directory
(`PROMETHEUS_MULTIPROC_DIR`, set by the supervisor before they start): counters and histograms are
summed over the processes, the stream and connection gauges too, so whichever process answers
`/metrics` reports the whole server. vLLM sends each step's scheduler figures to one serving process
only, so each process publishes what it receives there: the engine gauges (waiting, running, KV usage)
as the most recent value any process received, engine requests finished summed over the processes.
The engine step counters and the CPU counters are the answering process's own.
"""

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import stalls
from .outcome import Outcome

if TYPE_CHECKING:
    from .synthesis.mel_engine import EngineStats

log = logging.getLogger(__name__)

# Seconds: from 5 ms (a warm GPU) to 10 s (a saturated CPU engine).
LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0)
# Seconds an event-loop tick ran late: a busy loop (~1 ms) to a collector pass over an unfrozen heap (~0.4 s).
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LOOP_TICK_S = 0.01
# Synthesis wall time / audio duration: below 1 is faster than real time.
RTF_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class Transport(StrEnum):
    HTTP = "http"
    WEBSOCKET = "websocket"


FINISHED_HELP = "Engine requests ended, by reason: stop, length (a runaway), abort"


class _EngineQueueCollector(Collector):
    """The engine's figures from this process's `EngineStats`, read at scrape time. `shared`: the queue
    gauges and finished counts come from the multiprocess files instead (`_EnginePublisher`)."""

    def __init__(self, engine_stats: Callable[[], "EngineStats"], shared: bool = False):
        self._engine_stats = engine_stats
        self._shared = shared

    def describe(self) -> Iterator[Metric]:
        return iter(() if self._shared else self._families())

    def collect(self) -> Iterator[Metric]:
        queues = None if self._shared else self._families()
        families: tuple[Metric, ...] = () if queues is None else queues
        try:
            stats = self._engine_stats()
            if queues is not None:
                waiting, running, kv = queues
                waiting.add_metric([], stats.num_waiting)
                running.add_metric([], stats.num_running)
                kv.add_metric([], stats.kv_cache_usage)
                finished = CounterMetricFamily("uttera_engine_requests_finished", FINISHED_HELP, labels=["reason"])
                for reason, count in sorted(stats.finished.items()):
                    finished.add_metric([reason], count)
                families = (*families, finished)
            steps = CounterMetricFamily(
                "uttera_engine_steps", "Engine steps that followed a step with running requests", value=stats.busy_steps
            )
            step_s = CounterMetricFamily(
                "uttera_engine_step_seconds",
                "Wall time of those steps, as seen by the server (their mean is the step time under load)",
                value=stats.busy_step_s,
            )
            families = (*families, steps, step_s)
        except Exception:  # engine not started or gone: export the names without samples
            log.debug("engine_stats() failed at scrape time", exc_info=True)
        return iter(families)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("uttera_engine_waiting_requests", "Requests queued in the engine scheduler"),
            GaugeMetricFamily("uttera_engine_running_requests", "Requests the engine is decoding"),
            GaugeMetricFamily("uttera_engine_kv_cache_usage", "Fraction of the engine's KV cache blocks in use"),
        )


class _EnginePublisher:
    """Several serving processes: this process's share of the engine's figures, written to the
    multiprocess files at every report (`EngineStats.on_change`), so any process's /metrics shows the
    whole server's (queue gauges: the most recent report any process received; finished: summed)."""

    def __init__(self, registry: CollectorRegistry):
        self.waiting = Gauge(
            "uttera_engine_waiting_requests",
            "Requests queued in the engine scheduler",
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self.running = Gauge(
            "uttera_engine_running_requests",
            "Requests the engine is decoding",
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self.kv = Gauge(
            "uttera_engine_kv_cache_usage",
            "Fraction of the engine's KV cache blocks in use",
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        self.finished = Counter("uttera_engine_requests_finished", FINISHED_HELP, ["reason"], registry=registry)
        self._published: dict[str, int] = {}
        self._last: tuple[int, int, float] | None = None

    def publish(self, stats: "EngineStats") -> None:
        queues = (stats.num_waiting, stats.num_running, stats.kv_cache_usage)
        if queues != self._last:  # most steps change nothing: skip the writes
            self._last = queues
            self.waiting.set(queues[0])
            self.running.set(queues[1])
            self.kv.set(queues[2])
        for reason, count in stats.finished.items():
            if (delta := count - self._published.get(reason, 0)) > 0:
                self.finished.labels(reason).inc(delta)
                self._published[reason] = count


def _thread_cpu_s(native_id: int) -> float | None:
    """CPU time (user + system) of one thread of this process, from /proc (Linux); None elsewhere."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return None


class _ServerCpuCollector(Collector):
    """CPU seconds of the serving process and of its main thread (the event loop: HTTP and WebSocket
    streams, vLLM's output handler, per-step mel routing). A loop near one CPU-second per second is the
    limit of this process, whatever the GPU could do (benchmarks/RESULTS.md, H200)."""

    def __init__(self) -> None:
        self._main = threading.main_thread().native_id

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "uttera_server_cpu_seconds",
            "CPU time of the serving process (not the engine core)",
            value=time.process_time(),
        )
        loop = _thread_cpu_s(self._main) if self._main is not None else None
        if loop is not None:
            yield CounterMetricFamily(
                "uttera_event_loop_cpu_seconds",
                "CPU time of the serving process's main thread, which runs the event loop",
                value=loop,
            )


class ServerMetrics:
    def __init__(self, engine_stats: Callable[[], "EngineStats"], active_streams: Callable[[], int]):
        """`engine_stats()`: the engine's latest figures (`SpeechSynthesizer.engine_stats`); `active_streams()`
        counts streams in flight (HTTP responses and WebSocket contexts)."""
        self.registry = CollectorRegistry()
        r = self.registry
        # Values in PROMETHEUS_MULTIPROC_DIR's files when it is set (prometheus_client decides at import).
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self._active = active_streams
        self.time_to_first_audio = Histogram(
            "uttera_time_to_first_audio_seconds", "From request (HTTP) or flush (WebSocket) to the first audio",
            ["transport"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.realtime_factor = Histogram(
            "uttera_realtime_factor",
            "Synthesis wall time / audio duration, per completed HTTP request or WebSocket segment",
            buckets=RTF_BUCKETS, registry=r,
        )  # fmt: skip
        self.active_streams = Gauge(
            "uttera_active_streams", "Streams in flight", registry=r, multiprocess_mode="livesum"
        )
        if not self.multiprocess:  # (each process refreshes its own share in `_refresh` instead)
            self.active_streams.set_function(active_streams)
        self.requests = Counter(
            "uttera_requests", "Finished speech requests (a WebSocket context counts as one)",
            ["transport", "status"], registry=r,
        )  # fmt: skip
        self.audio_seconds = Counter("uttera_audio_seconds", "Seconds of audio sent", registry=r)
        self.stream_underruns = Counter(
            "uttera_stream_underruns",
            "WebSocket audio that arrived after the audio sent before it for its context would have finished "
            "playing (wall time from the context's first audio), while its text was already there",
            registry=r,
        )  # fmt: skip
        self.cancellations = Counter(
            "uttera_cancellations", "WebSocket contexts cancelled by the client (barge-in)", registry=r
        )  # fmt: skip
        self.loop_lag = Histogram(
            "uttera_event_loop_lag_seconds",
            f"How late a serving process's event loop ran each {LOOP_TICK_S * 1000:g} ms timer: every stream it "
            "serves waits that long (collector passes, blocking work)",
            buckets=LOOP_LAG_BUCKETS, registry=r,
        )  # fmt: skip
        self.ws_connections = Gauge(
            "uttera_ws_connections", "Open WebSocket connections", registry=r, multiprocess_mode="livesum"
        )
        self._process_collectors = (
            _EngineQueueCollector(engine_stats, shared=self.multiprocess),
            _ServerCpuCollector(),
        )
        if self.multiprocess:
            publisher = _EnginePublisher(r)
            stats = engine_stats()
            stats.on_change = lambda: publisher.publish(stats)
            publisher.publish(stats)
        for collector in self._process_collectors:
            r.register(collector)
        for transport in Transport:  # export every series from the start, at zero
            self.time_to_first_audio.labels(transport)
            for outcome in Outcome:
                self.requests.labels(transport, outcome)

    def _refresh(self) -> None:
        if self.multiprocess:
            self.active_streams.set(self._active())

    def first_audio(self, transport: Transport, seconds: float) -> None:
        self.time_to_first_audio.labels(transport).observe(seconds)
        self._refresh()

    def request_finished(self, transport: Transport, outcome: Outcome, audio_s: float = 0.0) -> None:
        """Count one finished request and the seconds of audio it sent."""
        self.requests.labels(transport, outcome).inc()
        self._refresh()
        if audio_s > 0:
            self.audio_seconds.inc(audio_s)

    def synthesis_completed(self, wall_s: float, audio_s: float) -> None:
        """Realtime factor of one completed synthesis (an HTTP request, a WebSocket segment)."""
        if audio_s > 0:
            self.realtime_factor.observe(wall_s / audio_s)

    async def watch_loop(self, tick_s: float = LOOP_TICK_S) -> None:
        """Observe, until cancelled, how late each `tick_s` timer of the running event loop fires."""
        await stalls.watch_loop(tick_s, lambda due, ran: self.loop_lag.observe(max(0.0, ran - due)))

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the text exposition format."""
        if not self.multiprocess:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        self._refresh()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated; sums every serving process's counters
        for collector in self._process_collectors:
            registry.register(collector)
        return generate_latest(registry), CONTENT_TYPE_LATEST
