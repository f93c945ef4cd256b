"""The pure parts of benchmarks/: playback underruns, the seeded text mix, the Poisson schedule, and the
no-vLLM baseline's greedy KV-cache loop against the independent reference forward."""

import asyncio
import json
import random
import time

import numpy as np
import pytest
import torch

from benchmarks.client_stalls import LoopStalls, overlapping, summary
from benchmarks.loop import poisson_schedule
from benchmarks.playback import RequestRecord, playback
from benchmarks.stats import pct, steady_audio_rate, summarize
from benchmarks.texts import KINDS, TextMix


def record(chunks, rate=1000):
    """chunks: [(arrival s, samples)], sent at t=0."""
    rec = RequestRecord("http", "short", 10, 0.0, sample_rate=rate)
    for t, n in chunks:
        rec.add(t, n)
    rec.t_done = chunks[-1][0]
    return rec


def test_no_underrun_when_each_chunk_arrives_before_the_audio_runs_out():
    # 100 ms of audio at 0.1 s, next at 0.2 s (exactly when it runs out), then 0.35 s (< 0.4 s).
    p = playback(record([(0.1, 100), (0.2, 200), (0.35, 100)]))
    assert (p.underruns, p.stall_s, p.prebuffer_s) == (0, 0.0, 0.0)


def test_underruns_count_late_chunks_and_playback_resumes_at_arrival():
    # Audio runs out at 0.15; the chunk at 0.25 is late by 0.1; it plays to 0.30; the next at 0.31 is late.
    p = playback(record([(0.1, 50), (0.25, 50), (0.31, 10)]))
    assert p.underruns == 2
    assert abs(p.stall_s - 0.11) < 1e-9
    assert abs(p.prebuffer_s - 0.11) < 1e-9  # the last chunk: 0.31 - 0.1 - 0.1 s of audio before it
    assert p.underrun_at_s == (0.05, 0.1)  # after 50 and 100 samples of audio
    assert [tuple(round(x, 9) for x in s) for s in p.starved] == [(0.15, 0.25), (0.30, 0.31)]


def test_underruns_overlapping_a_client_stall_are_counted_as_possibly_the_clients():
    starved = [(0.15, 0.25), (0.30, 0.31), (1.0, 1.2)]
    # A stall inside the first starvation, one ending just as the third began: only the first overlaps.
    assert overlapping(starved, [(0.2, 0.24), (0.5, 1.0)]) == 1
    assert overlapping(starved, []) == 0
    assert overlapping(starved, [(0.0, 2.0)]) == 3


async def test_the_loop_stall_monitor_sees_a_blocked_loop_and_not_an_idle_one():
    with LoopStalls(period_s=0.002, min_stall_s=0.03) as stalls:
        watch = asyncio.create_task(stalls.watch())
        await asyncio.sleep(0.05)  # idle: no stall
        assert stalls.stalls == []
        time.sleep(0.08)  # the loop blocked
        await asyncio.sleep(0.01)
        watch.cancel()
    assert len(stalls.stalls) == 1
    start, end = stalls.stalls[0]
    assert 0.06 <= end - start <= 0.2
    assert summary([stalls.as_dict()])["client_loop_stalls_50ms"] == 1


def test_the_summary_says_where_in_the_stream_underruns_fell():
    # One underrun after 1.0 s of audio, one after 2.5 s, one after 0.2 s (another stream).
    late = record([(0.1, 1000), (1.5, 1500), (5.0, 10)])
    early = record([(0.1, 200), (0.5, 100)])
    s = summarize([late, early], duration_s=5.0)
    assert s["underruns"] == 3
    assert s["underrun_at_audio_s"] == {"min": 0.2, "p50": 1.0, "max": 2.5}
    assert s["underruns_first_s"] == 1
    assert summarize([record([(0.1, 100), (0.15, 100)])], 1.0)["underrun_at_audio_s"] is None


def test_summary_figures():
    recs = [record([(0.05, 1000), (0.5, 1000)]), record([(0.2, 500), (2.0, 500)])]
    bad = RequestRecord("http", "long", 5, 0.0)
    bad.error = "http_503_service_unavailable"
    s = summarize([*recs, bad], duration_s=3.0)
    assert s["requests"] == 3 and s["ok"] == 2 and s["errors"] == {"http_503_service_unavailable": 1}
    assert s["ttfa_ms_p50"] == 125.0 and s["underruns"] == 1 and s["underrun_requests"] == 1
    assert s["audio_s"] == 3.0 and s["audio_s_per_s"] == 1.0
    assert pct([1, 2, 3, 4], 50) == 2.5 and pct([], 50) is None


