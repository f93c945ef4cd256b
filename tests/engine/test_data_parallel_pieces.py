"""Pieces for several engine cores (`--data-parallel-size N`): GPU sharing beyond the host's GPU count
(engine_patches/shared_gpu.py) and the server's figures summed over engine cores (EngineStats)."""

import pytest

from engine_patches.shared_gpu import rank_on_host
from uttera_server.synthesis.mel_engine import EngineStats


def test_ranks_beyond_the_host_share_gpu_groups_round_robin():
    assert [rank_on_host(r, 1) for r in range(4)] == [0, 0, 0, 0]  # 4 engine cores, 1 GPU
    assert [rank_on_host(r, 2) for r in range(5)] == [0, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="no room"):
        rank_on_host(1, 0)  # TP larger than the host


def test_engine_figures_are_summed_over_engine_cores():
    stats = EngineStats()
    stats.record_scheduler(0, running=10, waiting=2, kv_usage=0.5, now=1.0)
    stats.record_scheduler(1, running=6, waiting=0, kv_usage=0.1, now=1.001)
    assert (stats.num_running, stats.num_waiting) == (16, 2)
    assert stats.kv_cache_usage == pytest.approx(0.3)
    stats.record_scheduler(0, running=9, waiting=1, kv_usage=0.4, now=1.010)  # engine 0's next step
    assert (stats.num_running, stats.num_waiting) == (15, 1)
    # a busy step is timed against the same engine's previous report, not the other engine's
    assert stats.busy_steps == 1 and stats.busy_step_s == pytest.approx(0.010)
    stats.record_scheduler(1, running=0, waiting=0, kv_usage=0.0, now=1.020)
    stats.record_scheduler(1, running=0, waiting=0, kv_usage=0.0, now=1.030)  # idle: not a busy step
    assert stats.busy_steps == 2 and stats.steps == 5
