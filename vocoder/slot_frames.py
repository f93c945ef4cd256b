"""`SlotFrames`: what every streaming vocoder of engine steps shares (`StepVocoder`, `WindowedStepVocoder`).

Each utterance is a slot; its counters are numpy arrays indexed by slot; its mel frames not yet vocoded
wait in one device buffer `(slots, width, n_mels)`, positions past each slot's fill level kept at a fill
value (zeros, or silence). A step's frames are written there in one `index_copy_`; `submit` checks the
slots, queues the frames, asks the subclass which utterances are ready (`_ready`), runs one pass over them
(`_run`) and turns the result into a `StepPass`. On CUDA the work is queued on the vocoder's own CUDA
stream, which waits for the caller's. Call from one thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import FrameShapeError, VocoderConfigError
from vocoder.step_result import StepPass

if TYPE_CHECKING:
    from vocoder.config import VocoderConfig
    from vocoder.hifigan import HifiGanConfig

PassResult = tuple[Tensor, "torch.cuda.Event | None", np.ndarray, np.ndarray]
"""`_run`'s int16 audio `(rows, samples)` (host), its CUDA event, and each row's span `lo:hi`."""


class SlotFrames:
    """The slots, their frames and `submit`; a subclass defines its chunk schedule (`_ready`), its pass
    (`_run`), where a slot's next frame goes (`_at`), and `open`."""

    COUNTERS: tuple[str, ...] = ("received", "emitted")
    """Per-slot int64 arrays: frames received, samples returned (subclasses add theirs)."""
    received: np.ndarray
    emitted: np.ndarray
    config: VocoderConfig | HifiGanConfig  # the vocoder's: n_mels, hop_length, sample_rate

    def __init__(
        self,
        n_mels: int,
        *,
        chunk_frames: int,
        first_chunk_frames: int,
        device: str | torch.device,
        capacity: int,
        width: int,
        spare: int,
        fill: float,
    ):
        """`width`: frames per slot in the buffer at first; `spare`: frames kept free past the last queued
        one (a finishing pass reads them); `fill`: the buffer's value past each slot's frames."""
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise VocoderConfigError(f"chunk_frames ({chunk_frames}) and first_chunk_frames must be >= 1")
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self.n_mels = n_mels
        self.device = torch.device(device)
        self._cuda_stream: torch.cuda.Stream | None = None
        if self.device.type == "cuda":
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self._cuda_stream = torch.cuda.Stream(self.device)
        self._spare, self._fill_value, self._width = spare, fill, width
        for name in self.COUNTERS:
            setattr(self, name, np.zeros(capacity, np.int64))
        self.is_open = np.zeros(capacity, bool)
        with self._on_cuda_stream():
            self._frames = self._blank(capacity, width)

    @property
    def capacity(self) -> int:
        """Slots the per-slot arrays hold now."""
        return len(self.is_open)

    def close(self, slot: int) -> None:
        """Free `slot` (its queued frames are dropped)."""
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
        """Queue this step's frames, vocode every ready utterance in one pass, close the finished ones.

        `mel (R, k, n_mels)`: the step's frames; row `rows[i]` belongs to slot `slots[i]`. `host`: more
        frames per slot as host arrays `(m, n_mels)`. `finish`: slots to flush and close. `eager`: a mask
        over slots of utterances to send sooner than the chunk schedule (the subclass says how soon)."""
        slots = np.asarray(slots if slots is not None else (), np.int64)
        rows = np.asarray(rows if rows is not None else (), np.int64)
        finish = np.asarray(finish if finish is not None else (), np.int64)
        host = {s: f for s, f in (host or {}).items() if len(f)}
        touched = np.zeros(self.capacity, bool)
        for group in (slots, finish, np.fromiter(host, np.int64, len(host))):
            if len(group) and not self.is_open[group].all():
                raise ValueError(f"slots {group[~self.is_open[group]].tolist()} are not open")
            touched[group] = True
        fin = np.zeros(self.capacity, bool)
        fin[finish] = True
        with self._on_cuda_stream(), torch.inference_mode():
            if self._cuda_stream is not None:
                self._cuda_stream.wait_stream(torch.cuda.current_stream(self.device))
            if mel is not None and len(slots):
                self._queue_step(mel, slots, rows)
            for slot, frames in host.items():
                self._queue_host(slot, frames)
            ready_mask = touched & self._ready(fin, eager if eager is not None else np.zeros(self.capacity, bool))
            ready = np.flatnonzero(ready_mask)
            result = self._run(ready, fin[ready]) if len(ready) else None
        closing = np.flatnonzero(fin & ~ready_mask)  # finished with nothing to vocode: an empty final entry
        for slot in finish:
            self.close(int(slot))
        none = np.zeros(len(closing), np.int64)
        if result is None:
            return StepPass(closing, none - 1, none, none, np.ones(len(closing), bool))
        audio, event, lo, hi = result
        keep = np.flatnonzero((hi > lo) | fin[ready])
        return StepPass(
            np.concatenate([ready[keep], closing]),
            np.concatenate([keep, none - 1]),
            np.concatenate([lo[keep], none]),
            np.concatenate([hi[keep], none]),
            np.concatenate([fin[ready][keep], np.ones(len(closing), bool)]),
            audio,
            event,
        )

    # --- what a subclass defines ---
    def open(self) -> int:
        """A new utterance; returns its slot."""
        raise NotImplementedError

    def capture_graphs(self, max_utterances: int) -> int:
        """Capture CUDA graphs of passes up to `max_utterances` rows, if the vocoder has them; how many exist."""
        return 0

    def _at(self, slots: np.ndarray) -> np.ndarray:
        """Buffer position of each slot's next frame."""
        raise NotImplementedError

    def _ready(self, fin: np.ndarray, eager: np.ndarray) -> np.ndarray:
        """Mask over slots: vocode now (`fin`: finishing this step; `eager`: the caller's urgent mask)."""
        raise NotImplementedError

    def _run(self, ready: np.ndarray, fin: np.ndarray) -> PassResult:
        raise NotImplementedError

    def _advance(self, slots: np.ndarray, k: np.ndarray | int) -> None:
        """Count `k` frames queued for `slots`."""
        self.received[slots] += k

    # --- shared internals ---
    def _on_cuda_stream(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self._cuda_stream) if self._cuda_stream is not None else nullcontext()

    def _blank(self, n: int, width: int) -> Tensor:
        return torch.full((n, width, self.n_mels), self._fill_value, dtype=torch.float32, device=self.device)

    def _grow(self, n: int) -> None:
        old = self.capacity
        for name in (*self.COUNTERS, "is_open"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros(n - old, a.dtype)]))
        frames = self._blank(n, self._width)
        frames[:old].copy_(self._frames)
        self._frames = frames

    def _fit(self, frames: int) -> None:
        """Make room for `frames` queued frames (plus the spare ones) per slot."""
        width = frames + self._spare
        if width > self._width:
            grown = self._blank(self.capacity, width)
            grown[:, : self._width].copy_(self._frames)
            self._frames, self._width = grown, width

    def _to_device(self, a: np.ndarray) -> Tensor:
        t = torch.from_numpy(a)
        if self._cuda_stream is not None:
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def _queue_step(self, mel: Tensor, slots: np.ndarray, rows: np.ndarray) -> None:
        if mel.dim() != 3 or mel.shape[2] != self.n_mels or not mel.is_floating_point():
            raise FrameShapeError(f"step frames must be floating point (R, k, {self.n_mels}), got {tuple(mel.shape)}")
        if mel.device.type != self.device.type:
            raise FrameShapeError(f"step frames on {mel.device}, vocoder on {self.device}")
        k, at = mel.shape[1], self._at(slots)
        self._fit(int(at.max()) + k)
        steps = np.arange(k)
        src = (rows[:, None] * k + steps).ravel()
        dest = ((slots * self._width + at)[:, None] + steps).ravel()
        index = self._to_device(np.stack([src, dest]))
        frames = mel.detach().reshape(-1, self.n_mels).index_select(0, index[0]).float()
        self._frames.view(-1, self.n_mels).index_copy_(0, index[1], frames)
        if self._cuda_stream is not None:
            mel.record_stream(self._cuda_stream)
        self._advance(slots, k)

    def _queue_host(self, slot: int, frames: np.ndarray) -> None:
        if frames.ndim != 2 or frames.shape[1] != self.n_mels:
            raise FrameShapeError(f"slot {slot}: frames must be (m, {self.n_mels}), got {frames.shape}")
        m, at = frames.shape[0], int(self._at(np.array([slot]))[0])
        self._fit(at + m)
        self._frames[slot, at : at + m].copy_(self._to_device(np.ascontiguousarray(frames, np.float32)))
        self._advance(np.array([slot]), m)


def int16_to_host(wave: Tensor, cuda_stream: torch.cuda.Stream | None) -> tuple[Tensor, torch.cuda.Event | None]:
    """A pass's float waveform as int16 (`to_int16`'s rule) on the host: on CUDA copied to pinned memory
    on `cuda_stream`, with the event that marks the copy done."""
    wave = (wave.float().clamp(-1.0, 1.0) * 32767.0).to(torch.int16)
    if cuda_stream is None:
        return wave, None
    host = torch.empty(wave.shape, dtype=wave.dtype, pin_memory=True)
    host.copy_(wave, non_blocking=True)
    event = torch.cuda.Event()
    event.record(cuda_stream)
    return host, event