def test_the_steady_rate_counts_only_audio_that_arrived_in_the_windows_second_half():
    # window [0, 4): the burst at 0.5 s and the drain at 4.5 s fall outside [2, 4)
    recs = [record([(0.5, 4000), (2.5, 1000)]), record([(3.9, 3000), (4.5, 9000)])]
    assert steady_audio_rate(recs, 0.0, 4.0) == 2.0  # 4 s of audio over 2 s
    assert steady_audio_rate(recs, 1.0, 1.0) == 0.0


def test_text_mix_is_seeded_and_kinds_have_the_promised_lengths():
    a, b = TextMix(3), TextMix(3)
    assert [a.draw() for _ in range(50)] == [b.draw() for _ in range(50)]
    assert all(3 <= len(t.split()) <= 8 for t in KINDS["short"])
    assert all(t.count(". ") + 1 >= 3 for t in KINDS["long"])
    assert poisson_schedule(2.0, 10.0, 1) == poisson_schedule(2.0, 10.0, 1)


def test_torch_tts_matches_the_reference_forward(tiny_model_dir):
    from benchmarks.torch_tts import TorchTTS
    from tests.engine.reference import ReferenceModel

    tts = TorchTTS(tiny_model_dir, dtype=torch.float32, max_len=512)
    rng = random.Random(0)
    ids = [1] + [rng.randrange(3, 200) for _ in range(20)] + [2]
    mel = tts.generate(ids)
    pointers = tts.last_pointers
    assert pointers[0] == 0 and pointers[-1] == len(ids) - 1
    assert all(0 <= b - a <= tts.max_advance for a, b in zip(pointers, pointers[1:]))
    tokens = ids + [tts.offset + p for p in pointers]
    want = ReferenceModel(tiny_model_dir).mel(tokens)[len(ids) :].reshape(-1, mel.shape[1])
    torch.testing.assert_close(mel, want, atol=1e-4, rtol=1e-4)


def test_merge_results_folds_runs_into_one_file_and_refuses_records(tmp_path):
    import pytest

    from benchmarks.merge_results import merge

    for name, value in (("a_on_1", 1), ("a_off_2", 2)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"levels": [value]}))
    out = tmp_path / "a.json"
    merge(out, [tmp_path / "a_on_1.json"])
    merged = merge(out, [tmp_path / "a_off_2.json"])  # a later round joins the file
    assert merged == {"runs": {"a_on_1": {"levels": [1]}, "a_off_2": {"levels": [2]}}}
    assert json.loads(out.read_text()) == merged
    (tmp_path / "a.records.json").write_text("[]")
    with pytest.raises(SystemExit, match="per-request records"):
        merge(out, [tmp_path / "a.records.json"])


def test_engine_summary_says_how_the_server_ended_the_runs_requests():
    from benchmarks.server import engine_summary, parse_metrics

    before = parse_metrics('uttera_requests_total{status="ok",transport="http"} 10\n')
    after = parse_metrics(
        'uttera_requests_total{status="ok",transport="http"} 25\n'
        'uttera_requests_total{status="error",transport="http"} 1\n'
        'uttera_requests_total{status="cancelled",transport="http"} 0\n'
    )
    assert engine_summary(before, after, [], 1.0)["server_requests"] == {
        '{status="error",transport="http"}': 1,
        '{status="ok",transport="http"}': 15,
    }


def test_the_servers_ttfa_over_a_run_comes_from_its_histograms_change():
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from benchmarks.server import parse_metrics, server_ttfa
    from uttera_server.metrics import LATENCY_BUCKETS

    registry = CollectorRegistry()
    ttfa = Histogram(
        "uttera_time_to_first_audio_seconds", "", ["transport"], buckets=LATENCY_BUCKETS, registry=registry
    )
    ttfa.labels("http").observe(9.0)  # before the run: not counted
    before = parse_metrics(generate_latest(registry).decode())
    for seconds in (0.012, 0.03, 0.03, 0.04):
        ttfa.labels("http").observe(seconds)
    ttfa.labels("websocket").observe(0.4)
    after = parse_metrics(generate_latest(registry).decode())
    assert server_ttfa(before, after) == {
        "server_ttfa_ms_mean": 102.4,
        "server_ttfa_ms_p50_bucket": 35.0,
        "server_ttfa_ms_p99_bucket": 500.0,
    }
    assert server_ttfa(after, after) == {}


