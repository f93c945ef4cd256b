"""Log-mel analysis: the features the acoustic model is trained to emit and the vocoder consumes.

Convention ("same" framing, as HiFi-GAN's `mel_spectrogram`): the waveform is reflect-padded by
`pad = (n_fft - hop) / 2` samples on each side and framed without centring, so

    frames = samples // hop_length

and frame `t` is the Hann-windowed spectrum centred on the middle of hop block
`[t * hop, (t + 1) * hop)`. Training targets should crop audio to a whole number of hops
(`samples = T * hop`); the vocoder then maps `T` frames back to exactly `T * hop` samples.

Values are natural-log magnitudes: `ln(max(fb @ |STFT|, log_clamp))`, where `fb` is the mel
filterbank (slaney scale and slaney area normalisation by default, matching
`librosa.filters.mel(..., htk=False, norm="slaney")`). Silence reads ln(1e-5) = -11.51.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from vocoder.config import VocoderConfig


def hz_to_mel(freqs: np.ndarray, scale: str) -> np.ndarray:
    """Hz -> mel on the `"htk"` (2595 log10(1 + f/700)) or `"slaney"` (linear < 1 kHz, log above) scale."""
    freqs = np.asarray(freqs, dtype=np.float64)
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + freqs / 700.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    mels = freqs / f_sp
    high = freqs >= min_log_hz
    mels[high] = min_log_mel + np.log(freqs[high] / min_log_hz) / logstep
    return mels


def mel_to_hz(mels: np.ndarray, scale: str) -> np.ndarray:
    """Inverse of `hz_to_mel`."""
    mels = np.asarray(mels, dtype=np.float64)
    if scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    freqs = f_sp * mels
    high = mels >= min_log_mel
    freqs[high] = min_log_hz * np.exp(logstep * (mels[high] - min_log_mel))
    return freqs


def mel_filterbank(
    sample_rate: int,
    n_fft: int,
    n_mels: int,
    f_min: float,
    f_max: float,
    scale: str = "slaney",
    norm: str | None = "slaney",
) -> np.ndarray:
    """Triangular mel filterbank, `(n_mels, n_fft // 2 + 1)` float64, to multiply linear magnitudes.

    Same construction as librosa's `filters.mel`: triangles with corners at `n_mels + 2` points
    equally spaced in mel between `f_min` and `f_max` Hz; `norm="slaney"` divides each triangle by
    its width in Hz / 2 so every filter has unit area.
    """
    fft_freqs = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    corners = mel_to_hz(
        np.linspace(hz_to_mel(np.array([f_min]), scale)[0], hz_to_mel(np.array([f_max]), scale)[0], n_mels + 2), scale
    )
    widths = np.diff(corners)
    ramps = corners[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights: np.ndarray = np.maximum(0.0, np.minimum(lower, upper))
    if norm == "slaney":
        weights *= (2.0 / (corners[2:] - corners[:-2]))[:, None]
    return weights


def hann_window(win_length: int, n_fft: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Periodic Hann window of `win_length` zero-padded to `n_fft`, centred: `(n_fft,)`."""
    window = torch.hann_window(win_length, periodic=True, dtype=torch.float64)
    left = (n_fft - win_length) // 2
    return nn.functional.pad(window, (left, n_fft - win_length - left)).to(dtype)


class MelSpectrogram(nn.Module):
    """Waveform -> log-mel, `(B, samples)` at `sample_rate` Hz -> `(B, n_mels, samples // hop)`.

    Also accepts `(samples,)` and returns `(n_mels, frames)`. Requires `samples > pad`
    (= (n_fft - hop) / 2) because of the reflect padding. Buffers are not saved in state dicts.
    """

    filterbank: Tensor  # buffers, registered in __init__
    window: Tensor

    def __init__(self, config: VocoderConfig):
        super().__init__()
        self.config = config
        fb = mel_filterbank(
            config.sample_rate,
            config.n_fft,
            config.n_mels,
            config.f_min,
            config.f_max,
            config.mel_scale,
            config.mel_norm,
        )
        self.register_buffer("filterbank", torch.from_numpy(fb).float(), persistent=False)
        self.register_buffer("window", hann_window(config.win_length, config.n_fft), persistent=False)

    def magnitude(self, wav: Tensor) -> Tensor:
        """Linear STFT magnitude `(B, n_fft // 2 + 1, samples // hop)` with the framing above."""
        c = self.config
        if wav.shape[-1] <= c.pad:
            raise ValueError(f"need more than {c.pad} samples for the mel analysis, got {wav.shape[-1]}")
        padded = nn.functional.pad(wav.unsqueeze(1), (c.pad, c.pad), mode="reflect").squeeze(1)
        spec = torch.stft(
            padded, c.n_fft, hop_length=c.hop_length, window=self.window, center=False, return_complex=True
        )
        return spec.abs()

    def forward(self, wav: Tensor) -> Tensor:
        squeeze = wav.dim() == 1
        if squeeze:
            wav = wav.unsqueeze(0)
        if wav.dim() != 2:
            raise ValueError(f"expected (B, samples) or (samples,), got shape {tuple(wav.shape)}")
        mel = torch.matmul(self.filterbank, self.magnitude(wav.float()))
        logmel = torch.log(torch.clamp(mel, min=self.config.log_clamp))
        return logmel.squeeze(0) if squeeze else logmel
