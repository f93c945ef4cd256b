"""Log-mel targets for the acoustic model, computed with the vocoder's own analysis.

`vocoder.mel.MelSpectrogram` frames `samples // hop` frames, and the teacher audio is exactly
`sum(dur) * hop` samples (synthesize.py), so `frames == sum(dur)` holds by construction; it is
checked per utterance.

Input: synthesize.py shards. Output, per shard, `OUT/feat_{k}.npz`:
  mel float16 (F, n_mels), mel_off int64 (U+1,)  natural-log mel, frame-major
  ids, ids_off, dur, text                        copied from the synthesis shard

    python -m training.features SYNTH_DIR OUT_DIR [--device cuda]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from vocoder.config import VocoderConfig
from vocoder.mel import MelSpectrogram


def shard_features(path: Path, mel: MelSpectrogram, device: str) -> dict[str, np.ndarray]:
    z = np.load(path)
    audio, a_off, dur, i_off = z["audio"], z["audio_off"], z["dur"], z["ids_off"]
    hop = mel.config.hop_length
    mels = []
    for u in range(len(a_off) - 1):
        wav = torch.from_numpy(audio[a_off[u] : a_off[u + 1]].astype(np.float32) / 32768.0).to(device)
        with torch.no_grad():
            m = mel(wav).T  # (frames, n_mels)
        frames = int(dur[i_off[u] : i_off[u + 1]].sum())
        if m.shape[0] != frames or len(wav) != frames * hop:
            raise ValueError(f"{path.name}#{u}: {m.shape[0]} mel frames but durations sum to {frames}")
        mels.append(m.cpu().numpy().astype(np.float16))
    return {
        "mel": np.concatenate(mels) if mels else np.zeros((0, mel.config.n_mels), np.float16),
        "mel_off": np.cumsum([0] + [len(m) for m in mels]).astype(np.int64),
        "ids": z["ids"],
        "ids_off": z["ids_off"],
        "dur": z["dur"],
        "text": z["text"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synth_dir")
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = parser.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    mel = MelSpectrogram(VocoderConfig()).to(a.device)
    total = 0
    for path in sorted(Path(a.synth_dir).glob("shard_*.npz")):
        feats = shard_features(path, mel, a.device)
        np.savez(out / path.name.replace("shard_", "feat_"), **feats)  # type: ignore[arg-type]  # mypy matches **feats against savez(allow_pickle: bool) too
        total += len(feats["mel_off"]) - 1
    print(f"features for {total} utterances -> {out}", flush=True)


if __name__ == "__main__":
    main()