def test_a_connection_lost_after_audio_arrived_is_told_apart():
    from benchmarks.clients import _exc_code

    rec = RequestRecord("http", "short", 10, 0.0)
    assert _exc_code(ConnectionError(), rec) == "exc_ConnectionError"
    rec.add(0.1, 100)
    assert _exc_code(ConnectionError(), rec) == "exc_ConnectionError_mid_stream"


def test_mel_spreads_see_a_smoothed_copy_as_having_less_frame_to_frame_detail():
    from benchmarks.mel_variance import spreads

    rng = np.random.default_rng(0)
    sharp = [rng.normal(-4.0, 1.0, (200, 80)) for _ in range(3)]
    kernel = np.ones(5) / 5
    smooth = [np.apply_along_axis(lambda c: np.convolve(c, kernel, mode="same"), 0, m) for m in sharp]
    silence = [np.full((50, 80), -11.5)]  # no speech frames: left out
    a, b = spreads(sharp + silence), spreads(smooth)
    assert a["clips"] == 3 and b["clips"] == 3
    assert (a["delta"] / b["delta"]).mean() > 3  # smoothing removed most frame-to-frame change
    assert 1.5 < (a["level"] / b["level"]).mean() < 3


def test_underruns_are_matched_with_the_server_pauses_logged_during_the_level():
    from benchmarks.paced import server_pause_figures

    wall = time.time() - time.perf_counter()
    t0 = time.perf_counter() - 10.0
    rec = record([(t0 + 0.1, 100), (t0 + 0.6, 100)])  # 0.1 s of audio, then 0.4 s of starvation
    rec.t_send = t0
    pause_end = t0 + 0.5 + wall  # a 300 ms pass ending inside the starvation
    log = "\n".join(
        [
            f"WARNING engine_patches.pauses: garbage collection of generation 2 paused process 7 for 300 ms (t={pause_end:.3f})",
            f"WARNING engine_patches.pauses: engine step came 2900 ms after the one before (...; 1 continuing requests, t={t0 - 60 + wall:.3f})",
            "INFO something else",
        ]
    )
    f = server_pause_figures([rec], log)
    assert f["server_collector_pauses"] == 1 and f["server_step_gaps"] == 0  # the step gap was before the level
    assert f["underruns_overlapping_server_pause"] == 1
    assert f["server_pause_ms_max"] == 300.0


