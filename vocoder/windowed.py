"""`WindowedStepVocoder`: a streaming vocoder of engine steps for a network without streaming state.

`StepVocoder` streams our voices' vocoder exactly because its convs are causal and keep caches. A
non-causal network (HiFi-GAN, vocoder/hifigan.py) whose output at frame t depends only on the mel frames
`t - left .. t + right` (its `reach()`) streams instead on overlapping windows: each utterance keeps its
last `left` vocoded frames as context, and a pass runs the network over context + new frames and keeps
the samples of the frames that have `lookahead` frames after them. With `lookahead` = the network's right
reach (the default) the samples equal the offline output exactly; a smaller lookahead trades exactness
for latency (`benchmarks/hifigan_streaming.py` measures the SNR). Each pass recomputes the context:
(left + chunk + lookahead) / chunk times the offline work.

The per-slot state is `StepVocoder`'s arrays (frames received, samples emitted), one device buffer
`(slots, W, n_mels)` holding each utterance's frames from `base[slot]` on (silence past its fill level),
and the same chunk schedule: first chunk after `first_chunk_frames` frames with their lookahead, then as
many frames as already sent up to `chunk_frames`; finishing utterances at once, `eager` ones once they
have `first_chunk_frames` new frames (not every step: each pass recomputes the context). The last
chunk of an utterance is followed by silence, as `HifiGan.forward` pads it offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import FrameShapeError, VocoderConfigError
from vocoder.hifigan import HifiGan
from vocoder.step_vocoder import StepPass, int16_to_host


class WindowedStepVocoder:
    """The mel of many utterances, one engine step at a time, in; PCM out (`StepVocoding`)."""

    def __init__(
        self,
        network: HifiGan,
        *,
        chunk_frames: int = 32,
        first_chunk_frames: int = 8,
        device: str | torch.device = "cpu",
        capacity: int = 8,
        lookahead: int | None = None,
    ):
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise VocoderConfigError(f"chunk_frames ({chunk_frames}) and first_chunk_frames must be >= 1")
        self.left, self.right = network.reach()
        self.lookahead = self.right if lookahead is None else lookahead
        if not 0 <= self.lookahead <= self.right:
            raise VocoderConfigError(f"lookahead must be in [0, {self.right}] frames, got {lookahead}")
        self.device = torch.device(device)
        self._cuda_stream: torch.cuda.Stream | None = None
        if self.device.type == "cuda":
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self._cuda_stream = torch.cuda.Stream(self.device)
        self.network = network.to(self.device).eval()
        self.config = network.config
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        # An eager (urgent) utterance still waits for this many new frames: every pass recomputes
        # left + right frames of context, so passes of one 4-frame step would cost (14 + 4 + 13) / 4 =
        # 7.8x the offline work, and a vocoder that falls behind would fall further behind.
        self.eager_frames = min(first_chunk_frames, chunk_frames)
        self._hop, self._silence = self.config.hop_length, self.config.silence
        n = max(1, capacity)
        # Per slot: frames received, samples returned, first frame held in the buffer.
        self.received, self.emitted = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.base = np.zeros(n, np.int64)
        self.is_open = np.zeros(n, bool)
        self._width = self.left + chunk_frames + self.right + 8
        self._frames = self._silent(n, self._width)

    @property
    def capacity(self) -> int:
        return len(self.received)

    @property
    def lag_samples(self) -> int:
        """Samples of received mel held back until their lookahead frames arrive."""
        return self.lookahead * self._hop

    def capture_graphs(self, max_utterances: int) -> int:
        return 0  # no CUDA graphs for this path (yet)

    def open(self) -> int:
        """A new utterance; returns its slot (the lowest free one)."""
        free = np.flatnonzero(~self.is_open)
        if not len(free):
            self._grow(2 * self.capacity)
            free = np.flatnonzero(~self.is_open)
        slot = int(free[0])
        with self._on_cuda_stream():
            self._frames[slot].fill_(self._silence)
        self.received[slot] = self.emitted[slot] = self.base[slot] = 0
        self.is_open[slot] = True
        return slot

    def close(self, slot: int) -> None:
        if not self.is_open[slot]:
            raise ValueError(f"slot {slot} is not open")
        self.is_open[slot] = False

    def submit(
        self,
        mel: Tensor | None = None,
        slots: np.ndarray | None = None,
        rows: np.ndarray | None = None,
        *,
        host: Mapping[int, np.ndarray] | None = None,
        finish: np.ndarray | None = None,
        eager: np.ndarray | None = None,
    ) -> StepPass:
        """As `StepVocoder.submit`: queue this step's frames (row `rows[i]` of `mel (R, k, n_mels)` for
        slot `slots[i]`; `host` frames per slot), vocode every ready utterance in one pass, close `finish`."""
        n_slots = self.capacity
        slots = np.asarray(slots if slots is not None else (), np.int64)
        rows = np.asarray(rows if rows is not None else (), np.int64)
        finish = np.asarray(finish if finish is not None else (), np.int64)
        host = {s: f for s, f in (host or {}).items() if len(f)}
        touched = np.zeros(n_slots, bool)
        for group in (slots, finish, np.fromiter(host, np.int64, len(host))):
            if len(group) and not self.is_open[group].all():
                raise ValueError(f"slots {group[~self.is_open[group]].tolist()} are not open")
            touched[group] = True
        fin = np.zeros(n_slots, bool)
        fin[finish] = True
        with self._on_cuda_stream(), torch.inference_mode():
            if self._cuda_stream is not None:
                self._cuda_stream.wait_stream(torch.cuda.current_stream(self.device))
            if mel is not None and len(slots):
                self._queue_step(mel, slots, rows)
            for slot, frames in host.items():
                self._queue_host(slot, frames)
            done = self.emitted // self._hop
            new = self.received - self.lookahead - done  # frames that have their lookahead
            needed = np.minimum(self.chunk_frames, np.maximum(self.first_chunk_frames, done))
            ready_mask = touched & (
                (fin & (self.received * self._hop > self.emitted))
                | (new >= needed)
                | ((eager if eager is not None else False) & (self.emitted > 0) & (new >= self.eager_frames))
            )
            ready = np.flatnonzero(ready_mask)
            result = self._run(ready, fin[ready]) if len(ready) else None
        closing = np.flatnonzero(fin & ~ready_mask)
        for slot in finish:
            self.close(int(slot))
        none = np.zeros(len(closing), np.int64)
        if result is None:
            return StepPass(closing, none - 1, none, none, np.ones(len(closing), bool))
        audio, event, lo, hi = result
        return StepPass(
            np.concatenate([ready, closing]),
            np.concatenate([np.arange(len(ready)), none - 1]),
            np.concatenate([lo, none]),
            np.concatenate([hi, none]),
            np.concatenate([fin[ready], np.ones(len(closing), bool)]),
            audio,
            event,
        )

    # --- internals ---
    def _on_cuda_stream(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self._cuda_stream) if self._cuda_stream is not None else nullcontext()

    def _silent(self, n: int, width: int) -> Tensor:
        return torch.full((n, width, self.config.n_mels), self._silence, dtype=torch.float32, device=self.device)

    def _grow(self, n: int) -> None:
        old = self.capacity
        for name in ("received", "emitted", "base", "is_open"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros(n - old, a.dtype)]))
        with self._on_cuda_stream():
            frames = self._silent(n, self._width)
            frames[:old].copy_(self._frames)
            self._frames = frames

    def _fit(self, width: int) -> None:
        if width > self._width:
            grown = self._silent(self.capacity, width)
            grown[:, : self._width].copy_(self._frames)
            self._frames, self._width = grown, width

    def _to_device(self, a: np.ndarray) -> Tensor:
        t = torch.from_numpy(a)
        return t.pin_memory().to(self.device, non_blocking=True) if self._cuda_stream is not None else t

    def _queue_step(self, mel: Tensor, slots: np.ndarray, rows: np.ndarray) -> None:
        n_mels = self.config.n_mels
        if mel.dim() != 3 or mel.shape[2] != n_mels or not mel.is_floating_point():
            raise FrameShapeError(f"step frames must be floating point (R, k, {n_mels}), got {tuple(mel.shape)}")
        if mel.device.type != self.device.type:
            raise FrameShapeError(f"step frames on {mel.device}, vocoder on {self.device}")
        k = mel.shape[1]
        at = self.received[slots] - self.base[slots]
        self._fit(int(at.max()) + k + self.right)
        steps = np.arange(k)
        src = (rows[:, None] * k + steps).ravel()
        dest = ((slots * self._width + at)[:, None] + steps).ravel()
        index = self._to_device(np.stack([src, dest]))
        frames = mel.detach().reshape(-1, n_mels).index_select(0, index[0]).float()
        self._frames.view(-1, n_mels).index_copy_(0, index[1], frames)
        if self._cuda_stream is not None:
            mel.record_stream(self._cuda_stream)
        self.received[slots] += k

    def _queue_host(self, slot: int, frames: np.ndarray) -> None:
        if frames.ndim != 2 or frames.shape[1] != self.config.n_mels:
            raise FrameShapeError(f"slot {slot}: frames must be (m, {self.config.n_mels}), got {frames.shape}")
        m, at = frames.shape[0], int(self.received[slot] - self.base[slot])
        self._fit(at + m + self.right)
        self._frames[slot, at : at + m].copy_(self._to_device(np.ascontiguousarray(frames, np.float32)))
        self.received[slot] += m

    def _run(
        self, ready: np.ndarray, fin: np.ndarray
    ) -> tuple[Tensor, torch.cuda.Event | None, np.ndarray, np.ndarray]:
        hop = self._hop
        received, base = self.received[ready], self.base[ready]
        fill = received - base
        n = int((fill + self.right * fin).max())  # a last chunk reads `right` frames of silence after it
        index = self._to_device(ready)
        batch = self._frames.index_select(0, index)[:, :n]
        wave = self.network.generate(batch.transpose(1, 2))
        end = np.where(fin, received * hop, (received - self.lookahead) * hop)
        end = np.maximum(end, self.emitted[ready])
        lo, hi = self.emitted[ready] - base * hop, end - base * hop
        self.emitted[ready] = end
        # Keep `left` frames of context before the next sample to send: shift each row's frames down.
        new_base = np.maximum(0, end // hop - self.left)
        shift = self._to_device(np.stack([new_base - base, received - new_base]))
        positions = torch.arange(self._width, device=self.device).view(1, -1)
        src = (positions + shift[0].view(-1, 1)).clamp(max=self._width - 1)
        rows = self._frames.index_select(0, index)
        moved = rows.gather(1, src.unsqueeze(-1).expand(-1, -1, rows.shape[-1]))
        moved = torch.where((positions < shift[1].view(-1, 1)).unsqueeze(-1), moved, self._silence)
        self._frames.index_copy_(0, index, moved)
        self.base[ready] = new_base
        audio, event = int16_to_host(wave[:, : int(hi.max())], self._cuda_stream)
        return audio, event, lo, hi
