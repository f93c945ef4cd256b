"""load.py's paced mode (benchmarks/paced.py): the pure parts, then one small level against the real server
(tiny model) over each transport, in one client process and spread over two."""

import pytest
from _server_process import timeout

from benchmarks.paced import level_clients, paced_level, peak_in_flight, start_offsets
from benchmarks.playback import RequestRecord
from benchmarks.stats import summarize
from benchmarks.texts import long_text


def test_long_texts_are_seeded_whole_sentences_of_at_least_the_asked_length():
    assert long_text(7, 600) == long_text(7, 600) != long_text(8, 600)
    t = long_text(7, 600)
    assert len(t) >= 600 and t.endswith((".", "!", "?")) and "  " not in t
    assert start_offsets(4, 2.0) == [0.0, 0.5, 1.0, 1.5] and start_offsets(3, 0.0) == [0.0] * 3
    clients = level_clients(3, 1.5, seed=2, min_chars=100)
    assert [c[:2] for c in clients] == [(0, 0.0), (1, 0.5), (2, 1.0)] and len({c[2] for c in clients}) == 3


def test_peak_in_flight_counts_overlapping_streams():
    def rec(t_send, t_done):
        r = RequestRecord("ws", "paced", 10, t_send)
        r.add(t_send + 0.1, 100)
        r.t_done = t_done
        return r

    assert peak_in_flight([rec(0, 2), rec(1, 3), rec(2, 4), rec(2.5, 5)]) == 3  # an end before a start at 2
    assert peak_in_flight([]) == 0


@pytest.mark.parametrize(("transport", "processes"), [("http", 1), ("ws", 2)])
async def test_a_paced_level_against_the_real_server(server, transport, processes):
    records, wall, info = await paced_level(
        server.url, transport, 2, ramp_s=0.5, seed=3, min_chars=60, timeout_s=timeout(60), processes=processes
    )
    assert len(records) == 2 and all(r.ok for r in records), [r.error for r in records]
    sends = sorted(r.t_send for r in records)
    assert sends[1] - sends[0] < 0.5 + timeout(1)  # the second client starts 0.5 s after the first's start time
    assert info["client_processes"] == processes and 1 <= info["peak_streams"] <= 2
    assert 0 <= info["streams_held"] <= 2 and info["audio_s_per_stream_p50"] > 0
    s = summarize(records, wall)
    assert s["ok"] == 2 and s["ttfa_ms_p99"] < 1000 * wall
