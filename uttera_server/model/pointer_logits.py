"""Logits processor that keeps the pointer monotonic and the utterance finite.

Rules per request (docs/model-format.md): the first generated token is pointer 0; afterwards the
pointer moves by 0..max_advance and never past the last phoneme; it may dwell on one phoneme at most
`max_steps_per_phoneme` steps; STOP is allowed only on the last phoneme (and forced once the dwell
limit is reached there). So every request ends within `n_phonemes * max_steps_per_phoneme + 1`
steps whatever the weights, and random-weight models cannot skip back, loop or run away. The rules
are `pointer_rules.pointer_window`'s; tests/engine/test_pointer_rules.py checks this vectorized form
against it.
"""

import numpy as np
import torch
from vllm.config import VllmConfig
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class PointerTracks:
    """Every batch row's pointer state, in arrays indexed by the row (vLLM's persistent batch index),
    advanced each step from the requests' generated tokens: the same result as `pointer_window` on each
    whole list, without rescanning the dwell or looping over rows in Python beyond two list reads each."""

    def __init__(self, capacity: int = 64):
        self.outputs: list[list[int] | None] = [None] * capacity  # live references to generated tokens
        self.present = np.zeros(capacity, bool)
        self.n_phonemes = np.zeros(capacity, np.int64)
        self.seen = np.zeros(capacity, np.int64)  # tokens folded into `last`/`dwell`
        self.last = np.full(capacity, -1, np.int64)  # the last token (-1: none yet)
        self.dwell = np.zeros(capacity, np.int64)  # how many of the last tokens equal it, capped

    def __len__(self) -> int:
        return int(self.present.sum())

    def __contains__(self, index: int) -> bool:
        return index < len(self.outputs) and bool(self.present[index])

    def _grow(self, index: int) -> None:
        n = max(2 * len(self.outputs), index + 1)
        extra = n - len(self.outputs)
        self.outputs.extend([None] * extra)
        self.present = np.concatenate([self.present, np.zeros(extra, bool)])
        for name, fill in (("n_phonemes", 0), ("seen", 0), ("last", -1), ("dwell", 0)):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(extra, fill, np.int64)]))

    def add(self, index: int, n_phonemes: int, outputs: list[int]) -> None:
        if index >= len(self.outputs):
            self._grow(index)
        self.outputs[index] = outputs
        self.present[index] = True
        self.n_phonemes[index], self.seen[index], self.last[index], self.dwell[index] = n_phonemes, 0, -1, 0

    def remove(self, index: int) -> None:
        if index < len(self.outputs):
            self.outputs[index] = None
            self.present[index] = False

    def move(self, a: int, b: int, swap: bool) -> None:
        """vLLM moved row a to b (b's old row is dropped), or swapped them."""
        if max(a, b) >= len(self.outputs):
            self._grow(max(a, b))
        pair = [a, b]
        if swap:
            self.outputs[a], self.outputs[b] = self.outputs[b], self.outputs[a]
            for arr in (self.present, self.n_phonemes, self.seen, self.last, self.dwell):
                arr[pair] = arr[pair[::-1]]
        else:
            self.outputs[b] = self.outputs[a]
            for arr in (self.present, self.n_phonemes, self.seen, self.last, self.dwell):
                arr[b] = arr[a]
            self.remove(a)

    def advance(self, n_rows: int, max_dwell: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Fold the tokens generated since the last call into the state of rows < n_rows; returns those
        rows and their phoneme counts, last tokens and dwells (None: no tracked row)."""
        rows = np.flatnonzero(self.present[:n_rows])
        if not rows.size:
            return None
        outputs = self.outputs
        index = rows.tolist()
        lens = np.array([len(outputs[i]) for i in index], np.int64)
        new = lens - self.seen[rows]
        one = np.flatnonzero(new == 1)  # the usual case: one token since the last step
        if one.size:
            at = rows[one]
            token = np.array([outputs[i][-1] for i in at.tolist()], np.int64)
            same = token == self.last[at]
            self.dwell[at] = np.where(same, np.minimum(self.dwell[at] + 1, max_dwell), 1)
            self.last[at] = token
        for i in rows[new > 1].tolist():  # several at once (a row's first step after a recompute)
            last, dwell = int(self.last[i]), int(self.dwell[i])
            for token in outputs[i][int(self.seen[i]) :]:
                last, dwell = (last, min(dwell + 1, max_dwell)) if token == last else (token, 1)
            self.last[i], self.dwell[i] = last, dwell
        self.seen[rows] = lens
        return rows, self.n_phonemes[rows], self.last[rows], self.dwell[rows]


class PointerLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        config = vllm_config.model_config.hf_config
        self.offset = int(config.pointer_offset)
        self.stop = int(config.stop_token_id)
        self.max_advance = int(getattr(config, "max_advance", 3))
        self.max_dwell = int(getattr(config, "max_steps_per_phoneme", 10))
        self.device = device
        # A copy from pageable memory makes the host wait for the device's queued work (CUDA stages it),
        # which would undo async scheduling's overlap: the bounds go through pinned memory where there is any.
        self.pin = is_pin_memory and device.type == "cuda"
        self.tracks = PointerTracks()

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        tracks = self.tracks
        for index in batch_update.removed:
            tracks.remove(index)
        for index, _params, prompt_ids, outputs in batch_update.added:
            tracks.add(index, len(prompt_ids or ()), outputs)
        for a, b, direction in batch_update.moved:
            tracks.move(a, b, swap=direction.name == "SWAP")

    def bounds(self, n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """This step's allowed token range `[lo, hi]` and whether STOP is allowed, for every tracked row
        below n_rows: `(rows, lo, hi, stop)` (`pointer_window`'s rules, vectorized; None: no row)."""
        state = self.tracks.advance(n_rows, self.max_dwell)
        if state is None:
            return None
        rows, n_ph, last_tok, dwell = state
        last = n_ph - 1
        started = last_tok >= 0
        p = np.clip(last_tok - self.offset, 0, np.maximum(last, 0))
        lo = np.where(dwell >= self.max_dwell, p + 1, p)
        hi = np.minimum(p + self.max_advance, last)
        at_end = started & (p == last)
        empty_end = at_end & (lo > hi)
        lo = np.where(empty_end, 1, np.where(at_end, lo, np.minimum(lo, hi)))
        hi = np.where(empty_end, 0, hi)
        lo = np.where(started, lo, 0)
        hi = np.where(started, hi, 0)
        return rows, self.offset + lo, self.offset + hi, at_end

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask every tracked row to its allowed tokens (`bounds`): one host-to-device copy (from pinned
        memory on CUDA: the host does not wait for the device) and a handful of kernels per step."""
        b = self.bounds(logits.shape[0])
        if b is None:
            return logits
        rows, lo, hi, stop = b
        packed = torch.from_numpy(np.stack([rows, lo, hi, stop.astype(np.int64)]))
        if self.pin:
            packed = packed.pin_memory()
        row_t, lo_t, hi_t, stop_t = packed.to(logits.device, non_blocking=True).unbind(0)
        vocab = torch.arange(logits.shape[1], device=logits.device)
        allowed = (vocab >= lo_t.unsqueeze(1)) & (vocab <= hi_t.unsqueeze(1))
        allowed[:, self.stop] = stop_t.bool()
        logits[row_t] = logits[row_t].masked_fill(~allowed, float("-inf"))
        return logits
