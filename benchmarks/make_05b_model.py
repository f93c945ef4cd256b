"""Write a ~0.5 B-parameter random-weight UtteraTTS model directory, for GPU throughput runs.

    python -m benchmarks.make_05b_model [--out models/random-0.5b] [--hidden 1024] [--layers 24]
                                        [--heads 16] [--intermediate 5120] [--frames-per-step 4] [--seed 0] [--check]

Same code path as `python -m uttera_server.tiny_model` (uttera_server/tiny_model.py), scaled up, with the
default voice's vocoder config (vocoder.config.VocoderConfig defaults: dim 256, 8 layers, random weights)
and fp16 weights (~1 GB). It speaks noise: it is for speed, not quality. Prints the parameter count
(acoustic model: per layer 4 h^2 attention (q, k, v, o; no GQA) + 3 h i MLP, plus two vocab x h
embeddings, the phoneme-position embedding and the mel head). `--check` starts the engine on it
(small KV cache) and generates a few decode steps. models/ is git-ignored: do not commit the weights.

At the default voice's dimensions (`--hidden 384 --layers 6 --heads 6 --intermediate 1536`) it makes the
models of `gpu_suite.sh fps`: the same network with 4 or 8 mel frames per decode step, so the served cost of
an audio-second at twice the frames per row-step is measured before a voice is trained that way.
"""

import argparse
import asyncio
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def param_count(cfg: dict) -> int:
    h, i, n, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
    mel = h * h + h + cfg["frames_per_step"] * cfg["n_mels"] * (h + 1)
    return n * layer + 2 * v * h + cfg["max_phonemes"] * h + h + mel


def make(
    out: Path, hidden: int, layers: int, heads: int, intermediate: int, seed: int, frames_per_step: int = 4
) -> tuple[Path, int]:
    import torch
    from safetensors.torch import save_file

    from uttera_server.tiny_model import acoustic_config, random_weights
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    cfg = acoustic_config(hidden, layers, heads, frames_per_step)
    cfg["intermediate_size"] = intermediate
    cfg["torch_dtype"] = "float16"
    cfg["voice"] = {
        "name": out.name,
        "language": "en-US",
        "random_weights": True,
        "description": f"random weights, hidden {hidden}, {layers} layers, {frames_per_step} frames a step, for GPU "
        "throughput benchmarks: noise",
    }
    weights = random_weights(cfg, seed)
    n = sum(t.numel() for t in weights.values())
    if n != param_count(cfg):
        raise AssertionError(f"weights hold {n} parameters, the formula says {param_count(cfg)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file({k: v.to(torch.float16).contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    vcfg = VocoderConfig(
        **{k: cfg[k] for k in ("sample_rate", "hop_length", "n_fft", "win_length", "n_mels", "f_min", "f_max")}
    )
    Vocoder.random(vcfg, seed=seed).save(out / "vocoder")
    return out, n


async def check(out: Path, steps: int) -> None:
    from uttera_server.config import EngineConfig
    from uttera_server.synthesis.mel_engine import MelEngine
    from uttera_server.model_dir import VoiceModelConfig

    engine = MelEngine(
        VoiceModelConfig.load(out), EngineConfig(max_num_seqs=2, kv_cache_memory_bytes=512 << 20, max_model_len=1024)
    )
    t0 = time.perf_counter()
    await asyncio.to_thread(engine.start)
    print(f"engine started in {time.perf_counter() - t0:.1f} s")
    try:
        got, t0 = [], time.perf_counter()
        async for step in engine.generate([1, 20, 21, 22, 23, 24, 25, 2]):
            got.append(step)
            if len(got) == steps:
                break
        dt = time.perf_counter() - t0
        assert got[0].mel is not None  # a plain request: mel, not PCM
        print(
            f"generated {len(got)} decode steps, mel chunk {got[0].mel.shape}, pointers {[s.pointer for s in got]}, "
            f"{1000 * dt / len(got):.0f} ms/step incl. prefill"
        )
    finally:
        engine.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--out", type=Path, default=ROOT / "models" / "random-0.5b")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=5120)
    p.add_argument("--frames-per-step", type=int, default=4, help="mel frames per decode step (the voice's: 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="start the engine and generate a few steps")
    p.add_argument("--check-steps", type=int, default=4)
    a = p.parse_args()
    out, n = make(a.out, a.hidden, a.layers, a.heads, a.intermediate, a.seed, a.frames_per_step)
    from vocoder.model import Vocoder

    voc = Vocoder.from_dir(out / "vocoder").num_params()
    print(
        f"{out}: acoustic model {n:,} parameters ({n / 1e9:.3f} B), vocoder {voc:,} "
        f"(hidden {a.hidden}, {a.layers} layers, {a.heads} heads, intermediate {a.intermediate}, "
        f"{a.frames_per_step} frames a step)"
    )
    if a.hidden == 1024 and not 0.45e9 <= n <= 0.55e9:
        print(f"note: {n / 1e9:.3f} B is outside 0.45-0.55 B")
    if a.check:
        asyncio.run(check(out, a.check_steps))


if __name__ == "__main__":
    main()
