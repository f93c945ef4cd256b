"""Patch of `vllm.v1.engine.output_processor` (`OutputProcessor.process_outputs`,
`RequestState._new_completion_output`).

For generate requests (those with a detokenizer), a `pooling_output` is a mel chunk: it is copied out
of the ZMQ frame it arrived in (it is a read-only view), kept in the request state in step order, and
the field is cleared so the stock code builds a normal `RequestOutput`. Each new `CompletionOutput`
takes the pending chunks (DELTA) or all chunks so far (CUMULATIVE / FINAL_ONLY) as `mel_chunks`.
Outputs held back by `stream_interval` keep their chunks pending, so none is dropped.
"""

from typing import Any

import torch
from vllm.outputs import CompletionOutput
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine import EngineCoreOutput, FinishReason
from vllm.v1.engine.output_processor import OutputProcessor, OutputProcessorOutput, RequestState

from .outputs import set_mel_chunks

_MARK = "_uttera_patched"
_PENDING = "uttera_mel"  # RequestState attribute: the request's chunks not handed out yet


def patch() -> None:
    if getattr(OutputProcessor, _MARK, False):
        return
    original_process = OutputProcessor.process_outputs
    original_completion = RequestState._new_completion_output

    def process_outputs(
        self: OutputProcessor, engine_core_outputs: list[EngineCoreOutput], *args: Any, **kwargs: Any
    ) -> OutputProcessorOutput:
        for out in engine_core_outputs:
            chunk = out.pooling_output
            if chunk is None:
                continue
            state = self.request_states.get(out.request_id)
            if state is None or state.detokenizer is None:
                continue  # a real pooling request: leave it to the stock path
            if not hasattr(state, _PENDING):
                setattr(state, _PENDING, [])
            if chunk.numel():
                pending: list[torch.Tensor] = getattr(state, _PENDING)
                pending.append(chunk.clone())
            out.pooling_output = None
        return original_process(self, engine_core_outputs, *args, **kwargs)

    def _new_completion_output(
        self: RequestState, token_ids: list[int], finish_reason: FinishReason | None, stop_reason: int | str | None
    ) -> CompletionOutput:
        completion = original_completion(self, token_ids, finish_reason, stop_reason)
        chunks: list[torch.Tensor] | None = getattr(self, _PENDING, None)
        if not chunks:
            set_mel_chunks(completion, [])
        elif self.output_kind == RequestOutputKind.DELTA:
            set_mel_chunks(completion, chunks[:])
            chunks.clear()  # sent chunks are never read again in DELTA mode
        else:
            set_mel_chunks(completion, list(chunks))
        return completion

    # The patch itself: vLLM's methods replaced on the class.
    OutputProcessor.process_outputs = process_outputs  # type: ignore[method-assign]
    RequestState._new_completion_output = _new_completion_output  # type: ignore[method-assign]
    setattr(OutputProcessor, _MARK, True)
