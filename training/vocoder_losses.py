"""Training losses for the vocoder (used by the training code, not by the server).

Reconstruction:
  * `MultiResolutionSTFTLoss`: spectral convergence + L1 of log magnitudes at several STFT sizes
    (Parallel WaveGAN), robust to phase differences that a waveform L1 would punish.
  * `MelLoss`: L1 between log-mels of prediction and target (HiFi-GAN / Vocos, weight ~45).
Adversarial, over the outputs of `training/discriminators.py`:
  * `discriminator_loss`, `generator_loss` ("hinge" as Vocos, or "lsgan" as HiFi-GAN),
  * `feature_matching_loss`: L1 between the discriminator feature maps of real and generated audio.

All waveforms are `(B, samples)` float at the config's sample rate; every loss returns a scalar.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from vocoder.config import VocoderConfig
from vocoder.mel import MelSpectrogram

DEFAULT_RESOLUTIONS = ((512, 128, 512), (1024, 256, 1024), (2048, 512, 2048))
"""(n_fft, hop, win) triples, in samples."""


def _check_pair(pred: Tensor, target: Tensor) -> None:
    if pred.shape != target.shape or pred.dim() != 2:
        raise ValueError(
            f"expected pred and target of the same (B, samples) shape, got "
            f"{tuple(pred.shape)} and {tuple(target.shape)}"
        )


class MultiResolutionSTFTLoss(nn.Module):
    """mean over resolutions of ||S_t| - |S_p||_F / ||S_t||_F + mean|log|S_t| - log|S_p||."""

    def __init__(self, resolutions: Sequence[tuple[int, int, int]] = DEFAULT_RESOLUTIONS, eps: float = 1e-7):
        super().__init__()
        self.resolutions = tuple(tuple(r) for r in resolutions)
        self.eps = eps
        for i, (_, _, win) in enumerate(self.resolutions):
            self.register_buffer(f"window{i}", torch.hann_window(win), persistent=False)

    def _magnitude(self, wav: Tensor, i: int) -> Tensor:
        n_fft, hop, win = self.resolutions[i]
        spec = torch.stft(
            wav,
            n_fft,
            hop_length=hop,
            win_length=win,
            window=getattr(self, f"window{i}"),
            center=True,
            return_complex=True,
        )
        return spec.abs().clamp(min=self.eps)

    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        _check_pair(pred, target)
        total = pred.new_zeros(())
        for i in range(len(self.resolutions)):
            p, t = self._magnitude(pred.float(), i), self._magnitude(target.float(), i)
            convergence = torch.linalg.norm(t - p) / torch.linalg.norm(t).clamp(min=self.eps)
            log_mag = (torch.log(t) - torch.log(p)).abs().mean()
            total = total + convergence + log_mag
        return total / len(self.resolutions)


class MelLoss(nn.Module):
    """mean |log-mel(target) - log-mel(pred)| with the vocoder's own analysis (`vocoder/mel.py`)."""

    def __init__(self, config: VocoderConfig):
        super().__init__()
        self.mel = MelSpectrogram(config)

    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        _check_pair(pred, target)
        return (self.mel(pred) - self.mel(target)).abs().mean()


def discriminator_loss(real: Sequence[Tensor], fake: Sequence[Tensor], kind: str = "hinge") -> Tensor:
    """Sum over sub-discriminators of the loss on logits of real and (detached) generated audio."""
    total = real[0].new_zeros(())
    for r, f in zip(real, fake, strict=True):
        if kind == "hinge":
            total = total + torch.relu(1 - r).mean() + torch.relu(1 + f).mean()
        elif kind == "lsgan":
            total = total + ((1 - r) ** 2).mean() + (f**2).mean()
        else:
            raise ValueError(f"kind must be 'hinge' or 'lsgan', got {kind!r}")
    return total


def generator_loss(fake: Sequence[Tensor], kind: str = "hinge") -> Tensor:
    """Sum over sub-discriminators of the generator's adversarial loss on its logits."""
    total = fake[0].new_zeros(())
    for f in fake:
        if kind == "hinge":
            total = total + torch.relu(1 - f).mean()
        elif kind == "lsgan":
            total = total + ((1 - f) ** 2).mean()
        else:
            raise ValueError(f"kind must be 'hinge' or 'lsgan', got {kind!r}")
    return total


def feature_matching_loss(real_fmaps: Sequence[Sequence[Tensor]], fake_fmaps: Sequence[Sequence[Tensor]]) -> Tensor:
    """Sum over sub-discriminators of the mean L1 between real (detached) and fake feature maps."""
    total = fake_fmaps[0][0].new_zeros(())
    for real_maps, fake_maps in zip(real_fmaps, fake_fmaps, strict=True):
        per_disc = [(r.detach() - f).abs().mean() for r, f in zip(real_maps, fake_maps, strict=True)]
        total = total + torch.stack(per_disc).mean()
    return total
