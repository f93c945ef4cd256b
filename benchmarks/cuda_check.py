"""The CUDA vocoder path on its own (no vLLM needed): correctness against the CPU, then cost per pass.

    python -m benchmarks.cuda_check [--model voices/default] [--out cuda_check.json]

1. `StreamingVocoder(device="cuda")` on the model's vocoder, 24 utterances of ragged lengths pushed in
   4-frame steps from a producer CUDA stream (as the LM would), against the offline CPU vocoder: SNR
   per utterance (TF32 off, so only float32 rounding differs).
   Again with the passes as CUDA-graph replays (`cuda_graphs=True`, as served by default).
2. `VocoderWorker` on that vocoder (its thread, its own CUDA stream, deadline ordering): 24 utterances
   fed from the event loop, each utterance's PCM against the offline CPU vocoder; then the same with
   `driver="loop"` (the event loop issues the passes), and with CUDA graphs.
3. One batched forward of B utterances x 32 frames (steady-state chunk) and x 8 frames (first chunk), TF32
   as the server runs it, op by op and as a graph replay: median ms per pass over 20 timed passes
   (CUDA events on the vocoder's CUDA stream, and host wall time submit -> wait), and audio-seconds vocoded
   per second of GPU time.
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from uttera_server.synthesis.vocoder_worker import VocoderWorker
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder

ROOT = Path(__file__).resolve().parent.parent


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    reference = reference.astype(np.float64)
    noise = float(np.sum((reference - test) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(reference**2) / noise))


def mels(n: int, seed: int, n_mels: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i: (rng.standard_normal((int(rng.integers(3, 200)), n_mels)) * 2 - 5).astype(np.float32) for i in range(n)}


def offline(cpu: Vocoder, mel: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return cpu(torch.from_numpy(np.ascontiguousarray(mel.T[None])))[0].numpy()


def check_streaming(model_dir: Path, cpu: Vocoder, data: dict, graphs: bool = False) -> dict:
    sv = StreamingVocoder(
        Vocoder.from_dir(model_dir / "vocoder"),
        chunk_frames=32,
        first_chunk_frames=8,
        device="cuda",
        cuda_graphs=graphs,
    )
    producer = torch.cuda.Stream()
    outs: dict = {uid: [] for uid in data}
    for uid in data:
        sv.open(uid)
    for t in range(0, max(len(m) for m in data.values()), 4):
        with torch.cuda.stream(producer):
            batch = {uid: torch.from_numpy(m[t : t + 4]).cuda() * 1.0 for uid, m in data.items() if t < len(m)}
            ready = torch.cuda.Event()
            ready.record(producer)
        done = [uid for uid, m in data.items() if t < len(m) <= t + 4]
        for uid, pcm in sv.submit(batch, finish=done, after=ready).wait().items():
            outs[uid].append(pcm)
    snrs = []
    for uid, mel in data.items():
        got, ref = np.concatenate(outs[uid]), offline(cpu, mel)
        assert got.shape == ref.shape, (uid, got.shape, ref.shape)
        snrs.append(snr_db(ref, got))
    return {
        "streams": len(data),
        "snr_db_min": min(snrs),
        "snr_db_median": statistics.median(snrs),
        "graph_passes": sv.graph_passes,
        "eager_passes": sv.eager_passes,
    }


async def check_worker(model_dir: Path, cpu: Vocoder, data: dict, driver: str = "thread", graphs: bool = False) -> dict:
    sv = StreamingVocoder(
        Vocoder.from_dir(model_dir / "vocoder"),
        chunk_frames=32,
        first_chunk_frames=8,
        device="cuda",
        cuda_graphs=graphs,
        initial_capacity=64,
    )
    if graphs:
        sv.capture_graphs(32)
    worker = VocoderWorker(sv, deadline_first=True, driver=driver)

    async def one(uid, mel):
        queue = worker.open(uid, deadline=time.monotonic() + 0.01 * uid)
        for t in range(0, len(mel), 4):
            worker.push(uid, mel[t : t + 4])
            await asyncio.sleep(0.002)
        worker.finish(uid)
        parts = []
        while (item := await asyncio.wait_for(queue.get(), 30)) is not None:
            assert not isinstance(item, BaseException), item
            parts.append(item)
        got, ref = np.concatenate(parts), offline(cpu, mel)
        assert got.shape == ref.shape, (uid, got.shape, ref.shape)
        return snr_db(ref, got)

    try:
        snrs = await asyncio.gather(*(one(uid, mel) for uid, mel in data.items()))
    finally:
        worker.close()
    return {
        "streams": len(data),
        "snr_db_min": min(snrs),
        "passes": worker.batches,
        "mean_streams_per_pass": worker.batched_utterances / max(worker.batches, 1),
        "split_passes": worker.split_passes,
        "graph_passes": sv.graph_passes,
    }


def time_passes(model_dir: Path, sizes: list[int], frames: int, graphs: bool = False) -> list[dict]:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    model = Vocoder.from_dir(model_dir / "vocoder")
    hop, n_mels = model.config.hop_length, model.config.n_mels
    rows = []
    for b in sizes:
        sv = StreamingVocoder(
            model,
            chunk_frames=frames,
            first_chunk_frames=frames,
            device="cuda",
            cuda_graphs=graphs,
            initial_capacity=b + 1,
        )
        ids = list(range(b))
        for uid in ids:
            sv.open(uid)
        block = torch.randn(frames, n_mels, device="cuda") * 2 - 5
        for _ in range(3):
            sv.submit({uid: block for uid in ids}).wait()
        host_block = block.cpu().numpy()  # as served: frames arrive from the engine process on the host
        times, walls = [], []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record(sv._cuda_stream)
            result = sv.submit({uid: host_block for uid in ids})
            end.record(sv._cuda_stream)
            result.wait()
            walls.append(1000 * (time.perf_counter() - t0))
            end.synchronize()
            times.append(start.elapsed_time(end))
        ms, wall = statistics.median(times), statistics.median(walls)
        audio_s = b * frames * hop / model.config.sample_rate
        rows.append(
            {
                "streams": b,
                "frames": frames,
                "graphs": graphs,
                "ms_per_pass": round(ms, 3),
                "wall_ms_per_pass": round(wall, 3),
                "audio_s_per_gpu_s": round(audio_s / (ms / 1e3), 1),
            }
        )
        print(
            f"  vocoder pass  B={b:4d} x {frames:2d} frames, graphs {'on ' if graphs else 'off'}: {ms:7.3f} ms "
            f"on the CUDA stream, {wall:7.3f} ms wall ({rows[-1]['audio_s_per_gpu_s']:.0f} audio-s per GPU-s)",
            flush=True,
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_check.py needs a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    cpu = Vocoder.from_dir(a.model / "vocoder")
    data = mels(24, 0, cpu.config.n_mels)
    result: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    result["streaming"] = check_streaming(a.model, cpu, data)
    print("streaming vocoder on cuda vs offline cpu:", result["streaming"], flush=True)
    result["worker"] = asyncio.run(check_worker(a.model, cpu, data))
    print("vocoder worker on cuda vs offline cpu:", result["worker"], flush=True)
    result["worker_loop"] = asyncio.run(check_worker(a.model, cpu, data, driver="loop"))
    print("vocoder worker (loop driver) on cuda vs offline cpu:", result["worker_loop"], flush=True)
    result["streaming_graphs"] = check_streaming(a.model, cpu, data, graphs=True)
    print("streaming vocoder on cuda, CUDA graphs, vs offline cpu:", result["streaming_graphs"], flush=True)
    result["worker_graphs"] = asyncio.run(check_worker(a.model, cpu, data, graphs=True))
    print("vocoder worker on cuda, CUDA graphs, vs offline cpu:", result["worker_graphs"], flush=True)
    result["passes"] = []
    for graphs in (False, True):
        result["passes"] += time_passes(a.model, [1, 16, 64, 256, 512], 32, graphs)
        result["passes"] += time_passes(a.model, [1, 64, 512], 8, graphs)
    checks = ("streaming", "worker", "worker_loop", "streaming_graphs", "worker_graphs")
    ok = min(result[k]["snr_db_min"] for k in checks) > 60 and result["streaming_graphs"]["graph_passes"] > 0
    result["ok"] = ok
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
