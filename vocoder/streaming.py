"""`StreamingVocoder`: the mel of many concurrent utterances -> PCM chunks, batched, exact.

Usage (one id per utterance; ids are any hashable):

    with StreamingVocoder(Vocoder.from_dir(d), chunk_frames=16, first_chunk_frames=4) as sv:
        sv.open("a"); sv.open("b")
        out = sv.step({"a": mel_a_4x80, "b": mel_b_4x80})   # {"a": pcm float32 (n,), "b": ...}
        out = sv.step({"a": more_a}, finish=["b"])          # "b" flushed and closed
        pcm = sv.finish("a")

Exactness: the concatenated PCM of an utterance equals `Vocoder.forward` on its whole mel up to float
rounding (tests/vocoder/test_streaming.py asserts > 80 dB SNR), and has exactly `T * hop` samples.

Chunking policy: new frames are queued per utterance; an utterance is vocoded when it has at least
`first_chunk_frames` queued (its first chunk), then as many frames as it has already vocoded
(so chunks double) up to `chunk_frames`, or when finished.
All queued frames of every ready utterance go through ONE batched forward per `step` (padding: vocoder/batch.py).

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
    CUDA stream wait for the producer of the mel (`after=`: an event recorded after the mel head, or by
    default the caller's current CUDA stream when an input lives on the GPU), copies the PCM to pinned
    host memory and records an event. The LM's CUDA stream never waits for the vocoder; the host only
    waits in `StepResult.wait()`.
  * CUDA graphs (`cuda_graphs=True`, CUDA only): each pass is one replay of a captured graph, the
    batch padded to a bucket (vocoder/graphs.py); host frames are assembled with numpy, so a pass
    makes a handful of PyTorch calls instead of ~330 GIL hand-offs.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vocoder.errors import UtteranceStateError, UnknownUtteranceError, VocoderConfigError
from vocoder.frames import Frames, as_frames, as_step
from vocoder.graphs import FRAME_STEP, PassGraphs
from vocoder.model import Vocoder
from vocoder.state import StatePool, vocode_pass
from vocoder.batch import Row, batch_mel
from vocoder.step_result import StepResult
from vocoder.utterance import Utterance

UtteranceId = Hashable


class StreamingVocoder:
    """The log-mel frames of many utterances in, PCM out; see the module docstring. Moves `vocoder` to `device`
    (default: where its weights are) in place and puts it in eval mode."""

    def __init__(
        self,
        vocoder: Vocoder,
        *,
        chunk_frames: int = 16,
        first_chunk_frames: int = 4,
        device: str | torch.device | None = None,
        initial_capacity: int = 8,
        cuda_graphs: bool = False,
        graph_max_frames: int = 64,
        static_buckets: bool = False,
        int16_pcm: bool = False,
    ):
        """`int16_pcm`: results are int16 PCM (clipped at full scale, `uttera_server.audio.pcm.to_int16`'s
        rule), converted on the vocoder's device before the copy to the host: half the bytes to copy and
        no per-utterance conversion on the host (the in-engine vocoder's PCM goes out as int16)."""
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise VocoderConfigError(
                f"chunk_frames ({chunk_frames}) and first_chunk_frames ({first_chunk_frames}) must be >= 1"
            )
        self.device = torch.device(device) if device is not None else vocoder.head.window.device
        self._cuda_stream: torch.cuda.Stream | None = None
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise VocoderConfigError(f"device {self.device} requested but CUDA is not available")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self._cuda_stream = torch.cuda.Stream(self.device)
        elif self.device.type != "cpu":
            raise VocoderConfigError(f"device must be cpu or cuda, got {self.device}")
        self.vocoder = vocoder.to(self.device).eval()
        self.config = vocoder.config
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self._dtype = vocoder.embed.weight.dtype
        with self._on_cuda_stream():
            self._pool = StatePool(
                vocoder.cache_shapes(),
                self.config.n_fft - self.config.hop_length,
                device=self.device,
                dtype=self._dtype,
                capacity=initial_capacity,
            )
        self._utterances: dict[UtteranceId, Utterance] = {}
        self._lock = threading.Lock()
        if cuda_graphs and self._cuda_stream is None:
            raise VocoderConfigError("cuda_graphs needs the vocoder on a CUDA device")
        if graph_max_frames < FRAME_STEP or graph_max_frames % FRAME_STEP:
            raise VocoderConfigError(
                f"graph_max_frames must be a positive multiple of {FRAME_STEP}, got {graph_max_frames}"
            )
        # static_buckets: pad every pass to its graph bucket and run it on static buffers, without
        # capturing (how the graph path's padding is tested on CPU).
        self._graphs: PassGraphs | None = None
        if cuda_graphs or static_buckets:
            with self._on_cuda_stream():
                self._graphs = PassGraphs(
                    self._pass,
                    self.config.n_mels,
                    device=self.device,
                    scratch=self._pool.acquire(),
                    generation=lambda: self._pool.generation,
                    max_frames=graph_max_frames,
                    cuda_stream=self._cuda_stream if cuda_graphs else None,
                )
        self.int16_pcm = int16_pcm
        self.graph_passes = 0  # passes run in a bucket (as a graph replay with cuda_graphs)
        self.eager_passes = 0  # passes run op by op

    @property
    def cuda_graphs(self) -> bool:
        return self._graphs is not None and self._graphs.capture

    def capture_graphs(self, max_utterances: int) -> int:
        """Capture every bucket up to `max_utterances` utterances now (instead of on first use); returns how
        many graphs exist. No-op without CUDA graphs."""
        if self._graphs is None:
            return 0
        with self._lock, self._on_cuda_stream(), torch.inference_mode():
            return self._graphs.capture_up_to(max_utterances)

    # --- utterance lifecycle ---
    @property
    def lag_samples(self) -> int:
        """Samples of received mel held back until later frames arrive (see module docstring)."""
        return self.config.lookahead * self.config.hop_length + self.config.pad

    @property
    def active(self) -> list[UtteranceId]:
        return list(self._utterances)

    def is_open(self, utterance_id: UtteranceId) -> bool:
        return utterance_id in self._utterances

    def pending_frames(self, utterance_id: UtteranceId) -> int:
        """Frames pushed to `utterance_id` and not yet vocoded."""
        return self._get(utterance_id).pending_frames

    def vocoded_frames(self, utterance_id: UtteranceId) -> int:
        """Frames of `utterance_id` already through the network (its audio up to `lag_samples` before them)."""
        return self._get(utterance_id).consumed

    def frames_to_next_chunk(self, utterance_id: UtteranceId, extra: int = 0) -> int:
        """Frames the chunk schedule still waits for before vocoding `utterance_id` (with `extra` more
        frames about to be pushed); 0 if it is ready."""
        st = self._get(utterance_id)
        return max(0, st.frames_needed(self.first_chunk_frames, self.chunk_frames) - st.pending_frames - extra)

    def open(self, utterance_id: UtteranceId) -> None:
        with self._lock:
            if utterance_id in self._utterances:
                raise UtteranceStateError(
                    f"utterance {utterance_id!r} is already open; finish or cancel it before reusing the id"
                )
            with self._on_cuda_stream():
                self._utterances[utterance_id] = Utterance(slot=self._pool.acquire())

    def cancel(self, utterance_id: UtteranceId) -> None:
        """Drop an utterance and its queued frames without producing its remaining audio."""
        with self._lock:
            self._close(self._get(utterance_id), utterance_id)

    @contextmanager
    def utterance(self, utterance_id: UtteranceId) -> Iterator[UtteranceId]:
        """`open` on entry; `cancel` on exit unless the utterance was finished inside the block."""
        self.open(utterance_id)
        try:
            yield utterance_id
        finally:
            if utterance_id in self._utterances:
                self.cancel(utterance_id)

    def close(self) -> None:
        """Cancel every open utterance."""
        for utterance_id in self.active:
            self.cancel(utterance_id)

    def __enter__(self) -> StreamingVocoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- vocoding ---
    def push(self, utterance_id: UtteranceId, frames: Frames) -> np.ndarray:
        """Queue `(k, n_mels)` frames; returns the PCM that became final (possibly empty)."""
        return self.step({utterance_id: frames})[utterance_id]

    def finish(self, utterance_id: UtteranceId) -> np.ndarray:
        """Vocode everything still queued and close the utterance; returns the last PCM."""
        return self.step({}, finish=(utterance_id,))[utterance_id]

    def step(
        self,
        frames: Mapping[UtteranceId, Frames],
        finish: Iterable[UtteranceId] = (),
        *,
        eager: Container[UtteranceId] = (),
    ) -> dict[UtteranceId, np.ndarray]:
        """`submit(...).wait()`: one batched forward over every ready utterance."""
        return self.submit(frames, finish, eager=eager).wait()

    def submit(
        self,
        frames: Mapping[UtteranceId, Frames],
        finish: Iterable[UtteranceId] = (),
        *,
        after: torch.cuda.Event | torch.cuda.Stream | None = None,
        eager: Container[UtteranceId] = (),
        step_rows: tuple[Tensor, Mapping[UtteranceId, int]] | None = None,
    ) -> StepResult:
        """Queue `frames`, finish the `finish` utterances, vocode all ready utterances in one batch.

        `step_rows = (mel, rows)`: more frames, row `rows[uid]` of one tensor `mel (R, k, n_mels)` for
        each utterance (one engine step's mel head output), queued without a tensor per row.

        An utterance in `eager` whose first chunk is out is ready with any pending frame, whatever the
        chunk schedule says (for a client about to run out of audio).

        Returns a `StepResult` whose `wait()` gives `{utterance_id: float32 PCM (n,)}` for every id in
        `frames` or `finish` (empty arrays for utterances that produced nothing). On CPU the work is
        done on return; on CUDA it is queued on the vocoder's CUDA stream (see module docstring for
        `after`). Finished utterances are closed: their ids may be opened again.
        """
        with self._lock:
            finishing = list(dict.fromkeys(finish))
            step_mel, rows = step_rows if step_rows is not None else (None, {})
            ids = list(dict.fromkeys([*frames, *rows, *finishing]))
            utterances = {uid: self._get(uid) for uid in ids}
            new = {
                uid: as_frames(uid, f, self.config.n_mels, self.device) for uid, f in frames.items()
            }  # validate all first
            mel = as_step(step_mel, self.config.n_mels, self.device) if step_mel is not None and rows else None
            for uid, t in new.items():
                if t.shape[0]:
                    st = utterances[uid]
                    st.pending.append(t)
                    st.pending_frames += t.shape[0]
                    st.received += t.shape[0]
            if mel is not None:
                k, shape = mel.shape[1], mel.shape[1:]
                for uid, row in rows.items():
                    st = utterances[uid]
                    st.pending.append(Row(mel, row, shape))
                    st.pending_frames += k
                    st.received += k
            done = set(finishing)
            ready = [
                uid
                for uid in ids
                if (uid in done and utterances[uid].received > 0)
                or utterances[uid].is_ready(self.first_chunk_frames, self.chunk_frames)
                or (uid in eager and utterances[uid].consumed > 0 and utterances[uid].pending_frames > 0)
            ]
            result = self._run(ids, ready, utterances, done, after) if ready else StepResult(ids, int16=self.int16_pcm)
            for uid in finishing:
                self._close(utterances[uid], uid)
            return result

    # --- internals ---
    def _on_cuda_stream(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self._cuda_stream) if self._cuda_stream is not None else nullcontext()

    def _get(self, utterance_id: UtteranceId) -> Utterance:
        try:
            return self._utterances[utterance_id]
        except KeyError:
            raise UnknownUtteranceError(
                f"utterance {utterance_id!r} is not open: call open({utterance_id!r}) "
                "first (finished and cancelled utterances are closed)"
            ) from None

    def _close(self, st: Utterance, utterance_id: UtteranceId) -> None:
        del self._utterances[utterance_id]
        self._pool.release(st.slot)

    def _to_device(self, t: Tensor) -> Tensor:
        if self._cuda_stream is not None and t.device.type == "cpu":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def _run(
        self,
        ids: list[UtteranceId],
        ready: list[UtteranceId],
        utterances: dict[UtteranceId, Utterance],
        done: set[UtteranceId],
        after: torch.cuda.Event | torch.cuda.Stream | None,
    ) -> StepResult:
        c = self.config
        hop, lookahead = c.hop_length, c.lookahead
        rows = [utterances[uid] for uid in ready]
        seqs, lengths, skips = [], [], []
        for uid, st in zip(ready, rows):
            parts = list(st.pending)
            if uid in done and lookahead:  # realign the lookahead conv: zeros = offline padding
                parts.append(np.zeros((lookahead, c.n_mels), np.float32))
            seqs.append(parts)
            lengths.append(st.pending_frames + (lookahead if uid in done else 0))
            skips.append(max(0, lookahead - st.consumed))
        on_gpu = [
            t.mel if isinstance(t, Row) else t
            for parts in seqs
            for t in parts
            if isinstance(t, Tensor | Row) and self._cuda_stream is not None
        ]
        n = max(1, max(lengths))
        with self._on_cuda_stream(), torch.inference_mode():
            if self._cuda_stream is not None:
                if isinstance(after, torch.cuda.Event):
                    self._cuda_stream.wait_event(after)
                elif isinstance(after, torch.cuda.Stream):
                    self._cuda_stream.wait_stream(after)
                elif on_gpu:
                    self._cuda_stream.wait_stream(torch.cuda.current_stream(self.device))
                # Keep the producer's allocator from reusing them too early: once per storage (the
                # in-engine vocoder's frames are rows of one step tensor).
                for t in {t.untyped_storage().data_ptr(): t for t in on_gpu}.values():
                    t.record_stream(self._cuda_stream)
            meta = np.array([[st.slot for st in rows], lengths, skips], dtype=np.int64)
            bucket = self._graphs.get(len(rows), n) if self._graphs is not None else None
            if bucket is not None:
                wave = bucket.run(self._batch_mel(seqs, bucket.frames, bucket.rows), meta)
                self.graph_passes += 1
            else:
                slots, lengths_t, skips_t = self._to_device(torch.from_numpy(meta))
                wave = self._pass(self._batch_mel(seqs, n), slots, lengths_t, skips_t)
                self.eager_passes += 1
            spans = {}
            for row, (uid, st, length) in enumerate(zip(ready, rows, lengths)):
                # Local sample i of this chunk is output sample i + offset of the utterance.
                offset = (st.consumed - lookahead) * hop - c.pad
                st.consumed += length
                end = st.received * hop if uid in done else st.consumed * hop - lookahead * hop - c.pad
                end = max(end, st.emitted)
                spans[uid] = (row, st.emitted - offset, end - offset)
                st.emitted = end
                st.pending, st.pending_frames = [], 0
            width = max(hi for _, _, hi in spans.values())
            wave = wave[:, :width]
            if self.int16_pcm:  # to_int16's rule: clip, scale, truncate toward zero
                wave = (wave.float().clamp(-1.0, 1.0) * 32767.0).to(torch.int16)
            event = None
            if self._cuda_stream is not None:
                host = torch.empty(wave.shape, dtype=wave.dtype, pin_memory=True)
                host.copy_(wave, non_blocking=True)
                event = torch.cuda.Event()
                event.record(self._cuda_stream)
                wave = host
        return StepResult(ids, wave, spans, event, int16=self.int16_pcm)

    def _pass(self, mel: Tensor, slots: Tensor, lengths: Tensor, skips: Tensor) -> Tensor:
        """The device work of one pass (`vocode_pass` on this vocoder's state pool)."""
        return vocode_pass(self.vocoder, self._pool, mel, slots, lengths, skips)

    def _batch_mel(self, seqs: list[list[np.ndarray | Tensor | Row]], n: int, rows: int | None = None) -> Tensor:
        """Right-padded `(rows, n_mels, n)` float32 batch on the vocoder's device (vocoder/batch.py)."""
        return batch_mel(seqs, n, self.config.n_mels, self.device, self._to_device, rows)
