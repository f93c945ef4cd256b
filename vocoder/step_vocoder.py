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

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import VocoderConfigError
from vocoder.graphs import FRAME_STEP, PassGraphs
from vocoder.model import Vocoder
from vocoder.slot_frames import PassResult, SlotFrames, int16_to_host
from vocoder.state import StatePool, vocode_pass


class StepVocoder(SlotFrames):
    """The mel of many utterances, one engine step at a time, in; PCM out. See the module docstring."""

    # Per slot: frames received, fed to the network, pending (in the buffer), and samples returned.
    COUNTERS = ("received", "consumed", "pending", "emitted")
    consumed: np.ndarray
    pending: np.ndarray

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
        c = self.config = vocoder.config
        super().__init__(
            c.n_mels,
            chunk_frames=chunk_frames,
            first_chunk_frames=first_chunk_frames,
            device=device,
            capacity=capacity + 1,  # + the scratch slot
            width=max(chunk_frames + 2 * FRAME_STEP + c.lookahead, graph_max_frames if cuda_graphs else 0),
            spare=c.lookahead,  # a finishing pass reads `lookahead` zero frames past the last one
            fill=0.0,
        )
        if cuda_graphs and self._cuda_stream is None:
            raise VocoderConfigError("cuda_graphs needs the vocoder on a CUDA device")
        self.vocoder = vocoder.to(self.device).eval()
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
            if self._pool.capacity > self.capacity:
                self._grow(self._pool.capacity)
            self._frames[slot].zero_()
        for name in self.COUNTERS:
            getattr(self, name)[slot] = 0
        self.is_open[slot] = True
        return slot

    def close(self, slot: int) -> None:
        """Free `slot` (its queued frames are dropped)."""
        super().close(slot)
        self._pool.release(slot)

    # --- SlotFrames ---
    def _at(self, slots: np.ndarray) -> np.ndarray:
        at: np.ndarray = self.pending[slots]
        return at

    def _advance(self, slots: np.ndarray, k: np.ndarray | int) -> None:
        self.pending[slots] += k
        self.received[slots] += k

    def _ready(self, fin: np.ndarray, eager: np.ndarray) -> np.ndarray:
        """The chunk schedule; finishing utterances; eager ones whose first chunk is out, with any pending frame."""
        needed = np.minimum(self.chunk_frames, np.maximum(self.first_chunk_frames, self.consumed))
        ready: np.ndarray = (
            (fin & (self.received > 0)) | (self.pending >= needed) | (eager & (self.consumed > 0) & (self.pending > 0))
        )
        return ready

    def _run(self, ready: np.ndarray, fin: np.ndarray) -> PassResult:
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
