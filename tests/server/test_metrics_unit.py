"""ServerMetrics in its own registry; engine gauges read at scrape time."""

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from uttera_server.metrics import ServerMetrics, Transport
from uttera_server.outcome import Outcome


def samples(m: ServerMetrics) -> dict:
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
    }


def test_engine_gauges_are_read_at_scrape_time():
    stats = SimpleNamespace(num_waiting=3, num_running=5)
    m = ServerMetrics(lambda: stats, lambda: 2)
    s = samples(m)
    assert s[("uttera_engine_waiting_requests", ())] == 3 and s[("uttera_engine_running_requests", ())] == 5
    assert s[("uttera_active_streams", ())] == 2
    stats.num_waiting = 0
    assert samples(m)[("uttera_engine_waiting_requests", ())] == 0


def test_a_failing_engine_does_not_break_the_scrape():
    def broken():
        raise RuntimeError("engine gone")

    body = ServerMetrics(broken, lambda: 0).render()[0].decode()
    assert "# TYPE uttera_engine_waiting_requests gauge" in body


def test_each_app_has_its_own_registry():
    a, b = ServerMetrics(lambda: None, lambda: 0), ServerMetrics(lambda: None, lambda: 0)
    a.request_finished(Transport.HTTP, Outcome.OK, audio_s=2.0)
    a.synthesis_completed(wall_s=1.0, audio_s=2.0)
    key = ("uttera_requests_total", (("status", "ok"), ("transport", "http")))
    assert samples(a)[key] == 1 and samples(b)[key] == 0
    assert samples(a)[("uttera_audio_seconds_total", ())] == 2.0
    assert samples(a)[("uttera_realtime_factor_sum", ())] == 0.5


async def test_event_loop_lag_is_observed_per_tick_and_a_blocked_loop_lands_in_a_high_bucket():
    import asyncio
    import time

    m = ServerMetrics(lambda: None, lambda: 0)
    watch = asyncio.create_task(m.watch_loop(tick_s=0.002))
    await asyncio.sleep(0.05)
    time.sleep(0.12)  # the loop blocked, as by a collector pass
    await asyncio.sleep(0.01)
    watch.cancel()
    s = samples(m)
    count = s[("uttera_event_loop_lag_seconds_count", ())]
    assert count >= 5
    late = count - s[("uttera_event_loop_lag_seconds_bucket", (("le", "0.1"),))]
    assert late >= 1  # the tick the block fell in ran >= 100 ms late
    assert s[("uttera_event_loop_lag_seconds_sum", ())] >= 0.1
