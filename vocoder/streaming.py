"""`StreamingVocoder`: many concurrent mel streams -> PCM chunks, batched across streams, exact.

Usage (one utterance = one stream id; ids are any hashable):

    with StreamingVocoder(Vocoder.from_dir(d), chunk_frames=16, first_chunk_frames=4) as sv:
        sv.open("a"); sv.open("b")
        out = sv.step({"a": mel_a_4x80, "b": mel_b_4x80})   # {"a": pcm float32 (n,), "b": ...}
        out = sv.step({"a": more_a}, finish=["b"])          # "b" flushed and closed
        pcm = sv.finish("a")

Exactness: the concatenated PCM of a stream equals `Vocoder.forward` on its whole mel up to float
rounding (tests/vocoder/test_streaming.py asserts > 80 dB SNR), and has exactly `T * hop` samples.

Chunking policy: new frames are queued per stream; a stream is vocoded when it has at least
`first_chunk_frames` queued (its first chunk), then as many frames as it has already vocoded
(so chunks double) up to `chunk_frames`, or when finished.
All queued frames of every ready stream go through ONE batched forward per `step`.

Batching rows of different lengths: rows are right-padded to the longest and carry their own
length. Every conv runs causally in streaming, so padding can only affect outputs past a row's
length, which are discarded; each conv cache and the overlap-add tail are gathered at the row's own
length (see vocoder/layers.py). Padding costs at most (longest - shortest) frames of compute; with
the TTS emitting 4 frames per decode step, rows mostly share one length.

Latency: the last `lookahead * hop + (n_fft - hop) / 2` samples (2 * 256 + 384 = 896 samples,
3.5 frames, 40.6 ms at the defaults) of the mel received so far are not final until more frames or
`finish` arrive, so each step returns everything before that point. With the defaults the first
4-frame chunk yields 128 samples; every later chunk of k frames yields k * hop samples.

Threads and devices:
  * Methods take a lock, so any thread may call them; the intended use is one vocoder worker thread
    (uttera_server/vocoder_worker.py). On CPU, torch kernels release the GIL; `torch.set_num_threads`
    is per thread under the OpenMP backend (tests/vocoder/test_threads.py), so the worker sets its
    own count without touching the engine's.
  * On CUDA the vocoder owns a `torch.cuda.Stream`; `submit` enqueues all work there, makes that
    stream wait for the producer of the mel (`after=`: an event recorded after the mel head, or by
    default the caller's current stream when an input lives on the GPU), copies the PCM to pinned
    host memory and records an event. The LM's stream never waits for the vocoder; the host only
    waits in `StepResult.wait()`.
  * CUDA graphs (`cuda_graphs=True`, CUDA only): a pass is ~330 PyTorch calls, each of which lets go
    of the GIL and must win it back; in a serving process whose event loop is busy in Python each
    hand-off can wait up to the switch interval, so a 5 ms pass took 40-70 ms of wall time on the
    H200 (benchmarks/RESULTS.md, "The GIL convoy"). With graphs a pass is one replay: the batch is
    padded to a bucket (streams to a power of two, frames to a multiple of `GRAPH_FRAME_STEP` up to
    `graph_max_frames`), padding rows run on a scratch state slot with zero frames, and each bucket
    is captured once (on first use, or up front with `capture_graphs`). Passes outside the buckets
    run eagerly. Host input frames are assembled with numpy, so a pass makes a handful of calls.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Container, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import FrameShapeError, StreamStateError, UnknownStreamError, VocoderConfigError
from vocoder.model import Vocoder
from vocoder.state import StatePool
from vocoder.step_result import StepResult

StreamId = Hashable
Frames = np.ndarray | Tensor
GRAPH_FRAME_STEP = 8
"""CUDA-graph buckets: frames per row are padded up to a multiple of this."""
"""`(k, n_mels)` natural-log mel frames, frame-major as the acoustic model's mel head emits them."""


@dataclass(slots=True)
class _Stream:
    slot: int
    pending: list[np.ndarray | Tensor] = field(default_factory=list)  # host frames as numpy
    pending_frames: int = 0
    received: int = 0   # mel frames pushed so far
    consumed: int = 0   # frames fed to the network, finishing zero frames included
    emitted: int = 0    # PCM samples returned so far


