"""The TTFA floor of a setup: one prefill + the decode steps of the first vocoder chunk + one vocoder
chunk, each measured on its own on an idle engine, with no server in between.

    python -m benchmarks.floor [--model voices/default] [--server-args "..."] [--device cpu|cuda]
                               [--repeats 5] [--seed 0] [--out benchmarks/results/floor.json]

`--server-args` are `uttera serve` flags; the engine config is built from them by the server's own
`cli.build_config`, so the floor is for exactly the configuration a load run serves. Parts:

  prefill     a `max_tokens=1` engine request on the first sentence of a text (median over the text
              mix's draws; per kind too), request to output through AsyncLLM (its IPC included)
  step        median time between consecutive mel chunks of one request at concurrency 1
  k           first_chunk_frames / frames_per_step decode steps (rounded up) fill the first chunk
  vocoder     `StreamingVocoder.step` of a new stream with first_chunk_frames real mel frames, with the
              vocoder worker's torch thread count (1 on CPU)

floor = prefill + k * step + vocoder. Also reported, not in the floor: the text frontend's time
(`frontend.prepare`), and prefill + k steps measured together (time to the k-th chunk) as a check.
"""

import argparse
import asyncio
import json
import math
import shlex
import statistics
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.stats import pct
from benchmarks.texts import KINDS, TextMix

ROOT = Path(__file__).resolve().parent.parent


def engine_config(model: Path, server_args: str):
    """The EngineConfig `uttera serve --model MODEL SERVER_ARGS` would run."""
    from uttera_server.flags import build_config, build_parser

    return build_config(build_parser().parse_args(["serve", "--model", str(model), *shlex.split(server_args)])).engine


