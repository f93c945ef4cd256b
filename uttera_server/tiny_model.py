"""Create a tiny random-weight model directory for tests and development (no network).

    python -m uttera_server.tiny_model OUT_DIR [--seed 0] [--layers 2] [--hidden 64] [--voice ID:TOKEN ...]

The weights are random, so it speaks noise, but it runs the whole serving path with the real shapes
and vocabularies. config.json marks it `"random_weights": true`, which the server reports. With
`--voice` (or `voices=`), config.json also has a `voices` list (docs/model-format.md): one model
directory, several voices, each chosen by its voice token in place of the prompt's first id.
"""

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

N_PHONEME_TOKENS = 256
MAX_PHONEMES = 512


def acoustic_config(hidden: int, layers: int, heads: int, frames_per_step: int = 4) -> dict[str, Any]:
    stop = N_PHONEME_TOKENS + MAX_PHONEMES
    return {
        "architectures": ["UtteraTTSForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": hidden * 4,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
        "vocab_size": stop + 1,
        "bos_token_id": None,
        "eos_token_id": stop,
        "sample_rate": 22050,
        "hop_length": 256,
        "n_fft": 1024,
        "win_length": 1024,
        "n_mels": 80,
        "f_min": 0.0,
        "f_max": 8000.0,
        "frames_per_step": frames_per_step,
        "n_phoneme_tokens": N_PHONEME_TOKENS,
        "max_phonemes": MAX_PHONEMES,
        "pointer_offset": N_PHONEME_TOKENS,
        "stop_token_id": stop,
        "max_advance": 3,
        "max_steps_per_phoneme": 3,
        "voice": {
            "name": "tiny-random",
            "language": "en-US",
            "description": "random weights (development model): produces noise, not speech",
            "random_weights": True,
        },
    }


def random_weights(cfg: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]

    def rand(*shape: int, scale: float = 0.02) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    w = {
        "model.embed_tokens.weight": rand(v, h),
        "model.pos_embed.weight": rand(cfg["max_phonemes"], h),
        "model.norm.weight": torch.ones(h),
        "lm_head.weight": rand(v, h),
        "mel_head.fc1.weight": rand(h, h, scale=h**-0.5),
        "mel_head.fc1.bias": torch.zeros(h),
        "mel_head.fc2.weight": rand(cfg["frames_per_step"] * cfg["n_mels"], h, scale=h**-0.5),
        "mel_head.fc2.bias": torch.full((cfg["frames_per_step"] * cfg["n_mels"],), -4.0),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = torch.ones(h)
        w[p + "post_attention_layernorm.weight"] = torch.ones(h)
        w[p + "self_attn.q_proj.weight"] = rand(q, h)
        w[p + "self_attn.k_proj.weight"] = rand(kv, h)
        w[p + "self_attn.v_proj.weight"] = rand(kv, h)
        w[p + "self_attn.o_proj.weight"] = rand(h, q)
        w[p + "mlp.gate_proj.weight"] = rand(inter, h)
        w[p + "mlp.up_proj.weight"] = rand(inter, h)
        w[p + "mlp.down_proj.weight"] = rand(h, inter)
    return w


def voices_list(voices: Mapping[str, int]) -> list[dict[str, Any]]:
    """config.json's `voices` list for `{id: voice_token}` (the first is the default), as
    training/export.py writes it, each marked as random weights."""
    return [
        {
            "id": voice_id,
            "voice_token": token,
            "name": voice_id,
            "language": "en-US",
            "description": f"tiny random voice {voice_id} (development model): produces noise, not speech",
            "random_weights": True,
            "gender": None,
            "teacher": None,
            "license": None,
        }
        for voice_id, token in voices.items()
    ]


def make_tiny_model(
    out: str | Path,
    *,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 2,
    voices: Mapping[str, int] | None = None,
    frames_per_step: int = 4,
) -> Path:
    """`voices`: `{id: voice_token}` for a multi-voice directory (e.g. `{"joe": 1, "heart": 255}`);
    None: one voice, without a `voices` list."""
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = acoustic_config(hidden, layers, heads, frames_per_step)
    if voices is not None:
        cfg["voices"] = voices_list(voices)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(random_weights(cfg, seed), str(out / "model.safetensors"))
    vcfg = VocoderConfig(
        sample_rate=cfg["sample_rate"],
        hop_length=cfg["hop_length"],
        n_fft=cfg["n_fft"],
        win_length=cfg["win_length"],
        n_mels=cfg["n_mels"],
        dim=64,
        intermediate_dim=128,
        num_layers=2,
    )
    Vocoder.random(vcfg, seed=seed).save(out / "vocoder")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--voice", action="append", metavar="ID:TOKEN", help="a voice of a multi-voice model")
    a = parser.parse_args()
    voices = {v.rsplit(":", 1)[0]: int(v.rsplit(":", 1)[1]) for v in a.voice} if a.voice else None
    out = make_tiny_model(a.out, seed=a.seed, hidden=a.hidden, layers=a.layers, heads=a.heads, voices=voices)
    print(out)


if __name__ == "__main__":
    main()
