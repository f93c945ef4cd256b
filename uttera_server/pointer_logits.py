"""Logits processor that keeps the pointer monotonic and the utterance finite.

Rules per request (docs/model-format.md): the first generated token is pointer 0; afterwards the
pointer moves by 0..max_advance and never past the last phoneme; it may dwell on one phoneme at most
`max_steps_per_phoneme` steps; STOP is allowed only on the last phoneme (and forced once the dwell
limit is reached there). So every request ends within `n_phonemes * max_steps_per_phoneme + 1`
steps whatever the weights, and random-weight models cannot skip back, loop or run away.
"""

import torch
from vllm.config import VllmConfig
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

from .pointer_rules import pointer_window


class _Track:
    __slots__ = ("n_phonemes", "outputs")

    def __init__(self, n_phonemes: int, outputs: list[int]):
        self.n_phonemes = n_phonemes
        self.outputs = outputs  # live reference to the request's generated tokens


class PointerLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        config = vllm_config.model_config.hf_config
        self.offset = int(config.pointer_offset)
        self.stop = int(config.stop_token_id)
        self.max_advance = int(getattr(config, "max_advance", 3))
        self.max_dwell = int(getattr(config, "max_steps_per_phoneme", 10))
        self.device = device
        self.tracks: dict[int, _Track] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.tracks.pop(index, None)
        for index, _params, prompt_ids, outputs in batch_update.added:
            self.tracks[index] = _Track(len(prompt_ids or ()), outputs)
        for a, b, direction in batch_update.moved:
            ta, tb = self.tracks.pop(a, None), self.tracks.pop(b, None)
            if ta is not None:
                self.tracks[b] = ta
            if tb is not None and direction.name == "SWAP":
                self.tracks[a] = tb

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.tracks:
            return logits
        rows, lows, highs, stops = [], [], [], []
        for index, track in self.tracks.items():
            if index >= logits.shape[0]:
                continue
            lo, hi, stop = pointer_window(track.outputs, track.n_phonemes, max_advance=self.max_advance,
                                          max_dwell=self.max_dwell, offset=self.offset)
            rows.append(index)
            lows.append(self.offset + lo)
            highs.append(self.offset + hi)
            stops.append(stop)
        if not rows:
            return logits
        vocab = torch.arange(logits.shape[1], device=logits.device)
        lo_t = torch.tensor(lows, device=logits.device).unsqueeze(1)
        hi_t = torch.tensor(highs, device=logits.device).unsqueeze(1)
        allowed = (vocab >= lo_t) & (vocab <= hi_t)
        allowed[:, self.stop] = torch.tensor(stops, device=logits.device)
        row_t = torch.tensor(rows, device=logits.device)
        sub = logits[row_t]
        logits[row_t] = sub.masked_fill(~allowed, float("-inf"))
        return logits
