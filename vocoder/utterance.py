"""One utterance's state inside `StreamingVocoder` (vocoder/streaming.py), and its chunk schedule."""

from dataclasses import dataclass, field

import numpy as np
from torch import Tensor

from vocoder.batch import Row


@dataclass(slots=True)
class Utterance:
    slot: int  # its row of the vocoder's state pool
    pending: list[np.ndarray | Tensor | Row] = field(default_factory=list)  # host frames as numpy
    pending_frames: int = 0
    received: int = 0  # mel frames pushed so far
    consumed: int = 0  # frames fed to the network, finishing zero frames included
    emitted: int = 0  # PCM samples returned so far

    def frames_needed(self, first_chunk_frames: int, chunk_frames: int) -> int:
        """The next chunk's size: `first_chunk_frames`, then as many as already vocoded (chunks double)
        up to `chunk_frames`."""
        return min(chunk_frames, max(first_chunk_frames, self.consumed))

    def is_ready(self, first_chunk_frames: int, chunk_frames: int) -> bool:
        """Each chunk is at most as long as the audio already sent, so a client playing in real time has
        audio left while the next chunk is generated (a fixed large second chunk made every utterance
        stall once)."""
        return self.pending_frames >= self.frames_needed(first_chunk_frames, chunk_frames)