class StreamingVocoder:
    """Streams of log-mel frames in, PCM out; see the module docstring. Moves `vocoder` to `device`
    (default: where its weights are) in place and puts it in eval mode."""

    def __init__(self, vocoder: Vocoder, *, chunk_frames: int = 16, first_chunk_frames: int = 4,
                 device: str | torch.device | None = None, initial_capacity: int = 8,
                 cuda_graphs: bool = False, graph_max_frames: int = 64, static_buckets: bool = False):
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise VocoderConfigError(f"chunk_frames ({chunk_frames}) and first_chunk_frames "
                                     f"({first_chunk_frames}) must be >= 1")
        self.device = torch.device(device) if device is not None else vocoder.head.window.device
        self._stream: torch.cuda.Stream | None = None
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise VocoderConfigError(f"device {self.device} requested but CUDA is not available")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self._stream = torch.cuda.Stream(self.device)
        elif self.device.type != "cpu":
            raise VocoderConfigError(f"device must be cpu or cuda, got {self.device}")
        self.vocoder = vocoder.to(self.device).eval()
        self.config = vocoder.config
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self._dtype = vocoder.embed.weight.dtype
        with self._on_stream():
            self._pool = StatePool(vocoder.cache_shapes(), self.config.n_fft - self.config.hop_length,
                                   device=self.device, dtype=self._dtype, capacity=initial_capacity)
        self._streams: dict[StreamId, _Stream] = {}
        self._lock = threading.Lock()
        if cuda_graphs and self._stream is None:
            raise VocoderConfigError("cuda_graphs needs the vocoder on a CUDA device")
        # static_buckets: pad every pass to its graph bucket and run it on static buffers, without
        # capturing (how the graph path's padding is tested on CPU).
        if graph_max_frames < GRAPH_FRAME_STEP or graph_max_frames % GRAPH_FRAME_STEP:
            raise VocoderConfigError(f"graph_max_frames must be a positive multiple of {GRAPH_FRAME_STEP}, "
                                     f"got {graph_max_frames}")
        self.graph_max_frames = graph_max_frames
        self._static: _StaticPasses | None = None
        if cuda_graphs or static_buckets:
            with self._on_stream():
                self._static = _StaticPasses(self, capture=cuda_graphs)
        self.graph_passes = 0   # passes run as a bucket's graph (or static pass)
        self.eager_passes = 0   # passes run op by op

    @property
    def cuda_graphs(self) -> bool:
        return self._static is not None and self._static.capture

    def capture_graphs(self, max_streams: int) -> int:
        """Capture every bucket up to `max_streams` streams now (instead of on first use); returns how
        many graphs exist. No-op without CUDA graphs."""
        if self._static is None:
            return 0
        with self._lock, self._on_stream(), torch.inference_mode():
            b = 1
            while True:
                for n in range(GRAPH_FRAME_STEP, self.graph_max_frames + 1, GRAPH_FRAME_STEP):
                    self._static.get(b, n)
                if b >= max_streams:
                    break
                b *= 2
            return len(self._static.passes)

    # --- stream lifecycle ---
    @property
    def lag_samples(self) -> int:
        """Samples of received mel held back until later frames arrive (see module docstring)."""
        return self.config.lookahead * self.config.hop_length + self.config.pad

    @property
    def active(self) -> list[StreamId]:
        return list(self._streams)

    def is_open(self, stream_id: StreamId) -> bool:
        return stream_id in self._streams

    def pending_frames(self, stream_id: StreamId) -> int:
        """Frames pushed to `stream_id` and not yet vocoded."""
        return self._get(stream_id).pending_frames

    def frames_to_next_chunk(self, stream_id: StreamId, extra: int = 0) -> int:
        """Frames the chunk schedule still waits for before vocoding `stream_id` (with `extra` more
        frames about to be pushed); 0 if it is ready."""
        st = self._get(stream_id)
        return max(0, self._need(st) - st.pending_frames - extra)

    def open(self, stream_id: StreamId) -> None:
        with self._lock:
            if stream_id in self._streams:
                raise StreamStateError(f"stream {stream_id!r} is already open; finish or cancel it "
                                       "before reusing the id")
            with self._on_stream():
                self._streams[stream_id] = _Stream(slot=self._pool.acquire())

    def cancel(self, stream_id: StreamId) -> None:
        """Drop a stream and its queued frames without producing its remaining audio."""
        with self._lock:
            self._close(self._get(stream_id), stream_id)

    @contextmanager
    def stream(self, stream_id: StreamId) -> Iterator[StreamId]:
        """`open` on entry; `cancel` on exit unless the stream was finished inside the block."""
        self.open(stream_id)
        try:
            yield stream_id
        finally:
            if stream_id in self._streams:
                self.cancel(stream_id)

    def close(self) -> None:
        """Cancel every open stream."""
        for stream_id in self.active:
            self.cancel(stream_id)

    def __enter__(self) -> StreamingVocoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- vocoding ---
    def push(self, stream_id: StreamId, frames: Frames) -> np.ndarray:
        """Queue `(k, n_mels)` frames; returns the PCM that became final (possibly empty)."""
        return self.step({stream_id: frames})[stream_id]

    def finish(self, stream_id: StreamId) -> np.ndarray:
        """Vocode everything still queued and close the stream; returns the last PCM."""
        return self.step({}, finish=(stream_id,))[stream_id]

    def step(self, frames: Mapping[StreamId, Frames], finish: Iterable[StreamId] = (), *,
             eager: Container[StreamId] = ()) -> dict[StreamId, np.ndarray]:
        """`submit(...).wait()`: one batched forward over every ready stream."""
        return self.submit(frames, finish, eager=eager).wait()

    def submit(self, frames: Mapping[StreamId, Frames], finish: Iterable[StreamId] = (), *,
               after: torch.cuda.Event | torch.cuda.Stream | None = None,
               eager: Container[StreamId] = ()) -> StepResult:
        """Queue `frames`, finish the `finish` streams, vocode all ready streams in one batch.

        A stream in `eager` whose first chunk is out is ready with any pending frame, whatever the
        chunk schedule says (for a client about to run out of audio).

        Returns a `StepResult` whose `wait()` gives `{stream_id: float32 PCM (n,)}` for every id in
        `frames` or `finish` (empty arrays for streams that produced nothing). On CPU the work is
        done on return; on CUDA it is queued on the vocoder's stream (see module docstring for
        `after`). Finished streams are closed: their ids may be opened again.
        """
        with self._lock:
            finishing = list(dict.fromkeys(finish))
            ids = list(dict.fromkeys([*frames, *finishing]))
            streams = {sid: self._get(sid) for sid in ids}
            new = {sid: self._as_frames(sid, f) for sid, f in frames.items()}  # validate all first
            for sid, t in new.items():
                if t.shape[0]:
                    st = streams[sid]
                    st.pending.append(t)
                    st.pending_frames += t.shape[0]
                    st.received += t.shape[0]
            done = set(finishing)
            ready = [sid for sid in ids
                     if (sid in done and streams[sid].received > 0) or self._is_ready(streams[sid])
                     or (sid in eager and streams[sid].consumed > 0 and streams[sid].pending_frames > 0)]
            result = self._run(ids, ready, streams, done, after) if ready else StepResult(ids)
            for sid in finishing:
                self._close(streams[sid], sid)
            return result

    # --- internals ---
    def _on_stream(self):
        return torch.cuda.stream(self._stream) if self._stream is not None else nullcontext()

    def _get(self, stream_id: StreamId) -> _Stream:
        try:
            return self._streams[stream_id]
        except KeyError:
            raise UnknownStreamError(f"stream {stream_id!r} is not open: call open({stream_id!r}) "
                                     "first (finished and cancelled streams are closed)") from None

    def _close(self, st: _Stream, stream_id: StreamId) -> None:
        del self._streams[stream_id]
        self._pool.release(st.slot)

    def _is_ready(self, st: _Stream) -> bool:
        """Chunks grow from `first_chunk_frames`, doubling up to `chunk_frames`: each chunk is at most
        as long as the audio already sent, so a client playing in real time has audio left while the
        next chunk is generated (a fixed large second chunk made every stream stall once)."""
        return st.pending_frames >= self._need(st)

    def _need(self, st: _Stream) -> int:
        return min(self.chunk_frames, max(self.first_chunk_frames, st.consumed))

    def _as_frames(self, stream_id: StreamId, frames: Frames) -> np.ndarray | Tensor:
        """Validated `(k, n_mels)` frames: host frames as a float32 numpy copy (callers may reuse
        buffers; numpy keeps the GIL, see the module docstring), GPU frames as the tensor itself, kept
        by reference, so the producer must not overwrite them after passing them."""
        if isinstance(frames, Tensor) and frames.is_cuda:
            if self.device.type != "cuda":
                raise FrameShapeError(f"stream {stream_id!r}: frames on {frames.device}, vocoder on "
                                      f"{self.device}")
            shape, floating, t = tuple(frames.shape), frames.is_floating_point(), frames.detach()
        else:
            if isinstance(frames, Tensor):
                if frames.device.type != "cpu":
                    raise FrameShapeError(f"stream {stream_id!r}: frames on {frames.device}, vocoder on "
                                          f"{self.device}")
                frames = frames.detach().float().numpy() if frames.is_floating_point() else frames.numpy()
            a = np.asarray(frames)
            shape, floating = a.shape, np.issubdtype(a.dtype, np.floating)
            t = np.array(a, dtype=np.float32) if floating else a
        if len(shape) != 2 or shape[1] != self.config.n_mels or not floating:
            dtype = t.dtype if isinstance(t, Tensor) else np.asarray(frames).dtype
            raise FrameShapeError(
                f"stream {stream_id!r}: frames must be floating point of shape (k, "
                f"{self.config.n_mels}), got {tuple(shape)} {dtype}")
        return t

    def _to_device(self, t: Tensor) -> Tensor:
        if self._stream is not None and t.device.type == "cpu":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def _run(self, ids: list[StreamId], ready: list[StreamId], streams: dict[StreamId, _Stream],
             done: set[StreamId], after: torch.cuda.Event | torch.cuda.Stream | None) -> StepResult:
        c = self.config
        hop, lookahead = c.hop_length, c.lookahead
        rows = [streams[sid] for sid in ready]
        seqs, lengths, skips = [], [], []
        for sid, st in zip(ready, rows):
            parts = list(st.pending)
            if sid in done and lookahead:  # realign the lookahead conv: zeros = offline padding
                parts.append(np.zeros((lookahead, c.n_mels), np.float32))
            seqs.append(parts)
            lengths.append(st.pending_frames + (lookahead if sid in done else 0))
            skips.append(max(0, lookahead - st.consumed))
        on_gpu = [t for parts in seqs for t in parts if isinstance(t, Tensor)]
        n = max(1, max(lengths))
        with self._on_stream(), torch.inference_mode():
            if self._stream is not None:
                if isinstance(after, torch.cuda.Event):
                    self._stream.wait_event(after)
                elif isinstance(after, torch.cuda.Stream):
                    self._stream.wait_stream(after)
                elif on_gpu:
                    self._stream.wait_stream(torch.cuda.current_stream(self.device))
                for t in on_gpu:  # keep the producer's allocator from reusing them too early
                    t.record_stream(self._stream)
            meta = np.array([[st.slot for st in rows], lengths, skips], dtype=np.int64)
            static = self._static.get(len(rows), n) if self._static is not None else None
            if static is not None:
                wave = static.run(seqs, meta)
                self.graph_passes += 1
            else:
                slots, lengths_t, skips_t = self._to_device(torch.from_numpy(meta))
                wave = self._pass(self._batch_mel(seqs, n), slots, lengths_t, skips_t)
                self.eager_passes += 1
            spans = {}
            for row, (sid, st, length) in enumerate(zip(ready, rows, lengths)):
                # Local sample i of this chunk is output sample i + offset of the stream.
                offset = (st.consumed - lookahead) * hop - c.pad
                st.consumed += length
                end = st.received * hop if sid in done else st.consumed * hop - lookahead * hop - c.pad
                end = max(end, st.emitted)
                spans[sid] = (row, st.emitted - offset, end - offset)
                st.emitted = end
                st.pending, st.pending_frames = [], 0
            width = max(hi for _, _, hi in spans.values())
            wave = wave[:, :width]
            event = None
            if self._stream is not None:
                host = torch.empty(wave.shape, dtype=wave.dtype, pin_memory=True)
                host.copy_(wave, non_blocking=True)
                event = torch.cuda.Event()
                event.record(self._stream)
                wave = host
        return StepResult(ids, wave, spans, event)

    def _pass(self, mel: Tensor, slots: Tensor, lengths: Tensor, skips: Tensor) -> Tensor:
        """The device work of one pass (what a CUDA graph captures): `mel (B, n_mels, N)` float32,
        `slots`/`lengths`/`skips (B,)` int64 -> waveform `(B, N * hop + n_fft - hop)`; the streams'
        state is read from and written back to their slots."""
        n = mel.shape[-1]
        j = torch.arange(n, device=mel.device).view(1, n)
        valid = (j >= skips.view(-1, 1)) & (j < lengths.view(-1, 1))
        caches, tail = self._pool.gather(slots)
        frames, caches = self.vocoder.stream_frames(mel, caches, lengths, valid)
        wave, tail = self.vocoder.head.overlap_add_step(frames, valid, tail, lengths)
        self._pool.scatter(slots, caches, tail)
        return wave

    def _fill_mel(self, out: np.ndarray, seqs: list[list[np.ndarray]]) -> None:
        """Host frames into `out (B', N', n_mels)` (rows and frames past the batch stay as they are)."""
        for b, parts in enumerate(seqs):
            at = 0
            for p in parts:
                out[b, at: at + p.shape[0]] = p
                at += p.shape[0]

    def _batch_mel(self, seqs: list[list[np.ndarray | Tensor]], n: int) -> Tensor:
        """Right-padded `(B, n_mels, n)` float32 batch on the vocoder's device."""
        if not any(isinstance(p, Tensor) for parts in seqs for p in parts):
            batch = np.zeros((len(seqs), n, self.config.n_mels), np.float32)
            self._fill_mel(batch, seqs)
            return self._to_device(torch.from_numpy(batch)).transpose(1, 2)
        batch = torch.zeros(len(seqs), n, self.config.n_mels, dtype=torch.float32, device=self.device)
        for b, parts in enumerate(seqs):
            at = 0
            for p in parts:
                k = p.shape[0]
                batch[b, at: at + k] = p.to(self.device, torch.float32) if isinstance(p, Tensor) \
                    else self._to_device(torch.from_numpy(p))
                at += k
        return batch.transpose(1, 2)


