"""`StepVocoder`: the streaming vocoder of an engine's steps, its per-utterance state in arrays.

`StreamingVocoder` keeps an object per utterance and a list of pending parts; fed one row per running
request per engine step, its Python bookkeeping grows with the rows (4 ms a step at 1,024 rows on the
H100, benchmarks/RESULTS.md, "H100 repeat"). Here every utterance is a slot number, and its counters are
entries of numpy arrays indexed by slot, so a step costs a handful of array operations whatever the rows:

  * the step's frames (rows of the model's `(R, k, n_mels)` mel, on its device) are written in one
    `index_copy_` into a device buffer of pending frames, `(slots, P, n_mels)`, at each slot's fill level;
  * which utterances are ready is one vectorized test of the same chunk schedule as `StreamingVocoder`'s
    (first chunk after `first_chunk_frames`, then as many frames as already vocoded up to `chunk_frames`;
    finishing and `eager` utterances at once);
  * the pass gathers the ready slots' rows of that buffer (already right-padded with zeros: positions
    past a slot's fill level are kept zero), runs the same device work (`vocode_pass`), op by op or as a
    CUDA-graph replay (vocoder/graphs.py), and the output spans come from array arithmetic.

Exactness is `StreamingVocoder`'s: each utterance's PCM equals `Vocoder.forward` on its whole mel.
On CUDA the work is queued on the vocoder's own CUDA stream, which waits for the caller's; the PCM is
made int16 on the device and copied to pinned host memory (`StepPass.wait`). Call from one thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import FrameShapeError, VocoderConfigError
from vocoder.graphs import FRAME_STEP, PassGraphs
from vocoder.model import Vocoder
from vocoder.state import StatePool, vocode_pass


class StepPass:
    """One `StepVocoder.submit`: for each entry `i` (an utterance that has new audio or finished),
    `slots[i]`, its row `rows[i]` of the pass's audio (-1: none) and samples `lo[i]:hi[i]` of it, `final[i]`."""

    __slots__ = ("slots", "rows", "lo", "hi", "final", "event", "_audio")

    def __init__(
        self,
        slots: np.ndarray,
        rows: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        final: np.ndarray,
        audio: Tensor | None = None,
        event: torch.cuda.Event | None = None,
    ):
        self.slots, self.rows, self.lo, self.hi, self.final = slots, rows, lo, hi, final
        self._audio, self.event = audio, event

    def wait(self) -> np.ndarray | None:
        """The pass's int16 audio `(rows, samples)` on the host (None if no pass ran); blocks this thread
        only, without the GIL, until the device has copied it."""
        if self.event is not None:
            self.event.synchronize()
            self.event = None
        return self._audio.numpy() if self._audio is not None else None

    def pcm(self, i: int) -> np.ndarray:
        """Entry `i`'s samples (a view of the pass's audio)."""
        audio = self.wait()
        if audio is None or self.rows[i] < 0:
            return np.zeros(0, np.int16)
        return audio[self.rows[i], self.lo[i] : self.hi[i]]

    def body(self, entries: np.ndarray) -> np.ndarray:
        """The samples of `entries` (indices into this pass's entries), concatenated in that order."""
        audio = self.wait()
        if audio is None or not len(entries):
            return np.zeros(0, np.int16)
        spans = zip(self.rows[entries].tolist(), self.lo[entries].tolist(), self.hi[entries].tolist())
        return np.concatenate([audio[r, lo:hi] for r, lo, hi in spans if hi > lo] or [np.zeros(0, np.int16)])


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


class StepVocoding(Protocol):
    """What the in-engine vocoder (engine_patches/engine_vocoder.py) needs of a streaming vocoder of engine
    steps: utterances are slots, per-slot state is in arrays indexed by slot. `StepVocoder` (our voices'
    vocoder, exact chunks from conv caches) and `WindowedStepVocoder` (vocoder/windowed.py: any vocoder
    whose output depends on a bounded window of mel, run on overlapping windows) implement it."""

    config: Any  # has n_mels, hop_length, sample_rate
    is_open: np.ndarray  # bool per slot
    emitted: np.ndarray  # samples returned per slot

    @property
    def capacity(self) -> int: ...
    @property
    def lag_samples(self) -> int: ...
    def open(self) -> int: ...
    def close(self, slot: int) -> None: ...
    def capture_graphs(self, max_utterances: int) -> int: ...
    def submit(
        self,
        mel: Tensor | None = None,
        slots: np.ndarray | None = None,
        rows: np.ndarray | None = None,
        *,
        host: Mapping[int, np.ndarray] | None = None,
        finish: np.ndarray | None = None,
        eager: np.ndarray | None = None,
    ) -> StepPass: ...


