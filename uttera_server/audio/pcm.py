"""Float audio in [-1, 1] to the int16 PCM every transport sends."""

import numpy as np


def to_int16(audio: np.ndarray) -> np.ndarray:
    """Samples beyond full scale are clipped (the voice's vocoder `output_gain` leaves headroom)."""
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)
