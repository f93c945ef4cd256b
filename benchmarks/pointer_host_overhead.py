"""Host time of the pointer logits processor per engine step, per row.

    python -m benchmarks.pointer_host_overhead [--rows 256,1024] [--steps 200] [--rounds 3] \\
        [--out benchmarks/results/pointer_host_overhead.json]

`PointerLogitsProcessor.apply` runs on the engine's step loop every step, for every running row. Two ways
of keeping each row's pointer state are timed, alternated within each round:
- `per_row`: one Python object per row, advanced by a loop over the rows and its tokens, the state then
  gathered into arrays (how the processor did it until 2026-12-04; kept here as the baseline);
- `arrays`: `PointerTracks`, the state in arrays indexed by the batch row, two list reads per row and
  array arithmetic (now).
Both then run the same bound arithmetic (`PointerLogitsProcessor.bounds`: the host work before the
processor's one copy to the device and its handful of kernels, a cost per step, not per row). Each row gains
one token per step (a legal pointer walk); median over steps.
"""

import argparse
import json
import statistics
import time
import types
from pathlib import Path

import numpy as np
import torch

from benchmarks import machine
from uttera_server.model.pointer_logits import PointerLogitsProcessor

ROOT = Path(__file__).resolve().parent.parent
OFFSET, STOP = 256, 768


class PerRowTracks:
    """The baseline: one object per row, advanced in a Python loop (the processor before PointerTracks)."""

    class Track:
        __slots__ = ("n_phonemes", "outputs", "seen", "last", "dwell")

        def __init__(self, n_phonemes: int, outputs: list[int]):
            self.n_phonemes, self.outputs, self.seen, self.last, self.dwell = n_phonemes, outputs, 0, -1, 0

    def __init__(self) -> None:
        self.tracks: dict[int, PerRowTracks.Track] = {}

    def add(self, index: int, n_phonemes: int, outputs: list[int]) -> None:
        self.tracks[index] = self.Track(n_phonemes, outputs)

    def advance(self, n_rows: int, max_dwell: int):
        state = []
        for index, t in self.tracks.items():
            if index < n_rows:
                for token in t.outputs[t.seen :]:
                    if token == t.last:
                        t.dwell = min(t.dwell + 1, max_dwell)
                    else:
                        t.last, t.dwell = token, 1
                t.seen = len(t.outputs)
                state.append((index, t.n_phonemes, t.last, t.dwell))
        return tuple(np.array(state, dtype=np.int64).T) if state else None


def processor(mode: str) -> PointerLogitsProcessor:
    config = types.SimpleNamespace(pointer_offset=OFFSET, stop_token_id=STOP, max_advance=3, max_steps_per_phoneme=18)
    vllm_config = types.SimpleNamespace(model_config=types.SimpleNamespace(hf_config=config))
    proc = PointerLogitsProcessor(vllm_config, torch.device("cpu"), False)  # type: ignore[arg-type]
    if mode == "per_row":
        proc.tracks = PerRowTracks()  # type: ignore[assignment]
    return proc


def measure(mode: str, rows: int, steps: int, seed: int) -> float:
    """Median seconds of one step's `bounds` over `rows` rows."""
    rng = np.random.default_rng(seed)
    proc = processor(mode)
    outputs: list[list[int]] = [[] for _ in range(rows)]
    for i in range(rows):
        proc.tracks.add(i, 512, outputs[i])
    moves = rng.integers(0, 2, size=(steps, rows))
    times = []
    for step in range(steps):
        for out, move in zip(outputs, moves[step].tolist()):
            out.append(out[-1] + move if out else OFFSET)
        t0 = time.perf_counter()
        proc.bounds(rows)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="256,1024")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pointer_host_overhead.json")
    a = p.parse_args()
    levels = [int(r) for r in a.rows.split(",")]
    modes = ("per_row", "arrays")
    results: dict[tuple[str, int], list[float]] = {(m, r): [] for m in modes for r in levels}
    for round_ in range(a.rounds):
        for r in levels:
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
                results[(mode, r)].append(measure(mode, r, a.steps, a.seed + round_))
    table = []
    print(f"{'rows':>6} {'per-row us/row':>15} {'arrays us/row':>14} {'ratio':>6}")
    for r in levels:
        before = 1e6 * statistics.median(results[("per_row", r)]) / r
        now = 1e6 * statistics.median(results[("arrays", r)]) / r
        table.append({"rows": r, "per_row_us_per_row": round(before, 2), "arrays_us_per_row": round(now, 2)})
        print(f"{r:>6} {before:>15.2f} {now:>14.2f} {before / now:>6.1f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps({"command": machine.command(), "steps": a.steps, "rounds": a.rounds, "levels": table}, indent=2)
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
