"""`StatePool`: the streaming vocoder's per-utterance tensors, stored in slots of batched tensors.

Each utterance owns one slot holding
  * one conv cache per streamable conv, `(C, kernel_size - 1)` input frames (model dtype), and
  * the overlap-add tail, `(2, n_fft - hop)` float32 [signal, envelope] not yet final.

A step gathers the slots of the utterances it vocodes into a batch (`index_select`), runs, and writes
the new state back (`index_copy_`): a handful of kernels per step whatever the number of utterances,
which matters on CUDA. Capacity doubles when all slots are taken; slots are zeroed when acquired.
Call every method from the thread (and, on CUDA, inside the CUDA stream) that runs the vocoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from vocoder.model import Vocoder


class StatePool:
    def __init__(
        self,
        cache_shapes: list[tuple[int, int]],
        overlap: int,
        *,
        device: torch.device,
        dtype: torch.dtype,
        capacity: int = 8,
    ):
        self._cache_shapes = cache_shapes
        self._overlap = overlap
        self._device, self._dtype = device, dtype
        self._capacity = 0
        self.caches: list[Tensor] = []
        self.tail = torch.empty(0)
        self._free: list[int] = []
        self.generation = 0  # bumped whenever the tensors are reallocated (captured graphs go stale)
        self._grow(max(1, capacity))

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def in_use(self) -> int:
        return self._capacity - len(self._free)

    def _grow(self, capacity: int) -> None:
        def grown(old: Tensor | None, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
            new = torch.zeros((capacity, *shape), device=self._device, dtype=dtype)
            if old is not None and old.shape[0]:
                new[: old.shape[0]].copy_(old)
            return new

        olds: list[Tensor | None] = [*self.caches] or [None] * len(self._cache_shapes)
        self.caches = [grown(old, shape, self._dtype) for old, shape in zip(olds, self._cache_shapes)]
        self.tail = grown(self.tail if self._capacity else None, (2, self._overlap), torch.float32)
        # Pop from the end: lowest free slot first.
        self._free = sorted(set(self._free) | set(range(self._capacity, capacity)), reverse=True)
        self._capacity = capacity
        self.generation += 1

    def acquire(self) -> int:
        """Take a free slot (growing if needed) with zeroed state; returns its index."""
        if not self._free:
            self._grow(2 * self._capacity)
        slot = self._free.pop()
        for cache in self.caches:
            cache[slot].zero_()
        self.tail[slot].zero_()
        return slot

    def release(self, slot: int) -> None:
        if not 0 <= slot < self._capacity or slot in self._free:
            raise ValueError(f"slot {slot} is not in use")
        self._free.append(slot)
        self._free.sort(reverse=True)

    def gather(self, slots: Tensor) -> tuple[list[Tensor], Tensor]:
        """State of `slots` (int64 on the pool's device): caches `[(B, C, K - 1)]`, tail `(B, 2, ov)`."""
        return [c.index_select(0, slots) for c in self.caches], self.tail.index_select(0, slots)

    def scatter(self, slots: Tensor, caches: list[Tensor], tail: Tensor) -> None:
        """Write back the state returned by a step for `slots`."""
        for pooled, new in zip(self.caches, caches):
            pooled.index_copy_(0, slots, new.to(pooled.dtype))
        self.tail.index_copy_(0, slots, tail)


def vocode_pass(
    vocoder: Vocoder, pool: StatePool, mel: Tensor, slots: Tensor, lengths: Tensor, skips: Tensor
) -> Tensor:
    """The device work of one streaming pass (what a CUDA graph captures): `mel (B, n_mels, N)` float32,
    `slots`/`lengths`/`skips (B,)` int64 -> waveform `(B, N * hop + n_fft - hop)`; the utterances' state is
    read from and written back to their slots of `pool`."""
    n = mel.shape[-1]
    j = torch.arange(n, device=mel.device).view(1, n)
    valid = (j >= skips.view(-1, 1)) & (j < lengths.view(-1, 1))
    caches, tail = pool.gather(slots)
    frames, caches = vocoder.forward_chunk(mel, caches, lengths, valid)
    wave, tail = vocoder.head.overlap_add_step(frames, valid, tail, lengths)
    pool.scatter(slots, caches, tail)
    return wave
