"""Host time a serving process spends per row per step in vLLM's per-output stats, with vLLM's environment
read live (before) or cached (now).

    python -m benchmarks.envs_cache [--rows 64,256,1024] [--steps 200] [--rounds 3] \\
        [--out benchmarks/results/envs_cache.json]

Every engine step, a serving process's `OutputProcessor` updates vLLM's `IterationStats` from each running
row's output (`IterationStats.update_from_output`), and that reads `envs.VLLM_COMPUTE_NANS_IN_LOGITS` once
per row: through `os.environ` unless vLLM's environment cache is on (`vllm.envs.enable_envs_cache`). vLLM
turns the cache on in its engine core and workers, not in the process that serves the API; uttera's
serving processes turn it on once the engine is up (app.py). Timed here in one process, the two variants
alternated within each round (`disable_envs_cache` between them): the stats update of `rows` decode
outputs, one step at a time, median over steps, then over rounds. Prints a table; writes JSON.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("live", "cached")


def measure(rows: int, steps: int) -> float:
    """Median seconds of one step's stats update over `rows` decode outputs, as the current cache is."""
    from vllm.v1.engine import EngineCoreOutput
    from vllm.v1.metrics.stats import IterationStats, LoRARequestStates, RequestStateStats

    now = time.time()
    outputs = [EngineCoreOutput(request_id=f"r{i}", new_token_ids=[5]) for i in range(rows)]
    states = [RequestStateStats(arrival_time=now) for _ in range(rows)]
    lora = LoRARequestStates(log_stats=True)
    times = []
    for _ in range(steps):
        stats = IterationStats()
        t0 = time.perf_counter()
        for out, state in zip(outputs, states, strict=True):
            stats.update_from_output(out, now, False, state, lora, None)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=lambda s: [int(x) for x in s.split(",")], default=[64, 256, 1024])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "envs_cache.json")
    a = p.parse_args()
    from vllm import envs

    per_round: dict[int, dict[str, list[float]]] = {r: {v: [] for v in VARIANTS} for r in a.rows}
    for k in range(a.rounds):
        for rows in a.rows:
            for variant in VARIANTS if k % 2 == 0 else VARIANTS[::-1]:
                if variant == "cached":
                    envs.enable_envs_cache()
                else:
                    envs.disable_envs_cache()
                per_round[rows][variant].append(measure(rows, a.steps))
    envs.disable_envs_cache()
    results = []
    print(
        f"{'rows':>6} {'live µs/step':>13} {'cached µs/step':>15} {'live µs/row':>12} {'cached µs/row':>14} {'ratio':>6}"
    )
    for rows in a.rows:
        live = statistics.median(per_round[rows]["live"]) * 1e6
        cached = statistics.median(per_round[rows]["cached"]) * 1e6
        results.append(
            {
                "rows": rows,
                "live_us_per_step": round(live, 1),
                "cached_us_per_step": round(cached, 1),
                "live_us_per_row": round(live / rows, 3),
                "cached_us_per_row": round(cached / rows, 3),
                "live_over_cached": round(live / cached, 2),
                "rounds_us_per_step": {v: [round(x * 1e6, 1) for x in xs] for v, xs in per_round[rows].items()},
            }
        )
        print(
            f"{rows:>6} {live:>13.1f} {cached:>15.1f} {live / rows:>12.3f} {cached / rows:>14.3f} {live / cached:>6.2f}"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "command": machine.command(),
                "machine": machine.describe(),
                "steps": a.steps,
                "rounds": a.rounds,
                "results": results,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
