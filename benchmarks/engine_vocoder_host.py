"""Host time of the in-engine vocoder per engine step, per row: per-utterance objects against slot arrays.

    python -m benchmarks.engine_vocoder_host [--rows 256,1024] [--steps 64] [--rounds 3] \\
        [--out benchmarks/results/engine_vocoder_host.json]

Everything the engine's worker does for the vocoder in one step, on one thread: find each row's utterance,
queue the step's frames, decide who is ready (the chunk schedule and the urgency rule), run the pass,
and turn its PCM into the PCM channel's messages (one per serving process; in the engine the publisher
thread does this, taking the GIL from the step loop). Two ways, alternated within each round:
- `objects`: `StreamingVocoder(step_rows=)` with a dict of rows, an `Utterance` object per request, and
  per-utterance loops for urgency, first-chunk times and the publisher's messages (the in-engine vocoder
  until 2026-12-05, kept here as the baseline);
- `arrays`: `StepVocoder` (vocoder/step_vocoder.py) through `EngineVocoder`'s per-slot arrays, as now.
Every running row voices 4 frames a step; utterances start staggered over 8 steps, so in the steady state
about an eighth of them are vocoded each step (32-frame chunks). The vocoder network is shrunk to one
8-wide block, and by default (`--null-pass`) the network's pass itself is replaced by zeros of its output
shape in both: on the GPU that compute is queued, not waited for, and here it would bury the host work
being compared. What stays: the gathers, index copies and int16 conversion, done on this CPU (queued device
work on a GPU). Median ms per step over `--steps` steady-state steps.
"""

import argparse
import json
import statistics
import time
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import cast

import numpy as np
import torch

from benchmarks import machine
from engine_patches.pcm_wire import encode, encode_parts
from vocoder.config import VocoderConfig
from vocoder.model import Vocoder
from vocoder.step_vocoder import StepVocoder
from vocoder.streaming import StreamingVocoder

ROOT = Path(__file__).resolve().parent.parent
K, SINKS, HOP, LAG, SAMPLE_S, URGENT_S = 4, 4, 256, 896, 1 / 22050, 0.25


def null_pass(vocoder: Vocoder, pool: object, mel: torch.Tensor, *meta: torch.Tensor) -> torch.Tensor:
    """`vocode_pass`'s output shape, without the network."""
    c = vocoder.config
    return torch.zeros(mel.shape[0], mel.shape[-1] * c.hop_length + c.n_fft - c.hop_length)


def tiny() -> Vocoder:
    return Vocoder.random(VocoderConfig(dim=8, intermediate_dim=16, num_layers=1), seed=0)


def step_rows(step: int, rows: int) -> np.ndarray:
    """Rows voicing at `step`: row i from step i % 8 on."""
    return np.flatnonzero(np.arange(rows) % 8 <= step)


def run_objects(rows: int, steps: int, warm: int) -> list[float]:
    sv = StreamingVocoder(tiny(), chunk_frames=32, first_chunk_frames=8, initial_capacity=rows + 1, int16_pcm=True)
    req_ids = [f"req-{i}" for i in range(rows)]
    routes = {r: (i % SINKS, r) for i, r in enumerate(req_ids)}
    for r in req_ids:
        sv.open(r)
    started: dict[str, float] = {}
    times = []
    for step in range(warm + steps):
        mel = torch.randn(rows, K, 80)
        now = time.monotonic()
        t0 = time.perf_counter()
        live = set(step_rows(step, rows).tolist())
        rows_of: dict[str, int] = {r: i for i, r in enumerate(req_ids) if i in live}  # the runner's loop over its rows
        eager = set()
        for r in rows_of:
            t = started.get(r)
            if t is not None and (sv.vocoded_frames(r) * HOP - LAG) * SAMPLE_S - (now - t) < URGENT_S:
                eager.add(r)
        result = sv.submit({}, step_rows=(mel, cast(Mapping[Hashable, int], rows_of)), eager=eager)
        for r in rows_of:
            if r not in started and sv.vocoded_frames(r):
                started[r] = now
        meta = [(r, routes[r], False) for r in rows_of]
        pcm = result.wait()
        by_sink: dict[int, list] = {}
        for r, (sink, key), final in meta:
            audio = pcm.get(r)
            if audio is not None and audio.size:
                by_sink.setdefault(sink, []).append((key, audio, final))
        for entries in by_sink.values():
            encode(entries)
        if step >= warm:
            times.append(time.perf_counter() - t0)
    return times


