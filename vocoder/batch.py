"""A vocoder pass's input: the pending frames of the ready utterances as one right-padded mel batch.

Parts are host frames (numpy), device tensors, or `Row`s (row `row` of one engine step's
`(R, k, n_mels)` mel, as the in-engine vocoder hands them). Device parts are gathered in a few
launches (`gather`) instead of one copy per part.

Batching rows of different lengths: rows are right-padded to the longest and carry their own
length. Every conv runs causally in streaming, so padding can only affect outputs past a row's
length, which are discarded; each conv cache and the overlap-add tail are gathered at the row's own
length (see vocoder/layers.py). Padding costs at most (longest - shortest) frames of compute; with
the TTS emitting 4 frames per decode step, rows mostly share one length.
"""

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor


class Row:
    """`(k, n_mels)` frames held as row `row` of a step tensor `mel (rows, k, n_mels)`, without making a
    tensor view per row (`submit(step_rows=)`: the in-engine vocoder's hundreds of rows per step)."""

    __slots__ = ("mel", "row", "shape")

    def __init__(self, mel: Tensor, row: int, shape: torch.Size | None = None):
        """`shape`: `mel.shape[1:]`, when the caller has it (a step's rows share it)."""
        self.mel, self.row = mel, row
        self.shape = mel.shape[1:] if shape is None else shape


ToDevice = Callable[[Tensor], Tensor]


def gather(batch: Tensor, seqs: list[list[np.ndarray | Tensor | Row]], to_device: ToDevice) -> bool:
    """Fill `batch` from device frames in a few launches (one cat of the distinct source tensors, two
    index uploads, one gather and one scatter) instead of one copy per part: the in-engine vocoder
    hands one row per utterance per engine step, hundreds per pass. Host parts may only be the zero
    lookahead padding of a finishing utterance (already zeros in `batch`); returns False, doing
    nothing, for any other mix."""
    n, n_mels = batch.shape[1], batch.shape[2]
    bases: dict[int, tuple[int, Tensor]] = {}  # id(source) -> (its first frame in the cat, source)
    src, dest = [], []
    total = 0
    for b, seq in enumerate(seqs):
        at = 0
        for p in seq:
            k = p.shape[0]
            if isinstance(p, np.ndarray):
                if p.any():
                    return False
                at += k
                continue
            source, first = (p.mel, p.row * k) if isinstance(p, Row) else (p, 0)
            base = bases.get(id(source))
            if base is None:
                base = bases[id(source)] = (total, source)
                total += source.numel() // n_mels
            src.append(base[0] + first)
            dest.append(b * n + at)
            at += k
    if not src:
        return True
    k = seqs[0][0].shape[0] if all(p.shape[0] == seqs[0][0].shape[0] for seq in seqs for p in seq) else None
    if k is not None:  # every part has k frames (the engine's frames_per_step): vectorized offsets
        steps = np.arange(k)
        src_idx = (np.asarray(src)[:, None] + steps).ravel()
        dest_idx = (np.asarray(dest)[:, None] + steps).ravel()
    else:
        sizes = [p.shape[0] for seq in seqs for p in seq if not isinstance(p, np.ndarray)]
        src_idx = np.concatenate([np.arange(s0, s0 + m) for s0, m in zip(src, sizes)])
        dest_idx = np.concatenate([np.arange(d0, d0 + m) for d0, m in zip(dest, sizes)])
    cat = torch.cat([t.reshape(-1, n_mels) for _, t in bases.values()]).to(torch.float32)
    index = to_device(torch.from_numpy(np.stack([src_idx, dest_idx])))
    batch.view(-1, n_mels).index_copy_(0, index[1], cat.index_select(0, index[0]))
    return True


def batch_mel(
    seqs: list[list[np.ndarray | Tensor | Row]],
    n: int,
    n_mels: int,
    device: torch.device,
    to_device: ToDevice,
    rows: int | None = None,
) -> Tensor:
    """Right-padded `(rows, n_mels, n)` float32 batch (`rows` >= len(seqs), default len(seqs)) on
    `device`; host frames are assembled with numpy and moved in one copy (`to_device`)."""
    shape = (rows or len(seqs), n, n_mels)
    on_gpu = any(isinstance(p, Tensor | Row) for parts in seqs for p in parts)
    if on_gpu:
        batch = torch.zeros(shape, dtype=torch.float32, device=device)
        if gather(batch, seqs, to_device):
            return batch.transpose(1, 2)
        for b, parts in enumerate(seqs):
            at = 0
            for p in parts:
                t = p.mel[p.row] if isinstance(p, Row) else p
                t = t.to(device, torch.float32) if isinstance(t, Tensor) else to_device(torch.from_numpy(t))
                batch[b, at : at + t.shape[0]] = t
                at += t.shape[0]
        return batch.transpose(1, 2)
    host = np.zeros(shape, np.float32)
    for b, parts in enumerate(seqs):
        at = 0
        for p in parts:
            assert isinstance(p, np.ndarray)  # no device frames: not on_gpu
            host[b, at : at + p.shape[0]] = p
            at += p.shape[0]
    return to_device(torch.from_numpy(host)).transpose(1, 2)
