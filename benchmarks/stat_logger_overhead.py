"""Host time a serving process spends in vLLM's stat loggers per engine step, per running row.

    python -m benchmarks.stat_logger_overhead [--rows 64,256,1024] [--steps 200] [--rounds 3] \\
        [--model voices/default] [--out benchmarks/results/stat_logger_overhead.json]

Every engine step's outputs reach a serving process with vLLM's `IterationStats` (one inter-token latency
per running row, a first-token time per new request, one record per finished request) and the
scheduler's `SchedulerStats`, and its `StatLoggerManager.record` hands them to every stat logger. Timed,
alternated within each round, with the loggers of this server's own engine configuration
(`MelEngine.engine_args`):
- `vllm_prometheus`: our recorder plus the `PrometheusStatLogger` vLLM adds to every AsyncLLM by default
  (before 2026-12-06);
- `ours`: our recorder plus the stand-in that records nothing (`mel_engine._no_vllm_prometheus`, now).
Each in both Prometheus value modes, which prometheus_client fixes at import: `single` (one serving
process) and `multi` (`--api-servers N`: `PROMETHEUS_MULTIPROC_DIR` set, every value an mmap'd file),
so each (mode, loggers) pair runs in its own child process. The synthetic stream: every request lasts
`--steps-per-request` steps, so rows/that many requests finish and start each step. Median over steps.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("vllm_prometheus", "ours")
MODES = ("single", "multi")


def measure(variant: str, rows: int, steps: int, steps_per_request: int, model: Path, seed: int) -> float:
    """Median seconds of one step's `StatLoggerManager.record` at `rows` running rows (in this process)."""
    from vllm.v1.engine import FinishReason
    from vllm.v1.metrics.loggers import StatLoggerFactory, StatLoggerManager
    from vllm.v1.metrics.stats import FinishedRequestStats, IterationStats, SchedulerStats

    from uttera_server.config import EngineConfig
    from uttera_server.model_dir import VoiceModelConfig
    from uttera_server.synthesis import mel_engine

    engine = mel_engine.MelEngine(VoiceModelConfig.load(model), EngineConfig())
    vllm_config = engine.engine_args().create_engine_config()
    loggers: list[StatLoggerFactory] = [mel_engine._stat_logger_factory(engine.stats)]
    if variant == "ours":
        loggers.append(mel_engine._no_vllm_prometheus())
    manager = StatLoggerManager(vllm_config, custom_stat_loggers=loggers, enable_default_loggers=False)
    rng = np.random.default_rng(seed)
    turnover = max(1, rows // steps_per_request)
    times = []
    for _ in range(steps):
        scheduler = SchedulerStats(num_running_reqs=rows, kv_cache_usage=0.5)
        iteration = IterationStats()
        iteration.num_generation_tokens = rows
        iteration.inter_token_latencies_iter = rng.uniform(0.005, 0.05, rows).tolist()
        iteration.time_to_first_tokens_iter = rng.uniform(0.01, 0.1, turnover).tolist()
        iteration.max_num_generation_tokens_iter = [steps_per_request] * turnover
        iteration.n_params_iter = [1] * turnover
        iteration.finished_requests = [
            FinishedRequestStats(
                FinishReason.STOP,
                e2e_latency=1.0,
                num_prompt_tokens=40,
                num_generation_tokens=steps_per_request,
                decode_time=0.9,
            )  # fmt: skip
            for _ in range(turnover)
        ]
        t0 = time.perf_counter()
        manager.record(scheduler, iteration, engine_idx=0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _child(a: argparse.Namespace) -> None:
    seconds = measure(a.child, a.child_rows, a.steps, a.steps_per_request, a.model, a.seed)
    print(json.dumps({"seconds": seconds}))


def _run_child(a: argparse.Namespace, mode: str, variant: str, rows: int, seed: int) -> float:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as multiproc_dir:
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        if mode == "multi":
            env["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
        command = [sys.executable, "-m", "benchmarks.stat_logger_overhead", "--child", variant]
        command += ["--child-rows", str(rows), "--steps", str(a.steps), "--seed", str(seed), "--model", str(a.model)]
        command += ["--steps-per-request", str(a.steps_per_request)]
        out = subprocess.run(command, env=env, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="64,256,1024")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--steps-per-request", type=int, default=100, help="a request's length in engine steps")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stat_logger_overhead.json")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--child-rows", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return _child(a)
    levels = [int(r) for r in a.rows.split(",")]
    results: dict[tuple[str, str, int], list[float]] = {}
    for round_ in range(a.rounds):
        for mode in MODES:
            for rows in levels:
                for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
                    seconds = _run_child(a, mode, variant, rows, a.seed + round_)
                    results.setdefault((mode, variant, rows), []).append(seconds)
    table = []
    print(f"{'mode':>6} {'rows':>6} {'vLLM Prometheus us/step':>24} {'ours us/step':>13} {'us/row saved':>13}")
    for mode in MODES:
        for rows in levels:
            before = 1e6 * statistics.median(results[(mode, "vllm_prometheus", rows)])
            now = 1e6 * statistics.median(results[(mode, "ours", rows)])
            table.append({"mode": mode, "rows": rows, "vllm_prometheus_us_per_step": round(before, 1),
                          "ours_us_per_step": round(now, 1)})  # fmt: skip
            print(f"{mode:>6} {rows:>6} {before:>24.1f} {now:>13.1f} {(before - now) / rows:>13.2f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"command": machine.command(), "steps": a.steps, "steps_per_request": a.steps_per_request,
               "rounds": a.rounds, "levels": table}  # fmt: skip
    a.out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
