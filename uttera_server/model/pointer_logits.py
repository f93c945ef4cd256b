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


class PointerTrack:
    """One request's pointer state, advanced incrementally from its generated tokens (the same result
    as `pointer_window` on the whole list, without rescanning the dwell every step)."""

    __slots__ = ("n_phonemes", "outputs", "seen", "last", "dwell")

    def __init__(self, n_phonemes: int, outputs: list[int]):
        self.n_phonemes = n_phonemes
        self.outputs = outputs  # live reference to the request's generated tokens
        self.seen = 0  # tokens of `outputs` folded into `last`/`dwell`
        self.last = -1  # the last token (-1: none yet)
        self.dwell = 0  # how many of the last tokens equal it, capped at max_dwell

    def advance(self, max_dwell: int) -> None:
        outputs = self.outputs
        for token in outputs[self.seen :]:
            if token == self.last:
                self.dwell = min(self.dwell + 1, max_dwell)
            else:
                self.last, self.dwell = token, 1
        self.seen = len(outputs)


class PointerLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        config = vllm_config.model_config.hf_config
        self.offset = int(config.pointer_offset)
        self.stop = int(config.stop_token_id)
        self.max_advance = int(getattr(config, "max_advance", 3))
        self.max_dwell = int(getattr(config, "max_steps_per_phoneme", 10))
        self.device = device
        self.tracks: dict[int, PointerTrack] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.tracks.pop(index, None)
        for index, _params, prompt_ids, outputs in batch_update.added:
            self.tracks[index] = PointerTrack(len(prompt_ids or ()), outputs)
        for a, b, direction in batch_update.moved:
            ta, tb = self.tracks.pop(a, None), self.tracks.pop(b, None)
            if ta is not None:
                self.tracks[b] = ta
            if tb is not None and direction.name == "SWAP":
                self.tracks[a] = tb

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask every tracked row to its allowed pointers (`pointer_window`'s rules, vectorized: a few
        host operations per row, one host-to-device copy and a handful of kernels per step)."""
        if not self.tracks:
            return logits
        n_rows = logits.shape[0]
        state = []
        for index, track in self.tracks.items():
            if index < n_rows:
                track.advance(self.max_dwell)
                state.append((index, track.n_phonemes, track.last, track.dwell))
        if not state:
            return logits
        rows, n_ph, last_tok, dwell = np.array(state, dtype=np.int64).T
        last = n_ph - 1
        started = last_tok >= 0
        p = np.clip(last_tok - self.offset, 0, np.maximum(last, 0))
        lo = np.where(dwell >= self.max_dwell, p + 1, p)
        hi = np.minimum(p + self.max_advance, last)
        at_end = started & (p == last)
        stop = at_end
        empty_end = at_end & (lo > hi)
        lo = np.where(empty_end, 1, np.where(at_end, lo, np.minimum(lo, hi)))
        hi = np.where(empty_end, 0, hi)
        lo = np.where(started, lo, 0)
        hi = np.where(started, hi, 0)
        packed = torch.from_numpy(np.stack([rows, self.offset + lo, self.offset + hi, stop.astype(np.int64)]))
        row_t, lo_t, hi_t, stop_t = packed.to(logits.device, non_blocking=True).unbind(0)
        vocab = torch.arange(logits.shape[1], device=logits.device)
        allowed = (vocab >= lo_t.unsqueeze(1)) & (vocab <= hi_t.unsqueeze(1))
        allowed[:, self.stop] = stop_t.bool()
        logits[row_t] = logits[row_t].masked_fill(~allowed, float("-inf"))
        return logits
