"""The PCM of one pass, possibly still being computed on a GPU: `StepResult` (`StreamingVocoder.submit`) and
`StepPass` (`StepVocoder.submit`, `WindowedStepVocoder.submit`: vocoder/slot_frames.py)."""

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


class StepPass:
    """One `SlotFrames.submit`: for each entry `i` (an utterance that has new audio or finished),
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
