"""Pointer-token targets from per-phoneme frame durations (docs/model-format.md, "Token layout").

Chunk `t` covers mel frames `[r*t, r*t + r)`. Its pointer `p_t` is the phoneme voicing the chunk's
FIRST frame (not the majority: the first frame is what the served model's timestamps report via
`AudioChunk.first_phoneme`). Two repairs keep every target sequence legal under the serving rules:

1. forward: a move larger than `max_advance` (several very short phonemes inside one chunk) is
   clamped, so the pointer lags by a phoneme or two for a chunk;
2. backward: the last chunk must point at the last phoneme (`$`), because STOP is only allowed
   there; earlier pointers are raised just enough that no move exceeds `max_advance`.

A sentence whose repaired sequence does not start at pointer 0 is rejected (never seen in practice:
every Piper phoneme with its pad lasts >= 2 frames).

The last chunk's missing frames (when `frames % r != 0`) are filled by repeating the utterance's
last frame (trailing silence after `$`); they are trained like real frames so the served model
emits benign audio there.
"""

from __future__ import annotations

import numpy as np


class TargetError(ValueError):
    """The durations cannot be turned into a legal pointer sequence."""


def pointer_targets(durations: np.ndarray, r: int, max_advance: int) -> np.ndarray:
    """durations (P,) frames per prompt phoneme, all >= 0, sum > 0 -> pointers (T,), T = ceil(F / r)."""
    durations = np.asarray(durations, dtype=np.int64)
    n_phon = len(durations)
    if n_phon == 0 or durations.sum() <= 0 or (durations < 0).any():
        raise TargetError("durations must be non-negative with a positive sum")
    frame_phoneme = np.repeat(np.arange(n_phon), durations)
    p = frame_phoneme[::r].copy()
    for t in range(1, len(p)):
        p[t] = min(p[t], p[t - 1] + max_advance)
    p[-1] = n_phon - 1
    for t in range(len(p) - 2, -1, -1):
        p[t] = max(p[t], p[t + 1] - max_advance)
    if p[0] != 0:
        raise TargetError(f"{n_phon} phonemes cannot be reached in {len(p)} steps from pointer 0")
    return p


def move_classes(pointers: np.ndarray, max_advance: int) -> np.ndarray:
    """Class of the token predicted after each pointer: move 0..max_advance, or STOP = max_advance + 1.

    (T,) -> (T,); the last entry is STOP.
    """
    moves = np.diff(pointers, append=pointers[-1])
    moves[-1] = max_advance + 1
    if (moves[:-1] < 0).any() or (moves[:-1] > max_advance).any():
        raise TargetError("pointer moves out of range")
    return moves


def max_dwell(pointers: np.ndarray) -> int:
    """Longest run of equal pointers (steps one phoneme is held)."""
    change = np.flatnonzero(np.diff(pointers)) + 1
    bounds = np.concatenate([[0], change, [len(pointers)]])
    return int(np.diff(bounds).max())


def chunk_mel(mel: np.ndarray, r: int) -> np.ndarray:
    """mel (F, n_mels) -> (ceil(F / r), r, n_mels), the last chunk padded by repeating the last frame."""
    n_frames = mel.shape[0]
    t = -(-n_frames // r)
    pad = t * r - n_frames
    if pad:
        mel = np.concatenate([mel, np.repeat(mel[-1:], pad, axis=0)], axis=0)
    return mel.reshape(t, r, mel.shape[1])