def test_the_client_cost_benchmark_measures_both_clients_against_its_server(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "cost.json"
    args = ["--streams", "4", "--duration", "1", "--rounds", "1", "--chunks", "5", "--gap-ms", "10", "--out", str(out)]
    subprocess.run(
        [sys.executable, "-m", "benchmarks.client_cost", *args], check=True, timeout=120, capture_output=True
    )
    rows = json.loads(out.read_text())["rows"]
    assert {r["client"] for r in rows} == {"httpx", "aiohttp"}
    for r in rows:  # chunks of 2,048 bytes (a read may join several)
        assert r["errors"] == 0 and r["requests"] >= 4 and r["chunks"] >= r["requests"]
        assert r["cpu_us_per_chunk"] > 0 and r["bytes_per_chunk"] > 0


def test_mel_step_position_splits_the_error_by_place_in_the_step():
    from benchmarks.mel_step_position import by_position

    teacher = [np.zeros((10, 2)), np.zeros((3, 2))]
    # error = the frame's place in its 4-frame step (0, 1, 2, 3, 0, ...), the same in both bins
    predicted = [np.repeat((np.arange(len(t)) % 4)[:, None], 2, axis=1).astype(np.float32) for t in teacher]
    mean, pos = by_position(teacher, predicted, 4)
    assert pos == [0.0, 1.0, 2.0, 3.0]
    assert mean == (sum(i % 4 for i in range(10)) + 0 + 1 + 2) / 13
    with pytest.raises(ValueError, match="differ"):
        by_position([np.zeros((4, 2))], [np.zeros((5, 2))], 4)


def test_mel_step_position_movement_inside_and_across_steps():
    from benchmarks.mel_step_position import movement_by_position

    # a staircase: flat inside each 4-frame step, a jump of 1 into the next: all movement crosses a seam
    stairs = np.repeat(np.arange(5, dtype=np.float32), 4)[:, None] * np.ones((1, 3), np.float32)
    assert movement_by_position([stairs], 4) == [0.0, 0.0, 0.0, 1.0]
    # a ramp moves alike everywhere; two utterances are pooled by position
    ramp = 0.5 * np.arange(9, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    assert movement_by_position([ramp, ramp[:6]], 4) == [0.5, 0.5, 0.5, 0.5]


def test_mel_step_position_splits_each_place_by_phoneme_change():
    from benchmarks.mel_step_position import by_position_and_phoneme

    # 8 frames, 2 steps of 4; phonemes of 3, 2 and 3 frames: 0 0 0 1 | 1 2 2 2
    teacher = [np.zeros((8, 1))]
    predicted = [np.arange(8, dtype=np.float32)[:, None]]  # error = the frame's index
    split = by_position_and_phoneme(teacher, predicted, [np.array([3, 2, 3])], 4)
    # step 0: frames 0-2 voice its first phoneme, frame 3 the next; step 1 starts on phoneme 1 (frame 4),
    # and frames 5-7 voice phoneme 2
    assert split["same"] == [2.0, 1.0, 2.0, 0.0]  # position 0: frames 0 and 4; 1: frame 1; 2: frame 2
    assert split["changed"] == [0.0, 5.0, 6.0, 5.0]  # position 3: frames 3 and 7
    assert split["changed_share"] == [0.0, 0.5, 0.5, 1.0]
    with pytest.raises(ValueError, match="differ"):
        by_position_and_phoneme(teacher, predicted, [np.array([3, 2])], 4)


def test_mel_head_probe_heads_start_as_the_models_and_learn():
    import torch

    from benchmarks.mel_head_probe import Rows, judge, new_head, predict, train
    from training.model import AcousticConfig, UtteraTTS

    torch.manual_seed(0)
    c = AcousticConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       head_dim=16, intermediate_size=64, max_phonemes=64, n_mels=8, frames_per_step=4)  # fmt: skip
    model = UtteraTTS(c)
    n = 12  # two utterances of 6 steps: 24 and 22 frames
    rows = Rows(
        hidden=torch.randn(n, 32),
        next_embedding=torch.randn(n, 32),
        next_hidden=torch.randn(n, 32),
        target=torch.randn(n, 4, 8),
        counts=[6, 6],
        frames=[np.zeros((24, 8), np.float32), np.zeros((22, 8), np.float32)],
        durations=[np.array([10, 14]), np.array([22])],
    )
    plain, nxt, shift = new_head(model, False), new_head(model, True), new_head(model, True)
    as_is = predict(plain, rows, "plain")
    assert torch.equal(as_is, model.mel_head(rows.hidden).detach())
    # what a head gets beside the hidden state goes through a projection that starts at zero
    assert torch.equal(as_is, predict(nxt, rows, "next")) and torch.equal(as_is, predict(shift, rows, "shift"))
    # `late` reads the next step's state in place of the step's own
    assert torch.equal(predict(plain, rows, "late"), model.mel_head(rows.next_hidden).detach())
    losses = train(nxt, rows, "next", epochs=30, seed=0, lr=3e-3)
    assert losses[-1] < losses[0] and nxt.next_proj.weight.abs().sum() > 0
    train(shift, rows, "shift", epochs=30, seed=0, lr=3e-3)
    assert not torch.equal(shift.next_proj.weight, nxt.next_proj.weight)  # each learns from its own input
    res = judge(predict(nxt, rows, "next"), rows, 4)
    assert len(res["l1_by_position"]) == 4 and res["by_phoneme"]["changed_share"][0] == 0.0
    assert res["movement"] == predict(nxt, rows, "next").diff(dim=1).abs().mean().item()


def test_mel_head_probe_movement_loss_restores_the_targets_movement():
    """On noisy targets an L1 head draws their mean and moves little inside a step; the `movement` head is
    also held to the targets' amount of frame-to-frame change, and reaches it."""
    import torch

    from benchmarks.mel_head_probe import Rows, new_head, predict, train
    from training.model import AcousticConfig, UtteraTTS

    torch.manual_seed(0)
    c = AcousticConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       head_dim=16, intermediate_size=64, max_phonemes=64, n_mels=8, frames_per_step=4)  # fmt: skip
    n = 512
    hidden = torch.randn(n, 32)
    target = (hidden[:, :8].unsqueeze(1) + torch.randn(n, 4, 8)).detach()  # predictable level, noisy frames
    rows = Rows(hidden, hidden, hidden, target, [n], [np.zeros((4 * n, 8), np.float32)], [np.array([4 * n])])
    moved = {}
    for variant in ("plain", "movement"):
        head = new_head(UtteraTTS(c), False)
        train(head, rows, variant, epochs=60, seed=0, lr=3e-3)
        moved[variant] = predict(head, rows, variant).diff(dim=1).abs().mean().item()
    teacher = target.diff(dim=1).abs().mean().item()
    assert moved["plain"] < 0.5 * teacher
    assert abs(moved["movement"] - teacher) < 0.15 * teacher


