"""GAN discriminators: for vocoder training (HiFi-GAN's multi-period, UnivNet/Vocos multi-resolution) on
waveforms, and for the acoustic model (`MelDiscriminator`) on windows of log-mel frames.

Each discriminator maps its input (waveforms `(B, samples)`, or mel windows `(B, frames, n_mels)`) to
`(logits, feature_maps)`: one logit tensor per sub-discriminator and, for each, the list of its
intermediate activations (for `training.vocoder_losses.feature_matching_loss`). `channels` scales the width: HiFi-GAN's MPD uses
`(32, 128, 512, 1024, 1024)`; smaller values train faster for small vocoders.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

_SLOPE = 0.1
Output = tuple[list[Tensor], list[list[Tensor]]]


def _conv_stack(convs: nn.ModuleList, post: nn.Module, x: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Every discriminator's body: convs with leaky ReLU, then `post`; -> (flattened logits, each layer's
    output as a feature map)."""
    fmaps = []
    for conv in convs:
        x = nn.functional.leaky_relu(conv(x), _SLOPE)
        fmaps.append(x)
    x = post(x)
    fmaps.append(x)
    return x.flatten(1), fmaps


class PeriodDiscriminator(nn.Module):
    """Folds the waveform into `(samples / period, period)` and runs 2-D convs along time."""

    def __init__(self, period: int, channels: Sequence[int] = (32, 128, 512, 1024, 1024)):
        super().__init__()
        self.period = period
        chans = [1, *channels]
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(c_in, c_out, (5, 1), (3, 1) if i < len(channels) - 1 else 1, padding=(2, 0)))
            for i, (c_in, c_out) in enumerate(zip(chans[:-1], chans[1:]))
        )
        self.post = weight_norm(nn.Conv2d(chans[-1], 1, (3, 1), padding=(1, 0)))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        b, t = wav.shape
        if t % self.period:
            wav = nn.functional.pad(wav.unsqueeze(1), (0, self.period - t % self.period), mode="reflect").squeeze(1)
        x = wav.view(b, 1, -1, self.period)
        return _conv_stack(self.convs, self.post, x)


class MultiPeriodDiscriminator(nn.Module):
    def __init__(self, periods: Sequence[int] = (2, 3, 5, 7, 11), channels: Sequence[int] = (32, 128, 512, 1024, 1024)):
        super().__init__()
        self.discriminators = nn.ModuleList(PeriodDiscriminator(p, channels) for p in periods)

    def forward(self, wav: Tensor) -> Output:
        outs = [d(wav) for d in self.discriminators]
        return [o[0] for o in outs], [o[1] for o in outs]


class ResolutionDiscriminator(nn.Module):
    """2-D convs over one STFT magnitude `(B, 1, frames, n_fft / 2 + 1)`, strided along frequency."""

    window: Tensor  # buffer, registered in __init__

    def __init__(self, n_fft: int, hop_length: int, win_length: int, channels: int = 32):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(win_length), persistent=False)
        self.convs = nn.ModuleList(
            [
                weight_norm(nn.Conv2d(1, channels, (7, 5), padding=(3, 2))),
                weight_norm(nn.Conv2d(channels, channels, (5, 3), (1, 2), padding=(2, 1))),
                weight_norm(nn.Conv2d(channels, channels, (5, 3), (1, 2), padding=(2, 1))),
                weight_norm(nn.Conv2d(channels, channels, (5, 3), (1, 2), padding=(2, 1))),
                weight_norm(nn.Conv2d(channels, channels, (3, 3), padding=(1, 1))),
            ]
        )
        self.post = weight_norm(nn.Conv2d(channels, 1, (3, 3), padding=(1, 1)))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        spec = torch.stft(
            wav.float(),
            self.n_fft,
            hop_length=self.hop_length,
            win_length=self.window.shape[0],
            window=self.window,
            center=True,
            return_complex=True,
        )
        x = spec.abs().transpose(1, 2).unsqueeze(1)
        return _conv_stack(self.convs, self.post, x)


class MultiResolutionDiscriminator(nn.Module):
    def __init__(
        self,
        resolutions: Sequence[tuple[int, int, int]] = ((1024, 256, 1024), (2048, 512, 2048), (512, 128, 512)),
        channels: int = 32,
    ):
        super().__init__()
        self.discriminators = nn.ModuleList(ResolutionDiscriminator(n, h, w, channels) for n, h, w in resolutions)

    def forward(self, wav: Tensor) -> Output:
        outs = [d(wav) for d in self.discriminators]
        return [o[0] for o in outs], [o[1] for o in outs]


class MelDiscriminator(nn.Module):
    """Windows of log-mel frames `(B, frames, n_mels)` -> patch logits, as one sub-discriminator.

    2-D convolutions over (time, mel bin), strided along the bins and then along time, so each logit judges a
    patch of spectro-temporal texture (how the frames move and how sharp the harmonics are), which an L1 loss
    averages away. For the acoustic model's adversarial loss (`training/train_acoustic.py --adv-weight`).
    """

    def __init__(self, channels: Sequence[int] = (32, 64, 128, 128)):
        super().__init__()
        chans = [1, *channels]
        strides = [(1, 2), (1, 2), (2, 2)] + [(1, 1)] * (len(channels) - 3)
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(c_in, c_out, (3, 9) if i < 3 else (3, 3), strides[i], padding=(1, 4 if i < 3 else 1)))
            for i, (c_in, c_out) in enumerate(zip(chans[:-1], chans[1:]))
        )
        self.post = weight_norm(nn.Conv2d(chans[-1], 1, (3, 3), padding=(1, 1)))

    def forward(self, mel: Tensor) -> Output:
        logits, fmaps = _conv_stack(self.convs, self.post, mel.unsqueeze(1))
        return [logits], [fmaps]
