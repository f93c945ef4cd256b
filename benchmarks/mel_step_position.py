"""How far the acoustic model's mel is from its teacher's, by a frame's place in its decode step.

    python -m benchmarks.mel_step_position FEAT_DIR NAME=PRED_DIR [...] --frames NAME=R [...] [--by-phoneme]
        [--out OUT.json]

A decode step emits `frames_per_step` frames from one hidden state. FEAT_DIR holds teacher log-mels
(`training.features`); each PRED_DIR holds one model's teacher-forced mel of the same utterances,
frame-aligned (`training.aligned_mels MODEL FEAT_DIR PRED_DIR`); `--frames NAME=R` gives that model's
frames per step (the aligned mels do not record it). For each model: the mean absolute
log-mel difference over all frames, and by position 0..R-1 within the step (frame t of an utterance
sits at t mod R); and how much the mel moves from frame to frame, by position, for the model and the teacher
(the last position's move crosses into the next step). `--by-phoneme` splits each position by the teacher's phoneme durations (in FEAT_DIR):
frames still voicing the phoneme the step started on (the step's pointer) against frames past a phoneme
change inside the step, which the step's state has to anticipate. Prints one row per model; writes JSON
with the command.
"""

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks import machine
from training.data import read_shard


def by_position(teacher: list[np.ndarray], predicted: list[np.ndarray], r: int) -> tuple[float, list[float]]:
    """Utterances' (T, n_mels) mels -> (mean |pred - teacher| over all frames, the mean at each position 0..r-1)."""
    sums, counts = np.zeros(r), np.zeros(r)
    for t, p in zip(teacher, predicted, strict=True):
        if t.shape != p.shape:
            raise ValueError(f"teacher {t.shape} and predicted {p.shape} mels differ")
        err = np.abs(t.astype(np.float64) - p.astype(np.float64)).mean(1)
        pos = np.arange(len(err)) % r
        sums += np.bincount(pos, weights=err, minlength=r)
        counts += np.bincount(pos, minlength=r)
    return float(sums.sum() / counts.sum()), (sums / np.maximum(counts, 1)).tolist()


def by_position_and_phoneme(
    teacher: list[np.ndarray], predicted: list[np.ndarray], durations: list[np.ndarray], r: int
) -> dict[str, list[float]]:
    """As `by_position`, each position split by phoneme: `same` (the frame voices the phoneme of its step's
    first frame), `changed` (a later phoneme), and `changed_share` (the fraction of frames that are)."""
    sums, counts = np.zeros((2, r)), np.zeros((2, r))
    for t, p, d in zip(teacher, predicted, durations, strict=True):
        frame_phoneme = np.repeat(np.arange(len(d)), d)
        if len(frame_phoneme) != len(t) or t.shape != p.shape:
            raise ValueError(
                f"teacher {t.shape}, predicted {p.shape} and {len(frame_phoneme)} frames of durations differ"
            )
        err = np.abs(t.astype(np.float64) - p.astype(np.float64)).mean(1)
        frame = np.arange(len(err))
        changed = (frame_phoneme != frame_phoneme[frame - frame % r]).astype(np.int64)
        np.add.at(sums, (changed, frame % r), err)
        np.add.at(counts, (changed, frame % r), 1)
    mean = sums / np.maximum(counts, 1)
    return {
        "same": mean[0].tolist(),
        "changed": mean[1].tolist(),
        "changed_share": (counts[1] / np.maximum(counts.sum(0), 1)).tolist(),
    }


def movement_by_position(mels: list[np.ndarray], r: int) -> list[float]:
    """Mean |frame t+1 - frame t| (log-mel, averaged over bins) by t's position 0..r-1 in its step: positions
    0..r-2 move inside a step, position r-1 across into the next step."""
    sums, counts = np.zeros(r), np.zeros(r)
    for m in mels:
        moved = np.abs(np.diff(m.astype(np.float64), axis=0)).mean(1)
        pos = np.arange(len(moved)) % r
        sums += np.bincount(pos, weights=moved, minlength=r)
        counts += np.bincount(pos, minlength=r)
    return (sums / np.maximum(counts, 1)).tolist()


def read_mels(directory: Path, prefix: str) -> list[np.ndarray]:
    """Every utterance's mel of `directory/{prefix}_*.npz` (`mel` + `mel_off`), in shard order."""
    mels = []
    for path in sorted(directory.glob(f"{prefix}_*.npz")):
        with np.load(path) as d:
            mel, off = d["mel"], d["mel_off"]
        mels += [mel[off[u] : off[u + 1]] for u in range(len(off) - 1)]
    if not mels:
        raise SystemExit(f"no {prefix}_*.npz in {directory}")
    return mels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("feat_dir", type=Path)
    parser.add_argument("preds", nargs="+", metavar="NAME=PRED_DIR")
    parser.add_argument("--frames", action="append", default=[], metavar="NAME=R", help="frames per step of NAME")
    parser.add_argument("--by-phoneme", action="store_true", help="split each position by phoneme change")
    parser.add_argument("--out", type=Path, default=Path("mel_step_position.json"))
    a = parser.parse_args()
    frames = {k: int(v) for k, v in (f.split("=", 1) for f in a.frames)}
    utterances = [f for path in sorted(a.feat_dir.glob("feat_*.npz")) for f in read_shard(path)]
    if not utterances:
        raise SystemExit(f"no feat_*.npz in {a.feat_dir}")
    teacher = [f.mel for f in utterances]
    durations = [f.dur for f in utterances]
    rows = {}
    for spec in a.preds:
        name, pred_dir = spec.split("=", 1)
        r = frames.get(name)
        if r is None:
            raise SystemExit(f"--frames {name}=R is needed: aligned_mels does not record the model's frames per step")
        predicted = read_mels(Path(pred_dir), "pred")
        mean, pos = by_position(teacher, predicted, r)
        moved, teacher_moved = movement_by_position(predicted, r), movement_by_position(teacher, r)
        rows[name] = {"frames_per_step": r, "utterances": len(teacher), "l1": mean, "l1_by_position": pos,
                      "movement_by_position": moved, "teacher_movement_by_position": teacher_moved}  # fmt: skip
        print(f"{name:>12} r={r}  all {mean:.3f}  by position " + " ".join(f"{x:.3f}" for x in pos), flush=True)
        for who, m in ((name, moved), ("teacher", teacher_moved)):
            print(f"{'':>12} movement, {who}: inside a step {np.mean(m[:-1]):.3f}, across {m[-1]:.3f}", flush=True)
        if a.by_phoneme:
            split = by_position_and_phoneme(teacher, predicted, durations, r)
            rows[name]["l1_by_position_and_phoneme"] = split
            for key in ("same", "changed", "changed_share"):
                print(f"{'':>12} {key:>13}  " + " ".join(f"{x:.3f}" for x in split[key]), flush=True)
    a.out.write_text(
        json.dumps({"command": machine.command(), "machine": machine.describe(), "models": rows}, indent=1) + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
