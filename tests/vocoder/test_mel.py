import math

import numpy as np
import pytest
import torch

from vocoder.config import VocoderConfig
from vocoder.mel import MelSpectrogram, hz_to_mel, mel_filterbank, mel_to_hz


def test_shape_is_samples_over_hop():
    mel = MelSpectrogram(VocoderConfig())
    for samples in (512, 256 * 40, 256 * 40 + 255):
        out = mel(torch.randn(3, samples))
        assert out.shape == (3, 80, samples // 256)
        assert out.dtype == torch.float32
    assert mel(torch.randn(256 * 10)).shape == (80, 10)
    with pytest.raises(ValueError, match="more than 384 samples"):
        mel(torch.randn(1, 300))


def test_units_natural_log_with_floor():
    mel = MelSpectrogram(VocoderConfig())
    silence = mel(torch.zeros(1, 256 * 8))
    assert torch.allclose(silence, torch.full_like(silence, math.log(1e-5)))
    # A full-scale sine: ln of the filtered magnitude, well above the floor and below ln(n_fft).
    t = torch.arange(256 * 20) / 22050
    loud = mel(torch.sin(2 * math.pi * 1000 * t)[None])
    assert 0 < loud.max() < math.log(1024)


def test_tone_lands_in_its_mel_band_and_frames_are_aligned():
    config = VocoderConfig()
    mel = MelSpectrogram(config)
    hop, frames = config.hop_length, 40
    t = torch.arange(hop * frames) / config.sample_rate
    wav = torch.sin(2 * math.pi * 2000 * t)
    wav[: hop * 20] = 0  # tone starts exactly at the boundary of frame 20
    out = mel(wav)
    centres = mel_to_hz(
        np.linspace(hz_to_mel(np.array([0.0]), "slaney")[0], hz_to_mel(np.array([8000.0]), "slaney")[0], 82)[1:-1],
        "slaney",
    )
    assert int(out[:, 30].argmax()) == int(np.abs(centres - 2000).argmin())
    # Frame t spans samples [t * hop - 384, t * hop + 640), centred on hop block t: frame 17 ends
    # 128 samples before the onset and sees nothing, frame 18 overlaps it.
    assert out[:, 17].max() == pytest.approx(math.log(1e-5))
    assert out[:, 18].max() > math.log(1e-5) + 1
    assert out[:, 20].max() > 0


def test_mel_scales_and_filterbank():
    assert hz_to_mel(np.array([1000.0]), "slaney")[0] == pytest.approx(15.0)
    assert hz_to_mel(np.array([1000.0]), "htk")[0] == pytest.approx(1000.0, abs=0.1)
    freqs = np.array([0.0, 440.0, 1000.0, 3000.0, 8000.0])
    for scale in ("slaney", "htk"):
        assert mel_to_hz(hz_to_mel(freqs, scale), scale) == pytest.approx(freqs)
    fb = mel_filterbank(22050, 1024, 80, 0.0, 8000.0, "slaney", "slaney")
    assert fb.shape == (80, 513) and (fb >= 0).all()
    assert (fb.sum(axis=1) > 0).all()  # no empty filter at 80 mels / 1024-point FFT
    assert fb[:, np.linspace(0, 11025, 513) > 8000].sum() == 0
    # Slaney norm: each triangle has unit area in Hz (up to bin sampling).
    df = 22050 / 1024
    assert np.median(fb.sum(axis=1) * df) == pytest.approx(1.0, rel=0.1)
    peak = mel_filterbank(22050, 1024, 80, 0.0, 8000.0, "htk", None)
    assert peak.max() <= 1.0


def test_filterbank_matches_torchaudio_when_available():
    functional = pytest.importorskip("torchaudio.functional")
    ours = mel_filterbank(22050, 1024, 80, 0.0, 8000.0, "slaney", "slaney")
    theirs = functional.melscale_fbanks(513, 0.0, 8000.0, 80, 22050, norm="slaney", mel_scale="slaney").T.numpy()
    assert np.allclose(ours, theirs, atol=1e-6)