class StepVocoder:
    """The mel of many utterances, one engine step at a time, in; PCM out. See the module docstring."""

    def __init__(
        self,
        vocoder: Vocoder,
        *,
        chunk_frames: int = 32,
        first_chunk_frames: int = 8,
        device: str | torch.device = "cpu",
        capacity: int = 8,
        cuda_graphs: bool = False,
        graph_max_frames: int = 64,
    ):
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise VocoderConfigError(f"chunk_frames ({chunk_frames}) and first_chunk_frames must be >= 1")
        self.device = torch.device(device)
        self._cuda_stream: torch.cuda.Stream | None = None
        if self.device.type == "cuda":
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self._cuda_stream = torch.cuda.Stream(self.device)
        elif cuda_graphs:
            raise VocoderConfigError("cuda_graphs needs the vocoder on a CUDA device")
        self.vocoder = vocoder.to(self.device).eval()
        c = self.config = vocoder.config
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self._hop, self._lookahead, self._pad = c.hop_length, c.lookahead, c.pad
        with self._on_cuda_stream():
            self._pool = StatePool(
                vocoder.cache_shapes(),
                c.n_fft - c.hop_length,
                device=self.device,
                dtype=vocoder.embed.weight.dtype,
                capacity=capacity + 1,
            )
            self._scratch = self._pool.acquire()  # padding rows of a graph bucket; its pending row stays zero
        # Per slot: frames received, fed to the network, pending (in the buffer), and samples returned.
        n = self._pool.capacity
        self.received, self.consumed = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.pending, self.emitted = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.is_open = np.zeros(n, bool)
        self._width = max(chunk_frames + 2 * FRAME_STEP + c.lookahead, graph_max_frames if cuda_graphs else 0)
        self._frames = torch.zeros((n, self._width, c.n_mels), dtype=torch.float32, device=self.device)
        self._graphs: PassGraphs | None = None
        if cuda_graphs:
            with self._on_cuda_stream():
                self._graphs = PassGraphs(
                    self._pass,
                    c.n_mels,
                    device=self.device,
                    scratch=self._scratch,
                    generation=lambda: self._pool.generation,
                    max_frames=graph_max_frames,
                    cuda_stream=self._cuda_stream,
                )
        self.graph_passes = self.eager_passes = 0

    @property
    def capacity(self) -> int:
        """Slots the per-slot arrays hold now (they grow with the state pool)."""
        return len(self.received)

    @property
    def lag_samples(self) -> int:
        """Samples of received mel held back until later frames arrive (`StreamingVocoder.lag_samples`)."""
        return self._lookahead * self._hop + self._pad

    def capture_graphs(self, max_utterances: int) -> int:
        """Capture every graph bucket up to `max_utterances` rows now; returns how many exist."""
        if self._graphs is None:
            return 0
        with self._on_cuda_stream(), torch.inference_mode():
            return self._graphs.capture_up_to(max_utterances)

    def open(self) -> int:
        """A new utterance; returns its slot."""
        with self._on_cuda_stream():
            slot = self._pool.acquire()
            if self._pool.capacity > len(self.received):
                self._grow(self._pool.capacity)
            self._frames[slot].zero_()
        for counter in (self.received, self.consumed, self.pending, self.emitted):
            counter[slot] = 0
        self.is_open[slot] = True
        return slot

    def close(self, slot: int) -> None:
        """Free `slot` (its queued frames are dropped)."""
        if not self.is_open[slot]:
            raise ValueError(f"slot {slot} is not open")
        self.is_open[slot] = False
        self._pool.release(slot)

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
        over slots; an eager utterance whose first chunk is out is ready with any pending frame."""
        n_slots = len(self.received)
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
            needed = np.minimum(self.chunk_frames, np.maximum(self.first_chunk_frames, self.consumed))
            ready_mask = touched & (
                (fin & (self.received > 0))
                | (self.pending >= needed)
                | ((eager if eager is not None else False) & (self.consumed > 0) & (self.pending > 0))
            )
            ready = np.flatnonzero(ready_mask)
            result = self._run(ready, fin[ready]) if len(ready) else None
        closing = np.flatnonzero(fin & ~ready_mask)  # finished with nothing to vocode: an empty final entry
        for slot in finish:
            self.close(int(slot))
        if result is None:
            empty = np.zeros(len(closing), np.int64)
            return StepPass(closing, empty - 1, empty, empty, np.ones(len(closing), bool))
        audio, event, lo, hi = result
        has = hi > lo
        keep = np.flatnonzero(has | fin[ready])
        none = np.zeros(len(closing), np.int64)
        return StepPass(
            np.concatenate([ready[keep], closing]),
            np.concatenate([keep, none - 1]),
            np.concatenate([lo[keep], none]),
            np.concatenate([hi[keep], none]),
            np.concatenate([fin[ready][keep], np.ones(len(closing), bool)]),
            audio,
            event,
        )

    # --- internals ---
    def _on_cuda_stream(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self._cuda_stream) if self._cuda_stream is not None else nullcontext()

    def _grow(self, n: int) -> None:
        old = len(self.received)
        for name in ("received", "consumed", "pending", "emitted", "is_open"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros(n - old, a.dtype)]))
        frames = torch.zeros((n, *self._frames.shape[1:]), dtype=torch.float32, device=self.device)
        frames[:old].copy_(self._frames)
        self._frames = frames

    def _fit(self, frames: int) -> None:
        """Make room for `frames` pending frames (plus the finishing lookahead) per slot."""
        width = frames + self._lookahead
        if width > self._width:
            grown = torch.zeros((len(self.received), width, self.config.n_mels), device=self.device)
            grown[:, : self._width].copy_(self._frames)
            self._frames, self._width = grown, width

    def _to_device(self, a: np.ndarray) -> Tensor:
        t = torch.from_numpy(a)
        if self._cuda_stream is not None:
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def _queue_step(self, mel: Tensor, slots: np.ndarray, rows: np.ndarray) -> None:
        if mel.dim() != 3 or mel.shape[2] != self.config.n_mels or not mel.is_floating_point():
            raise FrameShapeError(
                f"step frames must be floating point (R, k, {self.config.n_mels}), got {tuple(mel.shape)}"
            )
        if mel.device.type != self.device.type:
            raise FrameShapeError(f"step frames on {mel.device}, vocoder on {self.device}")
        k = mel.shape[1]
        self._fit(int(self.pending[slots].max()) + k)
        steps = np.arange(k)
        src = (rows[:, None] * k + steps).ravel()
        dest = ((slots * self._width + self.pending[slots])[:, None] + steps).ravel()
        index = self._to_device(np.stack([src, dest]))
        frames = mel.detach().reshape(-1, self.config.n_mels).index_select(0, index[0]).float()
        self._frames.view(-1, self.config.n_mels).index_copy_(0, index[1], frames)
        if self._cuda_stream is not None:
            mel.record_stream(self._cuda_stream)
        self.pending[slots] += k
        self.received[slots] += k

    def _queue_host(self, slot: int, frames: np.ndarray) -> None:
        if frames.ndim != 2 or frames.shape[1] != self.config.n_mels:
            raise FrameShapeError(f"slot {slot}: frames must be (m, {self.config.n_mels}), got {frames.shape}")
        m, at = frames.shape[0], int(self.pending[slot])
        self._fit(at + m)
        self._frames[slot, at : at + m].copy_(self._to_device(np.ascontiguousarray(frames, np.float32)))
        self.pending[slot] += m
        self.received[slot] += m

    def _run(
        self, ready: np.ndarray, fin: np.ndarray
    ) -> tuple[Tensor, torch.cuda.Event | None, np.ndarray, np.ndarray]:
        hop, lookahead, pad = self._hop, self._lookahead, self._pad
        lengths = self.pending[ready] + lookahead * fin  # finishing: the zero lookahead frames (offline padding)
        skips = np.maximum(0, lookahead - self.consumed[ready])
        n = max(1, int(lengths.max()))
        meta = np.stack([ready, lengths, skips])
        bucket = self._graphs.get(len(ready), n) if self._graphs is not None else None
        if bucket is not None:
            index = np.full(bucket.rows, self._scratch, np.int64)
            index[: len(ready)] = ready
            batch = self._frames.index_select(0, self._to_device(index))[:, : bucket.frames]
            wave = bucket.run(batch.transpose(1, 2), meta)
            self.graph_passes += 1
        else:
            slots_t, lengths_t, skips_t = self._to_device(meta)
            batch = self._frames.index_select(0, slots_t)[:, :n]
            wave = self._pass(batch.transpose(1, 2), slots_t, lengths_t, skips_t)
            self.eager_passes += 1
        self._frames.index_fill_(0, self._to_device(ready), 0.0)  # keep positions past the fill level zero
        offset = (self.consumed[ready] - lookahead) * hop - pad  # local sample 0 of this pass, per row
        consumed = self.consumed[ready] + lengths
        end = np.where(fin, self.received[ready] * hop, consumed * hop - lookahead * hop - pad)
        end = np.maximum(end, self.emitted[ready])
        lo, hi = self.emitted[ready] - offset, end - offset
        self.consumed[ready], self.emitted[ready], self.pending[ready] = consumed, end, 0
        audio, event = int16_to_host(wave[:, : int(hi.max())], self._cuda_stream)
        return audio, event, lo, hi

    def _pass(self, mel: Tensor, slots: Tensor, lengths: Tensor, skips: Tensor) -> Tensor:
        return vocode_pass(self.vocoder, self._pool, mel, slots, lengths, skips)
