"""Loss curves from the trainers' log.jsonl files -> one PNG.

python -m training.plot ACOUSTIC_LOG VOCODER_LOG OUT.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read(path: str | Path) -> list[dict]:
    p = Path(path)
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("acoustic_log")
    parser.add_argument("vocoder_log")
    parser.add_argument("out")
    a = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ac, vo = read(a.acoustic_log), read(a.vocoder_log)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    train = [r for r in ac if "l1" in r]
    val = [r for r in ac if "val_l1" in r]
    axes[0].plot([r["step"] for r in train], [r["l1"] for r in train], label="train mel L1")
    axes[0].plot([r["step"] for r in val], [r["val_l1"] for r in val], "o-", label="val mel L1")
    axes[0].set_title("acoustic: log-mel L1")
    axes[1].plot([r["step"] for r in train], [r["ce"] for r in train], label="train pointer CE")
    axes[1].plot([r["step"] for r in val], [r["val_ce"] for r in val], "o-", label="val pointer CE")
    axes[1].set_yscale("log")
    axes[1].set_title("acoustic: pointer-move cross-entropy")
    for key in ("mel_l1", "stft", "fm", "adv"):
        pts = [(r["step"], r[key]) for r in vo if key in r]
        if pts:
            axes[2].plot(*zip(*pts), label=key)
    axes[2].set_yscale("log")
    axes[2].set_title("vocoder losses")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=90)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