async def prefill_ms(engine, ids: list[int]) -> float:
    """One prefill through AsyncLLM: a request for exactly one token (MelEngine has no such call)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(temperature=0.0, max_tokens=1, detokenize=False, output_kind=RequestOutputKind.DELTA)
    t0 = time.perf_counter()
    async for _ in engine._llm.generate(TokensPrompt(prompt_token_ids=list(ids)), params, f"floor-{t0}"):
        pass
    return 1000 * (time.perf_counter() - t0)


async def decode_run(engine, ids: list[int]) -> tuple[list[float], list, float]:
    """(times of each mel chunk after submit, the chunks, total seconds) of one request."""
    t0 = time.perf_counter()
    times, mels = [], []
    async for step in engine.generate(ids):
        times.append(time.perf_counter() - t0)
        mels.append(step.mel)
    return times, mels, time.perf_counter() - t0


def vocoder_ms(model_dir: Path, cfg, mel, device: str, repeats: int) -> tuple[float, float]:
    """Median ms of (first chunk of a new utterance, one later chunk of chunk_frames)."""
    import numpy as np
    import torch

    from vocoder.model import Vocoder
    from vocoder.streaming import StreamingVocoder

    if device == "cpu":
        torch.set_num_threads(1)  # as VocoderWorker
    graphs = device == "cuda" and cfg.vocoder_cuda_graphs is not False  # as the engine runs it on CUDA
    sv = StreamingVocoder(
        Vocoder.from_dir(model_dir / "vocoder"),
        chunk_frames=cfg.vocoder_chunk_frames,
        first_chunk_frames=cfg.first_chunk_frames,
        device=device,
        cuda_graphs=graphs,
    )
    sv.capture_graphs(1)
    need = cfg.first_chunk_frames + cfg.vocoder_chunk_frames
    while mel.shape[0] < need:
        mel = np.concatenate([mel, mel])
    first, later = [], []
    for i in range(repeats + 5):  # five warm-up rounds
        sid = f"s{i}"
        sv.open(sid)
        t0 = time.perf_counter()
        sv.step({sid: mel[: cfg.first_chunk_frames]})
        t1 = time.perf_counter()
        sv.step({sid: mel[cfg.first_chunk_frames : need]})
        t2 = time.perf_counter()
        sv.cancel(sid)
        if i >= 5:
            first.append(1000 * (t1 - t0))
            later.append(1000 * (t2 - t1))
    return statistics.median(first), statistics.median(later)


async def measure(a) -> dict:
    from uttera_server.synthesis.mel_engine import MelEngine
    from uttera_server.frontend import prepare
    from uttera_server.model_dir import VoiceModelConfig

    cfg = engine_config(a.model, a.server_args)
    model = VoiceModelConfig.load(a.model)
    k = math.ceil(cfg.first_chunk_frames / model.frames_per_step)

    # First sentences of every text in the lists, and the frontend's time on the whole text.
    first_ids, frontend = {}, []
    for texts in KINDS.values():
        for text in texts:
            t0 = time.perf_counter()
            sentences = prepare(text, max_phonemes=min(model.max_phonemes, 400))
            frontend.append(1000 * (time.perf_counter() - t0))
            first_ids[text] = sentences[0].phoneme_ids
    mix = TextMix(a.seed)
    draws = [mix.draw() for _ in range(200)]

    engine = MelEngine(model, cfg)
    await asyncio.to_thread(engine.start)
    try:
        longest = max(first_ids.values(), key=len)
        for _ in range(3):  # warm-up
            await decode_run(engine, longest)
        assert engine._llm is not None  # started
        engine_dtype = str(engine._llm.model_config.dtype).removeprefix("torch.")
        prefill = {}
        for text, ids in first_ids.items():
            prefill[text] = statistics.median([await prefill_ms(engine, ids) for _ in range(a.repeats)])
        steps, to_k, mels = [], [], None
        for i in range(a.repeats):
            times, mels, _ = await decode_run(engine, longest)
            steps += [1000 * (b - x) for x, b in zip(times, times[1:])]
        # The check runs on a first sentence of the median length, as the floor's prefill does.
        median_len = statistics.median(len(first_ids[t]) for _, t in draws)
        typical = min(first_ids.values(), key=lambda ids: abs(len(ids) - median_len))
        for i in range(a.repeats):
            times, _, _ = await decode_run(engine, typical)
            to_k.append(1000 * times[k - 1])
    finally:
        engine.shutdown()
    import numpy as np

    assert mels is not None, "no decode run"
    voc_first, voc_later = vocoder_ms(a.model, cfg, np.concatenate(mels), a.device, max(4 * a.repeats, 20))
    step = statistics.median(steps)
    step_p90 = pct(steps, 90)
    assert step_p90 is not None
    pre = statistics.median(prefill[text] for _, text in draws)
    out = {
        "model": str(a.model),
        "server_args": a.server_args,
        "device": a.device,
        "engine_dtype": engine_dtype,
        "first_chunk_frames": cfg.first_chunk_frames,
        "vocoder_chunk_frames": cfg.vocoder_chunk_frames,
        "frames_per_step": model.frames_per_step,
        "k_steps": k,
        "prefill_ms": round(pre, 3),
        "step_ms": round(step, 3),
        "step_ms_p90": round(step_p90, 3),
        "vocoder_first_chunk_ms": round(voc_first, 3),
        "vocoder_chunk_ms": round(voc_later, 3),
        "floor_ms": round(pre + k * step + voc_first, 3),
        "engine_to_first_chunk_ms": round(statistics.median(to_k), 3),
        "frontend_ms_p50": round(statistics.median(frontend), 3),
        "first_sentence_phonemes_p50": statistics.median(len(first_ids[t]) for _, t in draws),
        "by_kind": {},
    }
    for kind, texts in KINDS.items():
        p = statistics.median(prefill[t] for t in texts)
        out["by_kind"][kind] = {
            "prefill_ms": round(p, 3),
            "floor_ms": round(p + k * step + voc_first, 3),
            "first_sentence_phonemes": statistics.median(len(first_ids[t]) for t in texts),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--server-args", default="", help="`uttera serve` engine flags, one string")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the vocoder runs")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "floor.json")
    a = p.parse_args()
    meta = machine.describe()
    r = asyncio.run(measure(a))
    print(f"{'part':<34} {'ms':>9}")
    print("-" * 44)
    print(f"{'prefill (median first sentence)':<34} {r['prefill_ms']:>9.2f}")
    print(f"{'decode step':<34} {r['step_ms']:>9.2f}")
    print(f"{'  x k = ' + str(r['k_steps']) + ' steps':<34} {r['k_steps'] * r['step_ms']:>9.2f}")
    print(
        f"{'vocoder first chunk (' + str(r['first_chunk_frames']) + ' frames)':<34} {r['vocoder_first_chunk_ms']:>9.2f}"
    )
    print(f"{'FLOOR':<34} {r['floor_ms']:>9.2f}")
    print(f"{'(check: engine to k-th chunk)':<34} {r['engine_to_first_chunk_ms']:>9.2f}")
    print(f"{'(not in floor: frontend p50)':<34} {r['frontend_ms_p50']:>9.2f}")
    print(f"{'(info: vocoder chunk of ' + str(r['vocoder_chunk_frames']) + ')':<34} {r['vocoder_chunk_ms']:>9.2f}")
    for kind, v in r["by_kind"].items():
        print(f"{'floor, ' + kind + ' (' + str(v['first_sentence_phonemes']) + ' phonemes)':<34} {v['floor_ms']:>9.2f}")
    meta["loadavg_end"] = machine.loadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({**meta, **r}, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
