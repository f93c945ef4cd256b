"""Write a fine-tuned HiFi-GAN (`train_vocoder.py --arch hifigan`) into a voice as `hifigan/`.

    python -m training.export_hifigan RUN_DIR/ckpt.pt VOICE_DIR [--output-gain 0.7]

The generator is checked against the voice's mel analysis (its `config.json`) and stored in fp16 with the
served `output_gain` (trained at unit gain on peak-normalized audio; 0.7 leaves 3 dB of headroom, as the
packaged UNIVERSAL is served). Served as `uttera serve --vocoder voice-hifigan`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from vocoder import hifigan


def export(ckpt: Path, voice_dir: Path, output_gain: float) -> Path:
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    if state.get("arch") != "hifigan":
        raise SystemExit(f"{ckpt} is not a HiFi-GAN run (train_vocoder.py --arch hifigan)")
    config = dataclasses.replace(hifigan.HifiGanConfig.from_dict(state["config"]), output_gain=output_gain)
    config.check_matches(json.loads((voice_dir / "config.json").read_text()))
    net = hifigan.HifiGan(config)
    net.load_state_dict(state["model"])
    return net.save(voice_dir / hifigan.VOICE_DIR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("voice_dir", type=Path)
    parser.add_argument("--output-gain", type=float, default=hifigan.HifiGanConfig().output_gain)
    a = parser.parse_args()
    out = export(a.ckpt, a.voice_dir, a.output_gain)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"exported {out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