def test_mel_head_probe_adv_head_judges_windows_of_one_utterance(monkeypatch):
    """The `adv` head's discriminator sees windows of ADV_WINDOW / r consecutive rows of one utterance (never
    across two, never from one too short), and the head is trained by L1 plus what MelGan returns."""
    import torch

    from benchmarks import mel_head_probe
    from benchmarks.mel_head_probe import Rows, new_head, train
    from training.model import AcousticConfig, UtteraTTS
    from training.train_acoustic import MelGan

    torch.manual_seed(0)
    c = AcousticConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       head_dim=16, intermediate_size=64, max_phonemes=64, n_mels=8, frames_per_step=4)  # fmt: skip
    counts = [20, 3, 18]
    n = sum(counts)
    target = torch.zeros(n, 4, 8)
    target[:, :, 0] = torch.cat([torch.full((k,), float(u)) for u, k in enumerate(counts)]).unsqueeze(1)
    target[:, :, 1] = torch.arange(n, dtype=torch.float32).unsqueeze(1)  # the row's index
    rows = Rows(torch.randn(n, 32), torch.zeros(n, 32), torch.zeros(n, 32), target, counts, [], [])
    seen = []
    real_call = MelGan.__call__

    def spy(self, fake, real, l1, step, metrics):
        seen.append(real.clone())
        assert fake.shape == real.shape == (len(real), 32, 8)  # 8 rows = 32 frames
        return real_call(self, fake, real, l1, step, metrics)

    monkeypatch.setattr(MelGan, "__call__", spy)
    monkeypatch.setattr(mel_head_probe, "ADV_WINDOW", 32)
    head = new_head(UtteraTTS(c), False)
    start = head.fc2.weight.detach().clone()
    train(head, rows, "adv", epochs=3, seed=0, lr=3e-3, batch=16)
    assert seen and not torch.equal(head.fc2.weight, start)
    for windows in seen:
        for w in windows:
            utterance, index = w[:, 0], w[:, 1]  # per frame
            assert torch.equal(utterance, utterance[0].expand(32)) and utterance[0] != 1  # one, never the short one
            assert torch.equal(index, index[0] + torch.arange(8.0).repeat_interleave(4))  # consecutive rows


def test_envs_cache_times_the_stats_update_both_ways(monkeypatch):
    """The update the benchmark times reads vLLM's environment on every row: live, a change is seen at once;
    cached, the value of when the cache was made stays."""
    import time

    from vllm import envs
    from vllm.v1.engine import EngineCoreOutput
    from vllm.v1.metrics.stats import IterationStats, LoRARequestStates, RequestStateStats

    from benchmarks.envs_cache import measure

    def corrupted() -> bool:
        state = RequestStateStats(arrival_time=time.time())
        out = EngineCoreOutput(request_id="r", new_token_ids=[5], num_nans_in_logits=1)
        IterationStats().update_from_output(out, time.time(), False, state, LoRARequestStates(True), None)
        return state.is_corrupted

    monkeypatch.delenv("VLLM_COMPUTE_NANS_IN_LOGITS", raising=False)
    envs.disable_envs_cache()
    assert not corrupted()
    monkeypatch.setenv("VLLM_COMPUTE_NANS_IN_LOGITS", "1")
    assert corrupted()  # read live
    live = measure(rows=16, steps=5)
    monkeypatch.delenv("VLLM_COMPUTE_NANS_IN_LOGITS")
    envs.enable_envs_cache()  # conftest.py's `live_vllm_environment` turns it off after the test
    monkeypatch.setenv("VLLM_COMPUTE_NANS_IN_LOGITS", "1")
    assert not corrupted()  # cached while it was unset
    cached = measure(rows=16, steps=5)
    assert live > 0 and cached > 0
