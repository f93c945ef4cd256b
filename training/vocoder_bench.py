"""Vocoder speed: real-time factor (compute seconds / audio seconds) offline and streaming.

    python -m training.vocoder_bench [--threads 1] [--seconds 10] [--device cpu] [--json out.json]

Seeded random weights at the default config (speed does not depend on the values). Prints one
table; with --json also writes the rows. RTF < 1 is faster than real time; for N utterances at once the audio
seconds are summed over utterances, so "x realtime" is the total throughput.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from vocoder.config import VocoderConfig
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_offline(model: Vocoder, utterances: int, frames: int, device: torch.device, repeats: int) -> float:
    mel = torch.randn(utterances, model.config.n_mels, frames, device=device) - 5.0
    with torch.inference_mode():
        model(mel)  # warm-up
        _sync(device)
        start = time.perf_counter()
        for _ in range(repeats):
            model(mel)
        _sync(device)
    return (time.perf_counter() - start) / repeats


def bench_streaming(
    model: Vocoder, utterances: int, frames: int, device: torch.device, chunk: int, per_step: int
) -> float:
    rng = np.random.default_rng(0)
    mel = (rng.standard_normal((utterances, frames, model.config.n_mels)) - 5.0).astype(np.float32)
    with StreamingVocoder(model, chunk_frames=chunk, first_chunk_frames=4, device=device) as sv:
        sv.open("warm-up")
        sv.step({"warm-up": mel[0, :chunk]}, finish=["warm-up"])
        for u in range(utterances):
            sv.open(u)
        _sync(device)
        start = time.perf_counter()
        for t in range(0, frames, per_step):
            last = t + per_step >= frames
            sv.step({u: mel[u, t : t + per_step] for u in range(utterances)}, finish=range(utterances) if last else ())
        _sync(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seconds", type=float, default=10.0, help="audio seconds per utterance")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8], help="utterances vocoded at once")
    parser.add_argument("--chunk", type=int, default=16, help="streaming chunk, frames")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    config = VocoderConfig()
    model = Vocoder.random(config, seed=0).to(device)
    frames = int(args.seconds * config.sample_rate / config.hop_length)
    audio_s = frames * config.hop_length / config.sample_rate
    rows = []
    for utterances in args.streams:
        offline = bench_offline(model, utterances, frames, device, repeats=2)
        streaming = bench_streaming(model, utterances, frames, device, args.chunk, per_step=4)
        for mode, secs in (("offline", offline), (f"stream chunk={args.chunk}", streaming)):
            rtf = secs / (audio_s * utterances)
            rows.append(
                {
                    "mode": mode,
                    "streams": utterances,  # JSON keys kept: utterances vocoded at once
                    "audio_s_per_stream": round(audio_s, 2),
                    "compute_s": round(secs, 4),
                    "rtf": round(rtf, 5),
                    "x_realtime": round(1 / rtf, 1),
                }
            )
    print(
        f"vocoder {model.num_params() / 1e6:.2f} M params, device={device}, "
        f"threads={args.threads}, torch {torch.__version__}"
    )
    print(f"{'mode':<18}{'streams':>8}{'audio s':>9}{'compute s':>11}{'RTF':>9}{'x realtime':>12}")
    for r in rows:
        print(
            f"{r['mode']:<18}{r['streams']:>8}{r['audio_s_per_stream']:>9}{r['compute_s']:>11}"
            f"{r['rtf']:>9}{r['x_realtime']:>12}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"device": str(device), "threads": args.threads, "params": model.num_params(), "rows": rows},
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
