"""The acoustic model's teacher-forced mel, frame-aligned with the teacher audio, for the vocoder to learn on.

A vocoder trained only on the teacher's mel meets a smoother mel when served (the acoustic model's): on 40
held-out sentences, copy synthesis scores DistillMOS 3.30 and the served voice 2.74 with the same vocoder
(benchmarks/RESULTS.md). Fed the pointer targets of the training data (teacher forcing), the acoustic model
predicts each utterance's mel frame for frame on the teacher's durations, so its mel lines up with the
teacher's audio sample for sample: `train_vocoder.py --pred-mels` learns (predicted mel -> teacher audio).

    python -m training.aligned_mels ACOUSTIC_CKPT|VOICE_DIR FEAT_DIR OUT_DIR [--voice-token T] [--device cuda]

Per features shard `feat_k.npz` -> `OUT/pred_k.npz`: `mel` float16 (F, n_mels) and `mel_off` (U + 1,), the
same utterances and frame counts as `feat_k` (hence as synthesis `shard_k`'s audio). An utterance the
pointer targets cannot describe (training/targets.py) keeps its teacher mel.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from training.data import Utterance, collate, next_tokens, read_shard, training_utterance
from training.model import AcousticConfig, UtteraTTS
from training.targets import TargetError


def load_model(ckpt: str, device: str) -> UtteraTTS:
    """A training checkpoint (`RUN/ckpt.pt`), or an exported voice directory (e.g. the shipped
    `voices/default`, fp16 weights read as float32)."""
    if Path(ckpt).is_dir():
        from training.train_acoustic import init_from

        config = AcousticConfig.from_hf(json.loads((Path(ckpt) / "config.json").read_text()))
        model = UtteraTTS(dataclasses.replace(config, dropout=0.0))
        init_from(model, Path(ckpt), [])
        return model.to(device).eval()
    st = torch.load(ckpt, map_location="cpu", weights_only=False)
    model = UtteraTTS(AcousticConfig(**{**st["config"], "dropout": 0.0}))
    model.load_state_dict(st["model"])
    return model.to(device).eval()


@torch.no_grad()
def predicted_mels(model: UtteraTTS, utts: list[Utterance], frames: list[int], device: str) -> list[np.ndarray]:
    """Teacher-forced mel of each utterance, `(frames[i], n_mels)` float16 (one batch: callers keep it small)."""
    c = model.config
    batch = collate(utts, c.pointer_offset)
    tokens, mask = batch["tokens"].to(device), batch["mel_mask"].to(device)
    nxt = next_tokens(batch, c.max_advance, c.stop_token_id).to(device)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
        h = model(tokens)
    out = []
    for i, u in enumerate(utts):
        chunks = model.mel(h[i][mask[i]].float(), nxt[i][mask[i]]).float()  # (T, r, n_mels)
        out.append(chunks.reshape(-1, c.n_mels)[: frames[i]].cpu().numpy().astype(np.float16))
    return out


def shard(model: UtteraTTS, path: Path, voice_token: int | None, device: str, batch: int) -> dict[str, np.ndarray]:
    c = model.config
    mels: list[np.ndarray] = []
    pending: list[tuple[int, Utterance, int]] = []

    def flush() -> None:
        for (k, _, _), m in zip(
            pending, predicted_mels(model, [u for _, u, _ in pending], [n for *_, n in pending], device)
        ):
            mels[k] = m
        pending.clear()

    for k, f in enumerate(read_shard(path, voice_token)):
        mels.append(f.mel)  # the teacher's, unless predicted below
        if len(f.ids) > c.max_phonemes:
            continue
        try:
            pending.append((k, training_utterance(f, c.frames_per_step, c.max_advance), len(f.mel)))
        except TargetError:
            continue
        if len(pending) == batch:
            flush()
    if pending:
        flush()
    return {
        "mel": np.concatenate(mels) if mels else np.zeros((0, c.n_mels), np.float16),
        "mel_off": np.cumsum([0] + [len(m) for m in mels]).astype(np.int64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("acoustic_ckpt")
    parser.add_argument("feat_dir")
    parser.add_argument("out")
    parser.add_argument("--voice-token", type=int, default=None, help="the voice's token (multi-voice models)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = parser.parse_args()
    model = load_model(a.acoustic_ckpt, a.device)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    n, l1 = 0, []
    for path in sorted(Path(a.feat_dir).glob("feat_*.npz")):
        pred = shard(model, path, a.voice_token, a.device, a.batch)
        with np.load(path) as f:
            l1.append(float(np.abs(pred["mel"].astype(np.float32) - f["mel"].astype(np.float32)).mean()))
        np.savez(out / path.name.replace("feat_", "pred_"), **pred)  # type: ignore[arg-type]  # as features.py
        n += len(pred["mel_off"]) - 1
    print(f"aligned mels for {n} utterances -> {out} (mean |pred - teacher| log-mel {np.mean(l1):.3f})", flush=True)


if __name__ == "__main__":
    main()
