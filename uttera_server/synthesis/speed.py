"""Speaking-rate change on an utterance's mel, before the vocoder.

`MelTimeScale(speed)` resamples log-mel frames in time by linear interpolation: output frame j sits at
input frame position `j * speed`, so speed 2.0 halves the duration and keeps the pitch (the vocoder
makes the waveform from the spectral envelope). It is streaming and exact: pushing frames in any
chunking gives the same output as pushing them all at once. Pure: no I/O, no threads.
"""

import numpy as np

MIN_SPEED, MAX_SPEED = 0.25, 4.0


class MelTimeScale:
    def __init__(self, speed: float):
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be in [{MIN_SPEED}, {MAX_SPEED}], got {speed}")
        self.speed = float(speed)
        self._tail: np.ndarray | None = None  # last input frame, (n_mels,)
        self._received = 0  # input frames seen
        self._emitted = 0  # output frames produced

    def push(self, frames: np.ndarray) -> np.ndarray:
        """`(k, n_mels)` input frames -> `(m, n_mels)` output frames that became computable."""
        if self.speed == 1.0:
            return frames
        if frames.shape[0] == 0:
            return frames
        base = self._received - (1 if self._tail is not None else 0)
        window = frames if self._tail is None else np.concatenate([self._tail[None], frames])
        self._received += frames.shape[0]
        self._tail = frames[-1]
        # Output j needs input frames floor(j*speed) and floor(j*speed)+1 (< received).
        last = self._received - 1
        n_out = int(np.floor(last / self.speed)) + 1 - self._emitted
        if last > 0 and (n_out + self._emitted - 1) * self.speed >= last:
            n_out -= 1  # the final position needs its right neighbour: wait for it (or flush)
        if n_out <= 0:
            return frames[:0]
        pos = (np.arange(self._emitted, self._emitted + n_out) * self.speed) - base
        self._emitted += n_out
        return _interp(window, pos)

    def flush(self) -> np.ndarray:
        """Frames still owed at the end of the utterance (the final position, if any)."""
        if self.speed == 1.0 or self._tail is None:
            return np.zeros((0, 0), np.float32)
        last = self._received - 1
        positions = [j * self.speed for j in range(self._emitted, int(np.floor(last / self.speed)) + 1)]
        self._emitted += len(positions)
        if not positions:
            return np.zeros((0, self._tail.shape[0]), self._tail.dtype)
        return np.repeat(self._tail[None], len(positions), axis=0)


def _interp(window: np.ndarray, pos: np.ndarray) -> np.ndarray:
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, window.shape[0] - 1)
    w = (pos - lo)[:, None].astype(window.dtype)
    out: np.ndarray = window[lo] * (1 - w) + window[hi] * w
    return out


def scaled_frames(frames: int, speed: float) -> int:
    """Frames `MelTimeScale(speed)` makes of `frames` input frames (pushed, then flushed)."""
    if frames <= 0:
        return 0
    if speed == 1.0:
        return frames
    return int(np.floor((frames - 1) / speed)) + 1
