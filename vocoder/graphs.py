"""`PassGraphs`: a streaming vocoder pass as one CUDA-graph replay, batches padded to fixed buckets.

A pass done op by op is ~330 PyTorch calls, each of which lets go of the GIL and must win it back; in
a serving process whose event loop is busy in Python each hand-off can wait up to the switch
interval, so a 5 ms pass took 40-70 ms of wall time on the H200 (benchmarks/RESULTS.md, "The GIL
convoy"). Replayed from a graph, the device work of a pass is one call.

A graph has fixed shapes, so a pass is padded to a bucket: rows (utterances) up to a power of two,
frames up to a multiple of `FRAME_STEP`, at most `max_frames` (longer passes run op by op). Padding
rows read and write a scratch state slot with no frames; padding frames are zeros past each row's
length, which a causal pass never lets into a row's output or state (vocoder/layers.py). Each
bucket is captured once, on first use or up front (`capture_up_to`), and again after the state pool
reallocated its tensors (the captured graphs point at the old ones).

Without `capture` (CPU) the same padded pass runs on the same static buffers: how the padding is
tested where no GPU is.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE

FRAME_STEP = 8
"""Frames per row are padded up to a multiple of this."""

RunPass = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
"""`(mel (B, n_mels, N) float32, slots, lengths, skips (B,) int64) -> waveform (B, samples)`, reading
and writing the utterances' state slots (`StreamingVocoder._pass`)."""


class Bucket:
    """Static buffers of `rows` x `frames` and, when captured, the graph of one pass over them."""

    def __init__(
        self,
        run_pass: RunPass,
        rows: int,
        frames: int,
        n_mels: int,
        *,
        device: torch.device,
        scratch: int,
        generation: int,
        cuda_stream: torch.cuda.Stream | None = None,
        pool: _POOL_HANDLE | None = None,
    ):
        self.run_pass, self.rows, self.frames, self.scratch = run_pass, rows, frames, scratch
        self.generation = generation
        self.mel = torch.zeros(rows, n_mels, frames, dtype=torch.float32, device=device)
        self.meta = torch.zeros(3, rows, dtype=torch.int64, device=device)
        self.meta[0] = scratch
        self.graph: torch.cuda.CUDAGraph | None = None
        if cuda_stream is not None:
            self._capture(cuda_stream, pool)

    def _capture(self, cuda_stream: torch.cuda.Stream, pool: _POOL_HANDLE | None) -> None:
        for _ in range(2):  # warm up (cuBLAS/cuFFT plans) on the scratch slot: lengths 0
            self.run_pass(self.mel, *self.meta)
        self.graph = torch.cuda.CUDAGraph()
        # No cyclic GC during the capture: freeing a stale graph (or any CUDA object) then would
        # invalidate it ("operation not permitted when stream is capturing").
        enabled = gc.isenabled()
        gc.disable()
        try:
            with torch.cuda.graph(self.graph, pool=pool, stream=cuda_stream, capture_error_mode="thread_local"):
                self.wave = self.run_pass(self.mel, *self.meta)
        finally:
            if enabled:
                gc.enable()

    def run(self, mel: Tensor, meta: np.ndarray) -> Tensor:
        """One pass of `mel (rows, n_mels, frames)` (zeros past each row's length and in padding rows)
        and `meta` ([slots, lengths, skips] x r, r <= rows); returns the r rows of waveform."""
        r = meta.shape[1]
        padded = np.zeros((3, self.rows), np.int64)
        padded[0] = self.scratch  # padding rows: scratch slot, no frames
        padded[:, :r] = meta
        self.mel.copy_(mel, non_blocking=True)
        host = torch.from_numpy(padded)
        # From pageable memory a "non-blocking" copy first waits for the whole stream (the previous pass
        # and the model's step it waits on); from pinned memory it is queued like the rest.
        self.meta.copy_(host.pin_memory() if self.meta.is_cuda else host, non_blocking=True)
        if self.graph is None:
            return self.run_pass(self.mel, *self.meta)[:r]
        self.graph.replay()
        return self.wave[:r]


class PassGraphs:
    """The buckets of one streaming vocoder, made on first use. `generation()` is the state pool's
    allocation count: a bucket made under an older one is stale."""

    def __init__(
        self,
        run_pass: RunPass,
        n_mels: int,
        *,
        device: torch.device,
        scratch: int,
        generation: Callable[[], int],
        max_frames: int,
        cuda_stream: torch.cuda.Stream | None,
    ):
        self.run_pass, self.n_mels, self.device, self.scratch = run_pass, n_mels, device, scratch
        self.generation, self.max_frames, self.cuda_stream = generation, max_frames, cuda_stream
        self.pool = torch.cuda.graph_pool_handle() if cuda_stream is not None else None
        self.buckets: dict[tuple[int, int], Bucket] = {}

    @property
    def capture(self) -> bool:
        return self.cuda_stream is not None

    def get(self, rows: int, frames: int) -> Bucket | None:
        """The bucket of a pass of `rows` utterances x `frames` frames; None past `max_frames`."""
        if frames > self.max_frames:
            return None
        key = (1 << max(0, rows - 1).bit_length(), -(-frames // FRAME_STEP) * FRAME_STEP)
        bucket = self.buckets.get(key)
        if bucket is None or bucket.generation != self.generation():
            if bucket is not None:  # the pool grew: every graph points at its old tensors
                self.buckets.clear()
            bucket = Bucket(
                self.run_pass,
                *key,
                self.n_mels,
                device=self.device,
                scratch=self.scratch,
                generation=self.generation(),
                cuda_stream=self.cuda_stream,
                pool=self.pool,
            )
            self.buckets[key] = bucket
        return bucket

    def capture_up_to(self, max_utterances: int) -> int:
        """Make every bucket of up to `max_utterances` rows; returns how many exist."""
        rows = 1
        while True:
            for frames in range(FRAME_STEP, self.max_frames + 1, FRAME_STEP):
                self.get(rows, frames)
            if rows >= max_utterances:
                return len(self.buckets)
            rows *= 2
