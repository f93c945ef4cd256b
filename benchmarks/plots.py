"""PNG plots of a concurrency sweep (matplotlib, headless): TTFA p50/p99, audio-s/s and underruns per
request vs concurrency, one line per transport, the TTFA floor and budget as horizontal lines.

    python -m benchmarks.plots RESULT.json     # redraw RESULT.png from a load.py result file
"""

import textwrap
from pathlib import Path


def plot_sweep(
    levels: list[dict], path: Path, title: str, floor_ms: float | None = None, budget_ms: float | None = None
) -> Path | None:
    """Write `path` (PNG); returns it, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for transport in sorted({lv["transport"] for lv in levels}):
        rows = sorted((lv for lv in levels if lv["transport"] == transport), key=lambda lv: lv["level"])
        x = [lv["level"] for lv in rows]
        axes[0].plot(x, [lv["ttfa_ms_p50"] for lv in rows], "o-", label=f"{transport} p50")
        axes[0].plot(x, [lv["ttfa_ms_p99"] for lv in rows], "s--", label=f"{transport} p99")
        axes[1].plot(x, [lv["audio_s_per_s"] for lv in rows], "o-", label=transport)
        axes[2].plot(x, [lv["underruns"] / max(lv["ok"], 1) for lv in rows], "o-", label=f"{transport} per request")
        axes[2].plot(
            x,
            [lv["underrun_requests"] / max(lv["ok"], 1) for lv in rows],
            "s--",
            label=f"{transport} share of requests with any",
        )
    if floor_ms:
        axes[0].axhline(floor_ms, color="gray", lw=1, label=f"floor {floor_ms:.0f} ms")
    if budget_ms:
        axes[0].axhline(budget_ms, color="red", lw=1, ls=":", label=f"budget {budget_ms:.0f} ms")
    xlabel = "arrival rate (req/s)" if levels and levels[0]["mode"] == "open" else "concurrency"
    for ax, ylabel in zip(axes, ("TTFA (ms)", "audio seconds / second", "playback underruns / request")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_yscale("log")
    axes[2].set_ylim(bottom=0)
    fig.suptitle("\n".join(textwrap.wrap(title, 180)), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=64)
    plt.close(fig)
    return path


def main() -> None:
    import json
    import sys

    for name in sys.argv[1:]:
        r = json.loads(Path(name).read_text())
        title = f"{r['command']}\n{r['cpu']} x{r['cores']}, {r['date']}"
        floor = r["floor"]["floor_ms"] if r.get("floor") else None
        print(plot_sweep(r["levels"], Path(name).with_suffix(".png"), title, floor, r.get("ttfa_budget_ms")))


if __name__ == "__main__":
    main()
