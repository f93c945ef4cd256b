"""How much a busy event loop slows the vocoder thread's passes through the GIL (a "convoy").

    python -m benchmarks.gil_convoy [--streams 16] [--frames 32] [--passes 40] [--device cpu|cuda]
                                    [--out benchmarks/results/gil_convoy.json]

PyTorch releases the GIL around every op. When another thread of the same process is busy with Python
(in the server: the event loop running vLLM's output handler, the per-step mel routing and the HTTP
streams), the vocoder thread waits for the GIL after each op, up to `sys.getswitchinterval()` (5 ms by
default). A pass made of many small ops (kernel launches on CUDA) then takes many switch intervals.

Measured here: wall time of one `StreamingVocoder.step` (B utterances x F frames, the server's vocoder
thread doing it) with the main thread (1) idle, (2) busy in pure-Python work, at the default switch
interval and at 0.5 ms and 0.1 ms; on CUDA, op by op and as CUDA-graph replays (`--graphs off,on`).
On CPU the network is shrunk (`--tiny`, default on CPU) so that a pass is, like a CUDA pass, mostly op
dispatch rather than arithmetic.
"""

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import machine
from vocoder.config import VocoderConfig
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder

ROOT = Path(__file__).resolve().parent.parent


def time_passes(sv: StreamingVocoder, utterances: int, frames: int, passes: int, n_mels: int) -> list[float]:
    rng = np.random.default_rng(0)
    block = (rng.standard_normal((frames, n_mels)) * 2 - 5).astype(np.float32)
    out = []
    for p in range(passes + 3):
        ids = [(p, s) for s in range(utterances)]
        for uid in ids:
            sv.open(uid)
        t0 = time.perf_counter()
        sv.step({uid: block for uid in ids}, finish=ids)
        if p >= 3:
            out.append(1000 * (time.perf_counter() - t0))
    return out


def run_case(sv, a, n_mels: int, busy: bool, interval: float | None) -> dict:
    default = sys.getswitchinterval()
    if interval is not None:
        sys.setswitchinterval(interval)
    result: dict = {}

    def worker():
        torch.set_num_threads(1)
        result["ms"] = time_passes(sv, a.streams, a.frames, a.passes, n_mels)

    t = threading.Thread(target=worker)
    t.start()
    if busy:
        # The main thread stays busy in pure Python, like the server's event loop under load: it never
        # blocks, so it gives the GIL up only when the interpreter forces a switch.
        while t.is_alive():
            for _ in range(20000):
                pass
    t.join()
    sys.setswitchinterval(default)
    ms = result["ms"]
    return {
        "main_thread": "busy" if busy else "idle",
        "switch_interval_ms": 1000 * (interval if interval is not None else default),
        "graphs": sv.cuda_graphs,
        "pass_ms_p50": round(statistics.median(ms), 3),
        "pass_ms_p90": round(float(np.percentile(ms, 90)), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--frames", type=int, default=32)
    p.add_argument("--passes", type=int, default=40)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", type=Path, default=None, help="a model dir whose vocoder to use (default: tiny)")
    p.add_argument("--graphs", default=None, help="off, on or off,on: CUDA graphs (default: off,on on cuda)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gil_convoy.json")
    a = p.parse_args()
    graph_modes = (a.graphs or ("off,on" if a.device == "cuda" else "off")).split(",")
    if a.model is not None:
        model = Vocoder.from_dir(a.model / "vocoder")
    else:
        model = Vocoder.random(VocoderConfig(dim=32, intermediate_dim=64, num_layers=8), seed=0)
    n_mels = model.config.n_mels
    rows = []
    for mode in graph_modes:
        sv = StreamingVocoder(
            model,
            chunk_frames=a.frames,
            first_chunk_frames=a.frames,
            device=a.device,
            cuda_graphs=mode == "on",
            initial_capacity=a.streams + 1,
        )
        rows += [
            run_case(sv, a, n_mels, False, None),
            run_case(sv, a, n_mels, True, None),
            run_case(sv, a, n_mels, True, 0.0005),
            run_case(sv, a, n_mels, True, 0.0001),
        ]
    idle = {r["graphs"]: r["pass_ms_p50"] for r in reversed(rows) if r["main_thread"] == "idle"}
    print(
        f"vocoder pass, {a.streams} utterances x {a.frames} frames on {a.device} "
        f"({'model ' + str(a.model) if a.model else 'tiny network'}):"
    )
    print(f"{'graphs':6} {'main thread':12} {'switch ms':>9} {'p50 ms':>8} {'p90 ms':>8} {'p50 / idle':>10}")
    for r in rows:
        r["p50_over_idle"] = round(r["pass_ms_p50"] / idle[r["graphs"]], 2)
        print(
            f"{'on' if r['graphs'] else 'off':6} {r['main_thread']:12} {r['switch_interval_ms']:9.2f} "
            f"{r['pass_ms_p50']:8.2f} {r['pass_ms_p90']:8.2f} {r['p50_over_idle']:10.2f}"
        )
    a.out.write_text(
        json.dumps(
            {**machine.describe(), "streams": a.streams, "frames": a.frames, "device": a.device, "rows": rows}, indent=1
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
