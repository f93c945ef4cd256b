"""ISTFT head: per-frame magnitude and phase -> waveform by windowed overlap-add with 'same' padding.

Why not `torch.istft`: it supports only `center=True` framing, whose frame count is
`samples // hop + 1`. Our mel frames use 'same' framing (see `vocoder/mel.py`): frame `t` covers
samples `[t * hop - pad, t * hop - pad + n_fft)` with `pad = (n_fft - hop) / 2`, so `T` frames
overlap-add to `(T - 1) * hop + n_fft` samples of which we keep `[pad, pad + T * hop)`, exactly
`T * hop` samples aligned with the mel analysis. Writing the overlap-add ourselves also lets the
streaming path carry the un-finished `n_fft - hop` tail between chunks (`overlap_add_step`).

The normalisation divides by the overlap-added squared window (the "envelope"), computed by the
same overlap-add as the signal, so edges (fewer overlapping frames) are handled identically offline
and streaming.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vocoder.mel import hann_window

_ENVELOPE_FLOOR = 1e-11
"""Only guards padded, never-emitted positions; emitted samples always have envelope >= w(pad)^2."""


class ISTFTHead(nn.Module):
    """Hidden frames `(B, dim, T)` -> waveform `(B, T * hop)` via predicted log-magnitude and phase.

    A linear layer predicts `n_fft + 2` values per frame: `n_fft / 2 + 1` log-magnitudes (exp'd and
    clipped at `mag_clip`, then scaled by `gain`; with `zero_dc_bin` / `zero_nyquist_bin` those set to 0)
    and as many phases (radians, used through cos/sin so no wrapping issue).
    """

    window: Tensor  # buffers, registered in __init__
    window_sq: Tensor

    def __init__(
        self,
        dim: int,
        n_fft: int,
        hop_length: int,
        win_length: int,
        mag_clip: float,
        gain: float = 1.0,
        *,
        zero_dc_bin: bool = False,
        zero_nyquist_bin: bool = False,
    ):
        super().__init__()
        self.n_fft, self.hop_length, self.mag_clip, self.gain = n_fft, hop_length, mag_clip, gain
        # per bin: 0 where `VocoderConfig.zero_dc_bin` / `zero_nyquist_bin` zero it; None when none is
        keep = torch.ones(n_fft // 2 + 1, 1)
        keep[0], keep[-1] = float(not zero_dc_bin), float(not zero_nyquist_bin)
        self.keep: Tensor | None
        self.register_buffer("keep", keep if (zero_dc_bin or zero_nyquist_bin) else None, persistent=False)
        self.pad = (n_fft - hop_length) // 2
        self.out = nn.Linear(dim, n_fft + 2)
        window = hann_window(win_length, n_fft)
        self.register_buffer("window", window, persistent=False)
        self.register_buffer("window_sq", window.square(), persistent=False)

    def frames(self, h: Tensor) -> Tensor:
        """`(B, dim, N)` -> windowed time-domain frames `(B, n_fft, N)` (one per mel frame)."""
        x: Tensor = self.out(h.transpose(1, 2)).transpose(1, 2)
        log_mag, phase = x.float().chunk(2, dim=1)
        mag = torch.exp(log_mag).clamp(max=self.mag_clip)
        if self.gain != 1.0:  # the waveform's scale (`VocoderConfig.output_gain`)
            mag = mag * self.gain
        if self.keep is not None:  # the DC and/or Nyquist bin zeroed
            mag = mag * self.keep
        spec = torch.complex(mag * torch.cos(phase), mag * torch.sin(phase))
        frames: Tensor = torch.fft.irfft(spec, n=self.n_fft, dim=1)
        return frames * self.window.float()[None, :, None]

    def _fold(self, frames: Tensor, n: int) -> Tensor:
        b = frames.shape[0]
        length = (n - 1) * self.hop_length + self.n_fft
        out = nn.functional.fold(
            frames, output_size=(1, length), kernel_size=(1, self.n_fft), stride=(1, self.hop_length)
        )
        return out.view(b, -1, length)

    def overlap_add(self, frames: Tensor) -> Tensor:
        """Offline: frames `(B, n_fft, T)` -> waveform `(B, T * hop)`, float32."""
        b, _, t = frames.shape
        signal = self._fold(frames, t)[:, 0]
        env = self._fold(self.window_sq.float()[None, :, None].expand(1, -1, t), t)[0, 0]
        keep = slice(self.pad, self.pad + t * self.hop_length)
        return signal[:, keep] / env[keep].clamp(min=_ENVELOPE_FLOOR)

    def forward(self, h: Tensor) -> Tensor:
        return self.overlap_add(self.frames(h))

    def overlap_add_step(self, frames: Tensor, valid: Tensor, tail: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Streaming overlap-add of one chunk.

        Args:
            frames: `(B, n_fft, N)` windowed frames; frame j of row b lands at local sample `j * hop`.
            valid: `(B, N)` 1.0 for real frames, 0.0 for padding and for the frames an utterance
                drops before its first real one (conv lookahead).
            tail: `(B, 2, n_fft - hop)` [signal, envelope] overlap-added so far at local samples
                `[0, n_fft - hop)` (zeros for a new utterance).
            lengths: `(B,)` frames consumed by each row this chunk; row b's samples before
                `lengths[b] * hop` are final after this call.
        Returns:
            waveform `(B, N * hop + n_fft - hop)` (signal / envelope; meaningful only on final
            samples) and the new tail `(B, 2, n_fft - hop)` starting at `lengths[b] * hop`.
        """
        b, _, n = frames.shape
        overlap = self.n_fft - self.hop_length
        valid = valid.to(torch.float32).unsqueeze(1)
        stacked = torch.cat([frames * valid, self.window_sq.float()[None, :, None] * valid], dim=1)
        out = self._fold(stacked, n)
        out[..., :overlap] += tail
        idx = lengths.view(-1, 1) * self.hop_length + torch.arange(overlap, device=out.device)
        new_tail = out.gather(-1, idx.unsqueeze(1).expand(-1, 2, -1))
        return out[:, 0] / out[:, 1].clamp(min=_ENVELOPE_FLOOR), new_tail
