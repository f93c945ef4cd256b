"""`Vocoder`: log-mel `(B, n_mels, T)` -> PCM `(B, T * hop)` at `sample_rate` Hz, float32 in ~[-1, 1].

A Vocos-style generator: input conv over mel frames -> LayerNorm -> `num_layers` ConvNeXt blocks ->
LayerNorm -> linear ISTFT head (magnitude + phase per frame) -> overlap-add. Every conv is causal
except the input conv, which reads `lookahead` (<= 2) future frames, so an utterance can be vocoded
chunk by chunk with bounded latency and bit-for-bit the same arithmetic as offline
(`vocoder/streaming.py`; `tests/vocoder/test_streaming.py` checks it).

Directory layout (`docs/model-format.md`): `config.json` (`VocoderConfig`) + `model.safetensors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from vocoder.config import CONFIG_NAME, VocoderConfig
from vocoder.errors import VocoderCheckpointError
from vocoder.istft import ISTFTHead
from vocoder.layers import CausalConv1d, ConvNeXtBlock

WEIGHTS_NAME = "model.safetensors"


class Vocoder(nn.Module):
    def __init__(self, config: VocoderConfig):
        super().__init__()
        self.config = config
        c = config
        layer_scale = c.layer_scale_init if c.layer_scale_init is not None else 1.0 / c.num_layers
        self.embed = CausalConv1d(c.n_mels, c.dim, c.kernel_size, lookahead=c.lookahead)
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.blocks = nn.ModuleList(
            ConvNeXtBlock(c.dim, c.intermediate_dim, c.kernel_size, layer_scale) for _ in range(c.num_layers)
        )
        self.final_norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.head = ISTFTHead(
            c.dim,
            c.n_fft,
            c.hop_length,
            c.win_length,
            c.mag_clip,
            c.output_gain,
            zero_dc_bin=c.zero_dc_bin,
            zero_nyquist_bin=c.zero_nyquist_bin,
        )
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Conv1d, nn.Linear)):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:  # every layer here has one
                nn.init.zeros_(module.bias)

    def _blocks(self) -> Iterator[ConvNeXtBlock]:
        """`blocks` as what they are (nn.ModuleList iterates as plain Modules)."""
        return cast(Iterator[ConvNeXtBlock], iter(self.blocks))

    # --- offline ---
    def hidden(self, mel: Tensor) -> Tensor:
        """Backbone: `(B, n_mels, T)` log-mel -> `(B, dim, T)` hidden frames."""
        x: Tensor = self.embed(mel.to(self.embed.weight.dtype))
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in self._blocks():
            x = block(x)
        h: Tensor = self.final_norm(x.transpose(1, 2))
        return h.transpose(1, 2)

    def forward(self, mel: Tensor) -> Tensor:
        """`(B, n_mels, T)` natural-log mel -> `(B, T * hop_length)` float32 waveform."""
        if mel.dim() != 3 or mel.shape[1] != self.config.n_mels:
            raise ValueError(f"expected mel of shape (B, {self.config.n_mels}, T), got {tuple(mel.shape)}")
        if mel.shape[-1] == 0:
            return mel.new_zeros(mel.shape[0], 0, dtype=torch.float32)
        wave: Tensor = self.head(self.hidden(mel))
        return wave

    # --- streaming (used by vocoder/streaming.py) ---
    def cache_shapes(self) -> list[tuple[int, int]]:
        """`(channels, frames)` of each per-utterance conv cache, in `forward_chunk` order."""
        shapes = [(self.config.n_mels, self.embed.context)]
        shapes += [(self.config.dim, block.dwconv.context) for block in self._blocks()]
        return shapes

    def forward_chunk(
        self, mel: Tensor, caches: list[Tensor], lengths: Tensor, valid: Tensor
    ) -> tuple[Tensor, list[Tensor]]:
        """One chunk of several utterances through the backbone and head, up to (excluding) overlap-add.

        Args:
            mel: `(B, n_mels, N)` new log-mel frames, row b valid up to `lengths[b]`.
            caches: per-layer `(B, C, kernel_size - 1)` input frames of the previous chunk.
            lengths: `(B,)` int64 frames fed per row.
            valid: `(B, N)` bool, True where output j of row b is a real spectral frame, i.e.
                `j < lengths[b]` and `consumed_b + j >= lookahead` (`consumed_b` = frames the
                utterance fed before). The input conv lags `lookahead` frames, so an utterance's first
                `lookahead` outputs stand for frames before the start: zeroing them (and padding)
                at every layer reproduces the offline zero padding of the causal convs.
        Returns:
            windowed frames `(B, n_fft, N)`, output j of row b being spectral frame
            `consumed_b + j - lookahead`, and the new caches.
        """
        new_caches = []
        x, cache = self.embed.step(mel.to(self.embed.weight.dtype), caches[0], lengths)
        new_caches.append(cache)
        keep = valid.unsqueeze(1).to(x.dtype)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2) * keep
        for block, cache in zip(self._blocks(), caches[1:]):
            x, cache = block.step(x, cache, lengths)
            x = x * keep
            new_caches.append(cache)
        x = self.final_norm(x.transpose(1, 2)).transpose(1, 2)
        return self.head.frames(x), new_caches

    # --- construction and persistence ---
    @classmethod
    def random(cls, config: VocoderConfig | None = None, seed: int = 0) -> Vocoder:
        """Deterministic random weights (for tests and dev servers); eval mode, float32, CPU."""
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            model = cls(config or VocoderConfig())
        finally:
            torch.random.set_rng_state(generator_state)
        return model.eval()

    @classmethod
    def from_dir(
        cls, path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ) -> Vocoder:
        """Load `path/config.json` + `path/model.safetensors`; eval mode on `device`."""
        path = Path(path)
        config = VocoderConfig.load(path / CONFIG_NAME)
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise VocoderCheckpointError(f"no vocoder weights at {weights}")
        model = cls(config)
        state = load_file(str(weights))
        expected = model.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        wrong = [
            f"{k} {tuple(v.shape)} != {tuple(expected[k].shape)}"
            for k, v in state.items()
            if k in expected and v.shape != expected[k].shape
        ]
        if missing or unexpected or wrong:
            raise VocoderCheckpointError(
                f"{weights} does not match {path / CONFIG_NAME}: missing {missing}, "
                f"unexpected {unexpected}, wrong shapes {wrong}"
            )
        model.load_state_dict(state)
        return model.to(device=device, dtype=dtype).eval()

    def save(self, directory: str | Path) -> Path:
        """Write `config.json` and `model.safetensors` (float32) into `directory`; returns it."""
        directory = Path(directory)
        self.config.save(directory)
        state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
        return directory

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
