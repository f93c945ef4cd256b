"""`StepResult`: the PCM of one `StreamingVocoder.submit`, possibly still being computed on a GPU."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import torch
from torch import Tensor


class StepResult:
    """Handle returned by `StreamingVocoder.submit`.

    `event` is the CUDA event recorded after the PCM was copied to (pinned) host memory, or None
    on CPU (already done). `wait()` blocks the calling thread only, releasing the GIL while it
    waits, and returns `{utterance_id: PCM (n,)}` at the vocoder's sample rate: float32 copies, or with
    an int16 pass (`StreamingVocoder(int16_pcm=True)`) read-only int16 views of the pass's one host buffer.
    """

    __slots__ = ("ids", "event", "int16", "_audio", "_spans", "_result")

    def __init__(
        self,
        ids: list[Hashable],
        audio: Tensor | None = None,
        spans: dict[Hashable, tuple[int, int, int]] | None = None,
        event: torch.cuda.Event | None = None,
        int16: bool = False,
    ):
        """`int16`: the pass made int16 PCM (`audio` is int16; without audio, the empties are int16 too)."""
        self.ids = ids
        self.event = event
        self.int16 = int16
        self._audio = audio
        self._spans = spans or {}
        self._result: dict[Hashable, np.ndarray] | None = None

    def done(self) -> bool:
        """True once `wait()` would return without blocking (poll this from an event loop)."""
        return self.event is None or self.event.query()

    def wait(self) -> dict[Hashable, np.ndarray]:
        if self._result is None:
            if self.event is not None:
                self.event.synchronize()
            audio = self._audio.numpy() if self._audio is not None else None
            result = {}
            if self.int16:
                empty = np.zeros(0, dtype=np.int16)
                empty.flags.writeable = False
                if audio is not None:
                    audio.flags.writeable = False
                for uid in self.ids:
                    row, lo, hi = self._spans.get(uid, (0, 0, 0))
                    result[uid] = audio[row, lo:hi] if hi > lo and audio is not None else empty
            else:
                for uid in self.ids:
                    row, lo, hi = self._spans.get(uid, (0, 0, 0))
                    result[uid] = (
                        audio[row, lo:hi].astype(np.float32, copy=True)
                        if hi > lo and audio is not None  # spans are only given with audio
                        else np.zeros(0, dtype=np.float32)
                    )
            self._result = result
            self._audio = None  # let pinned host memory go back to the allocator
        return self._result
