"""Side by side: the levels of several load.py result files (e.g. one server flag on and off).

    python -m benchmarks.compare [--png OUT.png] benchmarks/results/sched_cpu_deadline_capped.json x_1.json x_2.json ...

Prints one markdown row per (file, level): TTFA p50/p99, underruns (requests with any, of requests), inter-chunk
gap p99, audio-s/s, engine step time, and the file's server flags; then, per server-args value, the sums over its
files at each level (underruns, requests) and the median of their TTFA p99. Files group by name without
a trailing `_N` (run number), so `x_1.json`, `x_2.json` are two runs of `x`; an experiment file of
benchmarks/results (`merge_results.py`) counts as its runs, each under its own name.
"""

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def plot(groups: dict, png: Path) -> None:
    """TTFA p99 (median of runs) and underruns (sum) against concurrency, one line per group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for (group, _args), levels in groups.items():
        xs = sorted(levels)
        ax1.plot(xs, [statistics.median(r["ttfa_ms_p99"] for r in levels[x]) for x in xs], marker="o", label=group)
        ax2.plot(xs, [sum(r["underruns"] for r in levels[x]) for x in xs], marker="o", label=group)
    ax1.set(xlabel="concurrent streams", ylabel="TTFA p99 ms (median of runs)")
    ax2.set(xlabel="concurrent streams", ylabel="playback underruns (sum of runs)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def runs(paths: list[str]) -> list[tuple[str, dict]]:
    """(run name, load.py result) per run: a file's own, or each of an experiment file's
    (`{"runs": {name: result}}`, benchmarks/merge_results.py)."""
    out = []
    for p in paths:
        d = json.loads(Path(p).read_text())
        out += list(d["runs"].items()) if "runs" in d else [(Path(p).stem, d)]
    return out


def main(argv: list[str]) -> None:
    png = None
    if argv[:1] == ["--png"]:
        png, argv = Path(argv[1]), argv[2:]
    paths = argv
    print(
        "| run | server args | C | requests | TTFA p50 | TTFA p99 | underruns (requests with any) | gap p99 | audio-s/s | step ms | 1-min load at end |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    groups: defaultdict = defaultdict(lambda: defaultdict(list))
    for stem, d in runs(paths):
        for lv in d["levels"]:
            load = lv.get("loadavg_end")
            print(
                f"| {stem} | `{d['server_args']}` | {lv['level']:g} | {lv['requests']} | {lv['ttfa_ms_p50']:.1f} | "
                f"{lv['ttfa_ms_p99']:.1f} | {lv['underruns']} ({lv['underrun_requests']}) | {lv['gap_ms_p99']:.1f} | "
                f"{lv['audio_s_per_s']:.2f} | {lv.get('step_ms_mean') or '-'} | {load[0] if load else '-'} |"
            )
            group = stem.rsplit("_", 1)[0] if stem.rsplit("_", 1)[-1].isdigit() else stem
            groups[(group, d["server_args"])][lv["level"]].append(lv)
    print()
    print(
        "| runs of | server args | C | runs | requests | underruns (requests with any) | TTFA p99, median of runs | audio-s/s, median |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (group, args), levels in groups.items():
        for level, rows in sorted(levels.items()):
            print(
                f"| {group} | `{args}` | {level:g} | {len(rows)} | {sum(r['requests'] for r in rows)} | "
                f"{sum(r['underruns'] for r in rows)} ({sum(r['underrun_requests'] for r in rows)}) | "
                f"{statistics.median(r['ttfa_ms_p99'] for r in rows):.1f} | "
                f"{statistics.median(r['audio_s_per_s'] for r in rows):.2f} |"
            )
    if png:
        plot(groups, png)


if __name__ == "__main__":
    main(sys.argv[1:])
