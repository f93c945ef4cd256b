"""Patch of `vllm.outputs` (`CompletionOutput`, `RequestOutput.add`).

`CompletionOutput.mel_chunks` is a list of `(frames_per_step, n_mels)` float32 tensors, one per decode
step that voiced a pointer, in step order. When the `RequestOutputCollector` merges outputs because the
consumer lags (DELTA), the stock `add` extends `token_ids` only; here the chunks are concatenated too.
"""

from vllm.outputs import CompletionOutput, RequestOutput

_MARK = "_uttera_patched"


def patch() -> None:
    if getattr(RequestOutput, _MARK, False):
        return
    CompletionOutput.mel_chunks = ()  # class default; instances get a list
    original_add = RequestOutput.add

    def add(self, next_output, aggregate: bool) -> None:
        merged = {}
        if aggregate:
            for nxt in next_output.outputs:
                for cur in self.outputs:
                    if cur.index == nxt.index:
                        merged[nxt.index] = list(cur.mel_chunks) + list(nxt.mel_chunks)
        original_add(self, next_output, aggregate)
        for cur in self.outputs:
            if cur.index in merged:
                cur.mel_chunks = merged[cur.index]

    RequestOutput.add = add
    setattr(RequestOutput, _MARK, True)