class _StaticPass:
    """One bucket: static input buffers of `b` rows x `n` frames and, on CUDA, the captured graph
    of `StreamingVocoder._pass` over them (on CPU, for tests, the same pass run on the buffers)."""

    def __init__(self, sv: StreamingVocoder, b: int, n: int, *, capture: bool, pool, scratch: int):
        c = sv.config
        self.sv, self.b, self.n, self.scratch = sv, b, n, scratch
        self.generation = sv._pool.generation
        self.mel = torch.zeros(b, c.n_mels, n, dtype=torch.float32, device=sv.device)
        self.meta = torch.zeros(3, b, dtype=torch.int64, device=sv.device)
        self.meta[0].fill_(scratch)
        self.graph = None
        if capture:
            for _ in range(2):  # warm up (cuBLAS/cuFFT plans) on the scratch slot: lengths 0
                sv._pass(self.mel, *self.meta)
            self.graph = torch.cuda.CUDAGraph()
            # No cyclic GC during the capture: freeing a stale graph (or any CUDA object) then would
            # invalidate it ("operation not permitted when stream is capturing").
            enabled = gc.isenabled()
            gc.disable()
            try:
                with torch.cuda.graph(self.graph, pool=pool, stream=sv._stream, capture_error_mode="thread_local"):
                    self.wave = sv._pass(self.mel, *self.meta)
            finally:
                if enabled:
                    gc.enable()

    def run(self, seqs: list[list[np.ndarray | Tensor]], meta: np.ndarray) -> Tensor:
        """Load this pass's frames and `meta` ([slots, lengths, skips] x rows) into the buffers, run."""
        sv, rows = self.sv, len(seqs)
        host_meta = np.zeros((3, self.b), np.int64)
        host_meta[0] = self.scratch  # padding rows: scratch slot, no frames
        host_meta[:, :rows] = meta
        if any(isinstance(p, Tensor) for parts in seqs for p in parts):
            self.mel.zero_()
            n = max(1, int(meta[1].max()))
            self.mel[:rows, :, :n].copy_(sv._batch_mel(seqs, n))
        else:
            host = torch.zeros(self.b, self.n, sv.config.n_mels, dtype=torch.float32,
                               pin_memory=self.graph is not None)
            sv._fill_mel(host.numpy(), seqs)
            self.mel.copy_(host.transpose(1, 2), non_blocking=True)
        self.meta.copy_(sv._to_device(torch.from_numpy(host_meta)), non_blocking=True)
        if self.graph is None:
            return sv._pass(self.mel, *self.meta)[:rows]
        self.graph.replay()
        return self.wave[:rows]


class _StaticPasses:
    """The buckets of a `StreamingVocoder`, captured on first use; recaptured after the state pool
    grew (its tensors moved). Owns the scratch slot that padding rows run on."""

    def __init__(self, sv: StreamingVocoder, *, capture: bool):
        self.sv, self.capture = sv, capture
        self.scratch = sv._pool.acquire()
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.passes: dict[tuple[int, int], _StaticPass] = {}

    def get(self, rows: int, frames: int) -> _StaticPass | None:
        if frames > self.sv.graph_max_frames:
            return None
        b = 1 << max(0, rows - 1).bit_length()
        n = -(-frames // GRAPH_FRAME_STEP) * GRAPH_FRAME_STEP
        static = self.passes.get((b, n))
        if static is None or static.generation != self.sv._pool.generation:
            if static is not None:  # the pool grew: every graph points at its old tensors
                self.passes.clear()
            static = _StaticPass(self.sv, b, n, capture=self.capture, pool=self.pool, scratch=self.scratch)
            self.passes[(b, n)] = static
        return static
