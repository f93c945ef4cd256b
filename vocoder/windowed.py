"""`WindowedStepVocoder`: a streaming vocoder of engine steps for a network without streaming state.

`StepVocoder` streams our voices' vocoder exactly because its convs are causal and keep caches. A
non-causal network (HiFi-GAN, vocoder/hifigan.py) whose output at frame t depends only on the mel frames
`t - left .. t + right` (its `reach()`) streams instead on overlapping windows: each utterance keeps its
last `left` vocoded frames as context, and a pass runs the network over context + new frames and keeps
the samples of the frames that have `lookahead` frames after them. With `lookahead` = the network's right
reach (the default) the samples equal the offline output exactly; a smaller lookahead trades exactness
for latency (`benchmarks/hifigan_streaming.py` measures the SNR). Each pass recomputes the context:
(left + chunk + lookahead) / chunk times the offline work.

Slots, their arrays, the device buffer and `submit` are `SlotFrames`' (vocoder/slot_frames.py, shared with
`StepVocoder`); here the buffer holds each utterance's frames from `base[slot]` on (silence past its fill
level), and the chunk schedule is `StepVocoder`'s: first chunk after `first_chunk_frames` frames with their lookahead, then as
many frames as already sent up to `chunk_frames`; finishing utterances at once, `eager` ones once they
have `first_chunk_frames` new frames (not every step: each pass recomputes the context). The last
chunk of an utterance is followed by silence, as `HifiGan.forward` pads it offline.
"""

from __future__ import annotations

import numpy as np
import torch

from vocoder.errors import VocoderConfigError
from vocoder.hifigan import HifiGan
from vocoder.slot_frames import PassResult, SlotFrames, int16_to_host


class WindowedStepVocoder(SlotFrames):
    """The mel of many utterances, one engine step at a time, in; PCM out (see the module docstring)."""

    # Per slot: frames received, samples returned, first frame held in the buffer.
    COUNTERS = ("received", "emitted", "base")
    base: np.ndarray

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
        self.left, self.right = network.reach()
        self.lookahead = self.right if lookahead is None else lookahead
        if not 0 <= self.lookahead <= self.right:
            raise VocoderConfigError(f"lookahead must be in [0, {self.right}] frames, got {lookahead}")
        self.config = c = network.config
        super().__init__(
            c.n_mels,
            chunk_frames=chunk_frames,
            first_chunk_frames=first_chunk_frames,
            device=device,
            capacity=max(1, capacity),
            width=self.left + chunk_frames + self.right + 8,
            spare=self.right,  # a last chunk reads `right` frames of silence after it
            fill=c.silence,
        )
        self.network = network.to(self.device).eval()
        # An eager (urgent) utterance still waits for this many new frames: every pass recomputes
        # left + right frames of context, so passes of one 4-frame step would cost (14 + 4 + 13) / 4 =
        # 7.8x the offline work, and a vocoder that falls behind would fall further behind.
        self.eager_frames = min(first_chunk_frames, chunk_frames)
        self._hop = c.hop_length

    @property
    def lag_samples(self) -> int:
        """Samples of received mel held back until their lookahead frames arrive."""
        return self.lookahead * self._hop

    def open(self) -> int:
        """A new utterance; returns its slot (the lowest free one)."""
        free = np.flatnonzero(~self.is_open)
        if not len(free):
            self._grow(2 * self.capacity)
            free = np.flatnonzero(~self.is_open)
        slot = int(free[0])
        with self._on_cuda_stream():
            self._frames[slot].fill_(self._fill_value)
        for name in self.COUNTERS:
            getattr(self, name)[slot] = 0
        self.is_open[slot] = True
        return slot

    # --- SlotFrames ---
    def _at(self, slots: np.ndarray) -> np.ndarray:
        at: np.ndarray = self.received[slots] - self.base[slots]
        return at

    def _ready(self, fin: np.ndarray, eager: np.ndarray) -> np.ndarray:
        done = self.emitted // self._hop
        new = self.received - self.lookahead - done  # frames that have their lookahead
        needed = np.minimum(self.chunk_frames, np.maximum(self.first_chunk_frames, done))
        ready: np.ndarray = (
            (fin & (self.received * self._hop > self.emitted))
            | (new >= needed)
            | (eager & (self.emitted > 0) & (new >= self.eager_frames))
        )
        return ready

    def _run(self, ready: np.ndarray, fin: np.ndarray) -> PassResult:
        hop = self._hop
        received, base = self.received[ready], self.base[ready]
        fill = received - base
        n = int((fill + self.right * fin).max())  # a last chunk reads `right` frames of silence after it
        index = self._to_device(ready)
        rows = self._frames.index_select(0, index)
        wave = self.network.generate(rows[:, :n].transpose(1, 2))
        end = np.where(fin, received * hop, (received - self.lookahead) * hop)
        end = np.maximum(end, self.emitted[ready])
        lo, hi = self.emitted[ready] - base * hop, end - base * hop
        self.emitted[ready] = end
        # Keep `left` frames of context before the next sample to send: shift each row's frames down.
        new_base = np.maximum(0, end // hop - self.left)
        shift = self._to_device(np.stack([new_base - base, received - new_base]))
        positions = torch.arange(self._width, device=self.device).view(1, -1)
        src = (positions + shift[0].view(-1, 1)).clamp(max=self._width - 1)
        moved = rows.gather(1, src.unsqueeze(-1).expand(-1, -1, rows.shape[-1]))
        moved = torch.where((positions < shift[1].view(-1, 1)).unsqueeze(-1), moved, self._fill_value)
        self._frames.index_copy_(0, index, moved)
        self.base[ready] = new_base
        audio, event = int16_to_host(wave[:, : int(hi.max())], self._cuda_stream)
        return audio, event, lo, hi
