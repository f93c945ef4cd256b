"""Training examples for the acoustic model: prompt + pointer tokens, move classes, mel chunks.

One utterance with P prompt phonemes and T = ceil(F / r) chunks becomes a sequence of P + T tokens:

    position   0 .. P-1        P + t  (t = 0 .. T-1)
    input      phoneme ids      pointer token  pointer_offset + p_t
    predicts   (P-1: ptr p_0)   ptr p_{t+1}, or STOP at t = T-1        -> classes, see below
    mel        -                chunk t (r frames)                     -> L1

The token loss is the cross-entropy the served logits processor leaves: the candidates after
pointer b are `ptr b .. ptr b+max_advance` (those past the last phoneme masked) and STOP (only
when b is the last phoneme). Class k <= max_advance means "move k", class max_advance+1 is STOP.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.targets import TargetError, chunk_mel, max_dwell, move_classes, pointer_targets


@dataclass(slots=True)
class Utterance:
    ids: np.ndarray  # (P,) int64 prompt phoneme ids
    pointers: np.ndarray  # (T,) int64
    classes: np.ndarray  # (T,) int64, last = STOP
    mel: np.ndarray  # (T, r, n_mels) float16
    text: str

    @property
    def length(self) -> int:
        return len(self.ids) + len(self.pointers)


@dataclass(frozen=True, slots=True)
class Features:
    """One utterance of a features shard (training/features.py)."""

    ids: np.ndarray  # (P,) int64 prompt phoneme ids
    dur: np.ndarray  # (P,) frames per prompt phoneme
    mel: np.ndarray  # (F, n_mels) float16 log-mel, F = dur.sum()
    text: str


def voice_prompt(ids: Sequence[int] | np.ndarray, voice_token: int | None) -> np.ndarray:
    """A prompt's phoneme ids (int64, a copy) with `voice_token` in place of its first id (the `^` a voice's
    prompts begin with), so one model learns several voices (docs/model-format.md, "voices"); None keeps `^`."""
    out = np.array(ids, dtype=np.int64)
    if voice_token is not None:
        out[0] = voice_token
    return out


def read_shard(path: Path, voice_token: int | None = None) -> list[Features]:
    """A features shard's utterances, in order, each prompt made with `voice_prompt`."""
    with np.load(path) as f:  # NpzFile re-reads an array on every access: read each once
        z = {k: f[k] for k in f.files}
    out = []
    for u in range(len(z["ids_off"]) - 1):
        a, b = z["ids_off"][u], z["ids_off"][u + 1]
        ids = voice_prompt(z["ids"][a:b], voice_token)
        out.append(Features(ids, z["dur"][a:b], z["mel"][z["mel_off"][u] : z["mel_off"][u + 1]], str(z["text"][u])))
    return out


def training_utterance(f: Features, r: int, max_advance: int) -> Utterance:
    """The pointer targets and mel chunks of `f`; raises `TargetError` where the targets cannot describe it."""
    p = pointer_targets(f.dur, r, max_advance)
    cls = move_classes(p, max_advance)
    return Utterance(f.ids, p.astype(np.int64), cls.astype(np.int64), chunk_mel(f.mel, r), f.text)


def load_utterances(
    feat_dir: str | Path, r: int, max_advance: int, max_phonemes: int, limit: int = 0, voice_token: int | None = None
) -> tuple[list[Utterance], dict]:
    """Every usable utterance of `feat_dir`'s shards (`voice_token`: see `read_shard`), with statistics."""
    utts: list[Utterance] = []
    stats: dict[str, Any] = {"rejected": 0, "frames": 0, "max_dwell": 0, "dwell_hist": {}}
    for path in sorted(Path(feat_dir).glob("feat_*.npz")):
        for f in read_shard(path, voice_token):
            if len(f.ids) > max_phonemes or len(f.ids) < 3:
                stats["rejected"] += 1
                continue
            try:
                u = training_utterance(f, r, max_advance)
            except TargetError:
                stats["rejected"] += 1
                continue
            d = max_dwell(u.pointers)
            stats["max_dwell"] = max(stats["max_dwell"], d)
            stats["dwell_hist"][d] = stats["dwell_hist"].get(d, 0) + 1
            stats["frames"] += len(f.mel)
            utts.append(u)
            if limit and len(utts) >= limit:
                return utts, stats
    return utts, stats


def collate(utts: list[Utterance], pointer_offset: int) -> dict[str, torch.Tensor]:
    """-> tokens (B, S) long; ce_base, ce_last, ce_class (B, S) long (class -100 = ignore);
    mel (B, S, r, n_mels) float16 and mel_mask (B, S) bool, aligned with the input positions."""
    B = len(utts)
    S = max(u.length for u in utts)
    r, n_mels = utts[0].mel.shape[1:]
    tokens = np.zeros((B, S), np.int64)
    base = np.zeros((B, S), np.int64)
    last = np.zeros((B, S), np.int64)
    cls = np.full((B, S), -100, np.int64)
    mel = np.zeros((B, S, r, n_mels), np.float16)
    mask = np.zeros((B, S), bool)
    for i, u in enumerate(utts):
        P, T = len(u.ids), len(u.pointers)
        tokens[i, :P] = u.ids
        tokens[i, P : P + T] = pointer_offset + u.pointers
        last[i, P - 1 : P + T] = P - 1
        base[i, P : P + T] = u.pointers
        cls[i, P - 1] = 0  # pointer 0 from "base 0, move 0"
        cls[i, P : P + T] = u.classes
        mel[i, P : P + T] = u.mel
        mask[i, P : P + T] = True
    return {
        k: torch.from_numpy(v)
        for k, v in dict(tokens=tokens, ce_base=base, ce_last=last, ce_class=cls, mel=mel, mel_mask=mask).items()
    }


def next_tokens(batch: dict[str, torch.Tensor], max_advance: int, stop_token_id: int) -> torch.Tensor:
    """(B, S): at each pointer position, the token of the next position (the pointer it moves to), or STOP
    where its class is STOP (the last chunk); other positions hold what follows them (unused)."""
    tokens = batch["tokens"]
    shifted = torch.cat([tokens[:, 1:], tokens[:, -1:]], dim=1)
    return torch.where(batch["ce_class"] == max_advance + 1, stop_token_id, shifted)


def length_batches(lengths: list[int], max_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices grouped into batches of similar length with B * max_len <= max_tokens, shuffled."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i in order:
        m = max(cur_max, lengths[i])
        if cur and m * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, m = [], lengths[i]
        cur.append(i)
        cur_max = m
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


class BatchDataset(torch.utils.data.Dataset):
    def __init__(self, utts: list[Utterance], batches: list[list[int]], pointer_offset: int):
        self.utts, self.batches, self.offset = utts, batches, pointer_offset

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return collate([self.utts[j] for j in self.batches[i]], self.offset)
