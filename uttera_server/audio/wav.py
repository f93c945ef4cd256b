"""PCM bytes and the streaming WAV header.

A streamed WAV does not know its length when the header leaves, so the RIFF and data chunk sizes are
0xFFFFFFFF, as OpenAI's and ffmpeg's streaming WAV output have them; players read until the stream ends.
"""

import struct

import numpy as np

UNKNOWN_SIZE = 0xFFFFFFFF
WAV_HEADER_BYTES = 44
SAMPLE_BYTES = 2  # s16le


def streaming_wav_header(sample_rate: int, channels: int = 1) -> bytes:
    """44-byte RIFF/WAVE header for PCM s16le at `sample_rate` Hz with unknown length."""
    if sample_rate <= 0 or channels <= 0:
        raise ValueError(f"sample_rate and channels must be positive, got {sample_rate}, {channels}")
    block_align = channels * SAMPLE_BYTES
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", UNKNOWN_SIZE, b"WAVE",
        b"fmt ", 16, 1, channels, sample_rate, sample_rate * block_align, block_align, 8 * SAMPLE_BYTES,
        b"data", UNKNOWN_SIZE,
    )  # fmt: skip


def pcm_bytes(pcm: np.ndarray) -> bytes:
    """int16 samples `(n,)` -> little-endian bytes (no copy when already `<i2`)."""
    return np.asarray(pcm, dtype="<i2").tobytes()


def duration_s(n_bytes: int, sample_rate: int) -> float:
    """Seconds of mono s16le audio in `n_bytes`."""
    return n_bytes / (SAMPLE_BYTES * sample_rate)
