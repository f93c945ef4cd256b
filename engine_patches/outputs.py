"""Patch of `vllm.outputs` (`CompletionOutput`, `RequestOutput.add`).

`CompletionOutput.mel_chunks` is a list of `(frames_per_step, n_mels)` float32 tensors, one per decode
step that voiced a pointer, in step order. When the `RequestOutputCollector` merges outputs because the
consumer lags (DELTA), the stock `add` extends `token_ids` only; here the chunks are concatenated too.
`mel_chunks()` and `set_mel_chunks()` are the typed access to that attribute (vLLM does not declare it).
"""

from collections.abc import Sequence

import torch
from vllm.outputs import CompletionOutput, RequestOutput

_MARK = "_uttera_patched"
_ATTR = "mel_chunks"


def mel_chunks(completion: CompletionOutput) -> Sequence[torch.Tensor]:
    """The mel chunks this output carries (after `patch()`; empty when none arrived)."""
    chunks: Sequence[torch.Tensor] = getattr(completion, _ATTR)
    return chunks


def set_mel_chunks(completion: CompletionOutput, chunks: Sequence[torch.Tensor]) -> None:
    setattr(completion, _ATTR, chunks)


def patch() -> None:
    if getattr(RequestOutput, _MARK, False):
        return
    setattr(CompletionOutput, _ATTR, ())  # class default; instances get a list
    original_add = RequestOutput.add

    def add(self: RequestOutput, next_output: RequestOutput, aggregate: bool) -> None:
        merged = {}
        if aggregate:
            for nxt in next_output.outputs:
                for cur in self.outputs:
                    if cur.index == nxt.index:
                        merged[nxt.index] = list(mel_chunks(cur)) + list(mel_chunks(nxt))
        original_add(self, next_output, aggregate)
        for cur in self.outputs:
            if cur.index in merged:
                set_mel_chunks(cur, merged[cur.index])

    RequestOutput.add = add  # type: ignore[method-assign]  # the patch itself
    setattr(RequestOutput, _MARK, True)
