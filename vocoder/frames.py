"""Validation of the mel frames a `StreamingVocoder` is handed: per utterance, or as one engine step's tensor."""

from collections.abc import Hashable

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import FrameShapeError

Frames = np.ndarray | Tensor
"""`(k, n_mels)` natural-log mel frames, frame-major as the acoustic model's mel head emits them."""


def as_frames(utterance_id: Hashable, frames: Frames, n_mels: int, device: torch.device) -> np.ndarray | Tensor:
    """Validated `(k, n_mels)` frames: host frames as a float32 numpy copy (callers may reuse
    buffers; numpy calls keep the GIL), GPU frames as the tensor itself, kept by reference, so the
    producer must not overwrite them after passing them."""
    if isinstance(frames, Tensor) and frames.device.type != "cpu":
        if frames.device.type != device.type:
            raise FrameShapeError(f"utterance {utterance_id!r}: frames on {frames.device}, vocoder on {device}")
        _check_shape(utterance_id, tuple(frames.shape), frames.is_floating_point(), frames.dtype, n_mels)
        return frames.detach()
    if isinstance(frames, Tensor):
        frames = frames.detach().float().numpy() if frames.is_floating_point() else frames.numpy()
    a = np.asarray(frames)
    _check_shape(utterance_id, a.shape, np.issubdtype(a.dtype, np.floating), a.dtype, n_mels)
    return a.astype(np.float32)


def as_step(mel: Tensor, n_mels: int, device: torch.device) -> Tensor:
    """A validated `(R, k, n_mels)` step tensor on the vocoder's device type, kept by reference."""
    if mel.dim() != 3 or mel.shape[2] != n_mels or not mel.is_floating_point():
        raise FrameShapeError(
            f"step frames must be floating point of shape (R, k, {n_mels}), got {tuple(mel.shape)} {mel.dtype}"
        )
    if mel.device.type != device.type:
        raise FrameShapeError(f"step frames on {mel.device}, vocoder on {device}")
    return mel.detach()


def _check_shape(
    utterance_id: Hashable, shape: tuple[int, ...], floating: bool, dtype: torch.dtype | np.dtype, n_mels: int
) -> None:
    if len(shape) != 2 or shape[1] != n_mels or not floating:
        raise FrameShapeError(
            f"utterance {utterance_id!r}: frames must be floating point of shape (k, {n_mels}), got {tuple(shape)} {dtype}"
        )
