"""load.py's closed loop spread over client processes, against the real server: every worker runs in one
of the processes, and the records come back whole."""

from types import SimpleNamespace

import pytest

from benchmarks.load import closed_loop_processes
from benchmarks.stats import summarize


async def test_workers_spread_over_two_client_processes(server):
    a = SimpleNamespace(client_processes=2, duration=1.0, mix=None, request_timeout=60.0, voices=("default",))
    records, wall, info = await closed_loop_processes(server.url, "http", 3, a, seed=5)
    assert info["client_processes"] == 2 and info["client_cpu_pct"] > 0
    assert info["audio_s_per_s_steady"] > 0  # the workers were streaming in the window's second half
    assert len(records) >= 3  # each of the 3 workers sent at least one request
    assert {r.voice for r in records} == {"default"}
    assert all(r.ok for r in records), [r.error for r in records]
    assert all(r.ttfa_s is not None and r.ttfa_s < wall for r in records)
    assert summarize(records, wall)["requests"] == len(records)


async def test_sessions_deal_voices_round_robin():
    from benchmarks.clients import session_factory

    open_session = session_factory("http", "http://127.0.0.1:1", None, 1.0, ("joe", "heart"))
    voices = []
    for i in range(5):
        async with open_session(i) as session:
            voices.append(session.voice)
    assert voices == ["joe", "heart", "joe", "heart", "joe"]


async def test_the_load_clients_request_records_the_servers_error_code_and_a_whole_stream(server):
    from benchmarks.clients import http_request, load_client

    async with load_client(server.url, 30) as client:
        bad = await http_request(client, "Hello.", "short", 30, voice="nobody")
        good = await http_request(client, "Hello there.", "short", 30)
    assert bad.error == "http_400_unknown_voice" and not bad.arrivals
    assert good.ok and good.sample_rate == 22050 and good.audio_s > 0.3
    assert good.arrivals == sorted(good.arrivals) and good.ttfa_s is not None


async def test_warm_up_requests_go_through_and_a_failed_one_stops_the_run(server):
    from benchmarks.load import warm_up

    a = SimpleNamespace(seed=0, mix=None, request_timeout=30.0, voices=("default",))
    for transport in ("http", "ws"):
        await warm_up(server.url, transport, 2, a)
    with pytest.raises(SystemExit, match="warm-up request 1 of 1 \\(http\\) failed: http_400_unknown_voice"):
        await warm_up(server.url, "http", 1, SimpleNamespace(**{**vars(a), "voices": ("nobody",)}))
