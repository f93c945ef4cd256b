"""The in-engine vocoder against the serving process's vocoder, on the same engine weights and texts.

    python -m benchmarks.engine_vocoder_check --model voices/default [--streams 16] \\
        [--out benchmarks/results/engine_vocoder_check.json]

Starts a Synthesizer with `vocoder_process="engine"`, then one with `"frontend"` (one at a time), sends the
same seeded texts through both (`--streams` at once) and compares each text's PCM: equal length, and the
SNR of the engine's audio against the serving process's (both vocode the same mel with the same weights;
on CUDA, batching and kernels change float rounding only). Also reports TTFA p50 per variant. Prints a
table and writes JSON with the command line.
"""

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import machine
from benchmarks.texts import TextMix
from uttera_server.config import EngineConfig
from uttera_server.synthesis import AudioChunk
from uttera_server.synthesis.synthesizer import Synthesizer

ROOT = Path(__file__).resolve().parent.parent


async def run_variant(model: Path, process: str, texts: list[str], max_num_seqs: int) -> tuple[list, list]:
    synth = Synthesizer(
        model, EngineConfig(max_num_seqs=max_num_seqs, vocoder_process=process, kv_cache_memory_bytes=2 << 30)
    )
    await synth.start()
    try:

        async def one(text: str):
            t0, first, parts = time.monotonic(), None, []
            async for item in synth.stream(text):
                if isinstance(item, AudioChunk):
                    first = first if first is not None else time.monotonic() - t0
                    parts.append(item.pcm)
            return np.concatenate(parts), first

        results = await asyncio.gather(*(one(t) for t in texts))
    finally:
        await synth.close()
    return [r[0] for r in results], [r[1] for r in results]


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    ref, test = ref.astype(np.float64), test.astype(np.float64)
    noise = np.sum((ref - test) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref**2) / noise))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "engine_vocoder_check.json")
    a = p.parse_args()
    mix = TextMix(seed=a.seed)
    texts = [mix.draw()[1] for _ in range(a.streams)]
    engine_pcm, engine_ttfa = asyncio.run(run_variant(a.model, "engine", texts, max(8, a.streams)))
    front_pcm, front_ttfa = asyncio.run(run_variant(a.model, "frontend", texts, max(8, a.streams)))
    rows = [
        {
            "chars": len(t),
            "samples_engine": len(e),
            "samples_frontend": len(f),
            "snr_db": snr_db(f, e) if len(e) == len(f) else None,
        }
        for t, e, f in zip(texts, engine_pcm, front_pcm)
    ]
    finite = [r["snr_db"] for r in rows if r["snr_db"] is not None]
    result = {
        "command": machine.command(),
        "streams": a.streams,
        "same_length": all(r["samples_engine"] == r["samples_frontend"] for r in rows),
        "snr_db_min": min(finite) if finite else None,
        "ttfa_ms_p50": {
            "engine": 1000 * float(np.median(engine_ttfa)),
            "frontend": 1000 * float(np.median(front_ttfa)),
        },
        "mismatched_streams": sum(r["samples_engine"] != r["samples_frontend"] for r in rows),
    }
    print(f"{'variant':<10} {'TTFA p50 ms':>12}")
    for k, v in result["ttfa_ms_p50"].items():
        print(f"{k:<10} {v:>12.1f}")
    print(f"same length: {result['same_length']}, min SNR engine vs frontend: {result['snr_db_min']} dB")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2))
    # Per-stream rows stay out of git (benchmarks/results/*.records.json is ignored).
    a.out.with_suffix(".records.json").write_text(json.dumps(rows) + "\n")


if __name__ == "__main__":
    main()
