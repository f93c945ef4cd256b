"""Streamable building blocks of the vocoder backbone.

Every layer has two entry points that compute the same function:

* `forward(x)`: offline, over a whole `(B, C, T)` sequence, zero-padded at both ends.
* `step(x, cache, lengths)`: one chunk of an utterance, given the last `kernel_size - 1` input frames
  of the previous chunk (`cache`, zeros at the start). Rows of a batch may hold different numbers
  of valid frames (`lengths`); frames past a row's length are padding and only ever influence
  outputs past that length, because every conv here is causal in `step`. The returned cache is
  taken at each row's own length, so padding never leaks into the next chunk.

`CausalConv1d` with `lookahead = L > 0` reads L future frames offline. In `step` it is run purely
causally, so its outputs lag L frames behind its inputs; `Vocoder.forward_chunk` zeroes the first L
outputs of an utterance and the streaming wrapper feeds L zero frames at its end to realign (identical to
offline zero padding).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _update_cache(padded: Tensor, lengths: Tensor, size: int) -> Tensor:
    """`padded[b, :, lengths[b] : lengths[b] + size]` for every row b: `(B, C, size)`."""
    if size == 0:
        return padded[..., :0]
    idx = lengths.view(-1, 1) + torch.arange(size, device=padded.device).view(1, -1)
    return padded.gather(-1, idx.unsqueeze(1).expand(-1, padded.shape[1], -1))


class CausalConv1d(nn.Conv1d):
    """Conv1d over frames reading `kernel_size - 1 - lookahead` past and `lookahead` future frames.

    `(B, C_in, T) -> (B, C_out, T)`; `groups=C` gives the depthwise conv of a ConvNeXt block.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, lookahead: int = 0, groups: int = 1):
        super().__init__(in_channels, out_channels, kernel_size, groups=groups)
        if not 0 <= lookahead < kernel_size:
            raise ValueError(f"lookahead must be in [0, {kernel_size}), got {lookahead}")
        self.lookahead = lookahead

    @property
    def context(self) -> int:
        """Input frames kept between chunks, `kernel_size - 1`."""
        return self.kernel_size[0] - 1

    def forward(self, x: Tensor) -> Tensor:
        x = nn.functional.pad(x, (self.context - self.lookahead, self.lookahead))
        return super().forward(x)

    def step(self, x: Tensor, cache: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Causal chunk: `x (B, C_in, N)`, `cache (B, C_in, context)` -> `(B, C_out, N)`, new cache.

        Output `j` of row b is the offline output for the input frame `lookahead` frames earlier.
        """
        padded = torch.cat([cache, x], dim=-1)
        return super().forward(padded), _update_cache(padded, lengths, self.context)


class ConvNeXtBlock(nn.Module):
    """ConvNeXt block over frames with a causal depthwise conv: `(B, dim, T) -> (B, dim, T)`.

    x + gamma * W2 gelu(W1 LayerNorm(dwconv(x))), the pointwise part applied per frame.
    """

    def __init__(self, dim: int, intermediate_dim: int, kernel_size: int, layer_scale: float):
        super().__init__()
        self.dwconv = CausalConv1d(dim, dim, kernel_size, lookahead=0, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), float(layer_scale)))

    def _pointwise(self, residual: Tensor, h: Tensor) -> Tensor:
        h = self.norm(h.transpose(1, 2))
        h = self.pwconv2(self.act(self.pwconv1(h)))
        return residual + (self.gamma * h).transpose(1, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self._pointwise(x, self.dwconv(x))

    def step(self, x: Tensor, cache: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Chunk of `x (B, dim, N)` with `cache (B, dim, kernel_size - 1)`; see module docstring."""
        h, cache = self.dwconv.step(x, cache, lengths)
        return self._pointwise(x, h), cache
