"""Helpers shared by the vocoder tests, imported as `tests.vocoder.voc_helpers` (the repository root is on
pytest's `pythonpath`, as for `tests.engine.helpers`)."""

import numpy as np
import torch

from vocoder.config import VocoderConfig
from vocoder.model import Vocoder


def tiny_config(**overrides) -> VocoderConfig:
    """The real analysis (22050 Hz, hop 256, n_fft 1024, 80 mels) with a tiny network."""
    return VocoderConfig(**{"dim": 32, "intermediate_dim": 64, "num_layers": 3, **overrides})


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """10 log10(|ref|^2 / |ref - test|^2), in float64; inf when identical."""
    reference = reference.astype(np.float64)
    noise = float(np.sum((reference - test) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(reference**2) / noise))


def offline(model: Vocoder, mel: np.ndarray) -> np.ndarray:
    """`(T, n_mels)` frame-major mel -> offline `Vocoder.forward` PCM `(T * hop,)`."""
    with torch.inference_mode():
        return model(torch.from_numpy(np.ascontiguousarray(mel.T[None])))[0].numpy()


def random_mel(rng: np.random.Generator, frames: int, n_mels: int = 80) -> np.ndarray:
    """Log-mel-like frames `(frames, n_mels)` float32 around -5."""
    return (rng.standard_normal((frames, n_mels)) * 2 - 5).astype(np.float32)