def run_arrays(rows: int, steps: int, warm: int) -> list[float]:
    sv = StepVocoder(tiny(), chunk_frames=32, first_chunk_frames=8, capacity=rows)
    req_ids = [f"req-{i}" for i in range(rows)]
    slot_of = {r: sv.open() for r in req_ids}
    keys, sinks = np.empty(sv.capacity, object), np.zeros(sv.capacity, np.int64)  # per slot, as EngineVocoder's
    for i, r in enumerate(req_ids):
        keys[slot_of[r]], sinks[slot_of[r]] = r, i % SINKS
    started = np.full(sv.capacity, np.nan)
    times = []
    for step in range(warm + steps):
        mel = torch.randn(rows, K, 80)
        now = time.monotonic()
        t0 = time.perf_counter()
        get = slot_of.get
        slots = np.fromiter((get(r, -1) for r in req_ids), np.int64, len(req_ids))  # EngineVocoder.slots
        live = step_rows(step, rows)
        with np.errstate(invalid="ignore"):
            eager = (sv.consumed * HOP - LAG) * SAMPLE_S - (now - started) < URGENT_S
        result = sv.submit(mel, slots[live], live, eager=eager)
        started[np.isnan(started) & sv.is_open & (sv.consumed > 0)] = now
        entry_keys, entry_sinks = keys[result.slots], sinks[result.slots]
        result.wait()
        counts = result.hi - result.lo
        for sink in np.unique(entry_sinks).tolist():
            sel = np.flatnonzero(entry_sinks == sink)
            header = list(zip(entry_keys[sel].tolist(), counts[sel].tolist(), result.final[sel].tolist()))
            encode_parts(header, result.body(sel))
        if step >= warm:
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="256,1024")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--warm", type=int, default=40, help="steps before measuring (chunks reach 32 frames)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "engine_vocoder_host.json")
    p.add_argument("--no-null-pass", dest="null_pass", action="store_false", help="run the (tiny) network's passes")
    a = p.parse_args()
    if a.null_pass:  # both vocoders call the module-level vocode_pass they imported
        import vocoder.step_vocoder
        import vocoder.streaming

        setattr(vocoder.streaming, "vocode_pass", null_pass)
        setattr(vocoder.step_vocoder, "vocode_pass", null_pass)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    levels = [int(r) for r in a.rows.split(",")]
    runs = {"objects": run_objects, "arrays": run_arrays}
    results: dict[tuple[str, int], list[float]] = {(m, r): [] for m in runs for r in levels}
    for round_ in range(a.rounds):
        for r in levels:
            for mode in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
                results[(mode, r)].append(statistics.median(runs[mode](r, a.steps, a.warm)))
    table = []
    print(
        f"{'rows':>6} {'objects ms/step':>16} {'arrays ms/step':>15} {'objects us/row':>15} {'arrays us/row':>14} {'ratio':>6}"
    )
    for r in levels:
        o, w = (1e3 * statistics.median(results[(m, r)]) for m in runs)
        table.append(
            {
                "rows": r,
                "objects_ms_per_step": round(o, 3),
                "arrays_ms_per_step": round(w, 3),
                "objects_us_per_row": round(1e3 * o / r, 2),
                "arrays_us_per_row": round(1e3 * w / r, 2),
                "ratio": round(o / w, 2),
            }
        )
        print(f"{r:>6} {o:>16.2f} {w:>15.2f} {1e3 * o / r:>15.2f} {1e3 * w / r:>14.2f} {o / w:>6.1f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "command": machine.command(),
        "null_pass": a.null_pass,
        "steps": a.steps,
        "warm": a.warm,
        "rounds": a.rounds,
        "levels": table,
    }
    a.out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
