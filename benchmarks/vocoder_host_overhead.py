"""Host time the in-engine vocoder's bookkeeping adds to one engine step, per row: queuing each row's mel.

    python -m benchmarks.vocoder_host_overhead [--rows 256,1024] [--steps 64] [--rounds 3] \\
        [--out benchmarks/results/vocoder_host_overhead.json]

The engine's worker hands the StreamingVocoder one `(frames_per_step, n_mels)` chunk per running row per
step, on the step's hot path. Two ways are timed, alternated within each round:
- `views`: one tensor view per row (`submit({uid: mel[i]})`, how the worker did it first);
- `rows`: the step tensor once with each utterance's row index (`submit(step_rows=(mel, rows))`).
Frames live on the `meta` device, so the CUDA code path's bookkeeping runs (frames kept as tensors)
without any device work, and no vocoder pass runs (the first chunk is never reached): this measures the
Python host work alone, the part that adds to vLLM's own ~30 us per row per step. Median over steps.

Then the publisher's side (`--publish-samples` per utterance, the PCM of one pass over `rows` utterances,
already on the host): from the pass's host buffer to the PCM channel's messages (one per serving process,
`pcm_wire.encode`), with float32 PCM (a copy per utterance in `StepResult.wait`, then `to_int16`, how the
in-engine vocoder did it until 2026-12-04) against int16 PCM made on the vocoder's device (views of the one
buffer, `StreamingVocoder(int16_pcm=True)`). The publisher is a thread of the engine's worker, so this time
is taken from the GIL the step loop needs.
"""

import argparse
import json
import statistics
import time
from collections.abc import Hashable
from pathlib import Path

import torch

from benchmarks import machine
from vocoder.config import VocoderConfig
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder

ROOT = Path(__file__).resolve().parent.parent


def measure(mode: str, rows: int, steps: int, frames_per_step: int = 4) -> float:
    """Median seconds per step of queuing `rows` rows."""
    vocoder = Vocoder.random(VocoderConfig(), seed=0)
    sv = StreamingVocoder(
        vocoder, device="cpu", first_chunk_frames=10**9, chunk_frames=10**9, initial_capacity=rows + 1
    )
    sv.device = torch.device("meta")  # the device path: frames stay tensors, nothing is computed
    ids = [f"r{i}" for i in range(rows)]
    for uid in ids:
        sv.open(uid)
    n_mels = vocoder.config.n_mels
    times = []
    for step in range(steps):
        mel = torch.empty((rows, frames_per_step, n_mels), device="meta")
        t0 = time.perf_counter()
        if mode == "views":
            sv.submit({uid: mel[i] for i, uid in enumerate(ids)})
        else:
            sv.submit({}, step_rows=(mel, {uid: i for i, uid in enumerate(ids)}))
        times.append(time.perf_counter() - t0)
        if step % 8 == 7:  # a pass would take the queued frames every 8 steps (32-frame chunks)
            for uid in ids:
                st = sv._utterances[uid]
                st.pending, st.pending_frames = [], 0
    return statistics.median(times)


def publish(mode: str, rows: int, samples: int, passes: int, sinks: int = 4) -> float:
    """Median seconds to turn one pass's PCM (on the host) into the PCM channel's messages."""
    from engine_patches.pcm_wire import encode
    from uttera_server.audio.pcm import to_int16
    from vocoder.step_result import StepResult

    ids: list[Hashable] = [f"r{i}" for i in range(rows)]
    spans: dict[Hashable, tuple[int, int, int]] = {uid: (i, 0, samples) for i, uid in enumerate(ids)}
    wave = torch.randn(rows, samples) * 0.3
    if mode == "int16":
        wave = (wave.clamp(-1.0, 1.0) * 32767.0).to(torch.int16)
    times = []
    for _ in range(passes):
        result = StepResult(ids, wave.clone(), spans, int16=mode == "int16")
        t0 = time.perf_counter()
        pcm = result.wait()
        by_sink: dict[int, list] = {}
        for i, uid in enumerate(ids):
            audio = pcm[uid]
            by_sink.setdefault(i % sinks, []).append((uid, audio if mode == "int16" else to_int16(audio), False))
        for entries in by_sink.values():
            encode(entries)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="256,1024")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--publish-samples", type=int, default=2048, help="PCM samples per utterance per pass (8 frames)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vocoder_host_overhead.json")
    a = p.parse_args()
    torch.manual_seed(0)
    levels = [int(r) for r in a.rows.split(",")]
    results: dict[tuple[str, int], list] = {(m, r): [] for m in ("views", "rows") for r in levels}
    for round_ in range(a.rounds):
        for r in levels:
            for mode in ("views", "rows") if round_ % 2 == 0 else ("rows", "views"):
                results[(mode, r)].append(measure(mode, r, a.steps))
    table = []
    print(f"{'rows':>6} {'views us/row':>13} {'rows us/row':>12} {'ratio':>6}")
    for r in levels:
        v = 1e6 * statistics.median(results[("views", r)]) / r
        w = 1e6 * statistics.median(results[("rows", r)]) / r
        table.append(
            {
                "rows": r,
                "views_us_per_row": round(v, 2),
                "rows_us_per_row": round(w, 2),
                "views_ms_per_step": round(v * r / 1000, 2),
                "rows_ms_per_step": round(w * r / 1000, 2),
            }
        )
        print(f"{r:>6} {v:>13.2f} {w:>12.2f} {v / w:>6.1f}")
    published: dict[tuple[str, int], list] = {(m, r): [] for m in ("float32", "int16") for r in levels}
    for round_ in range(a.rounds):
        for r in levels:
            for mode in ("float32", "int16") if round_ % 2 == 0 else ("int16", "float32"):
                published[(mode, r)].append(publish(mode, r, a.publish_samples, a.steps))
    publisher = []
    print(f"\npublisher, {a.publish_samples} samples per utterance per pass")
    print(f"{'rows':>6} {'float32 us/utt':>15} {'int16 us/utt':>13} {'ratio':>6}")
    for r in levels:
        f = 1e6 * statistics.median(published[("float32", r)]) / r
        i = 1e6 * statistics.median(published[("int16", r)]) / r
        publisher.append({"rows": r, "float32_us_per_utterance": round(f, 2), "int16_us_per_utterance": round(i, 2)})
        print(f"{r:>6} {f:>15.2f} {i:>13.2f} {f / i:>6.1f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "command": machine.command(),
                "steps": a.steps,
                "rounds": a.rounds,
                "levels": table,
                "publish_samples": a.publish_samples,
                "publisher": publisher,
            },
            indent=2,
        )
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
