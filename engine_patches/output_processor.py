"""Patch of `vllm.v1.engine.output_processor` (`OutputProcessor.process_outputs`,
`RequestState._new_completion_output`).

For generate requests (those with a detokenizer), a `pooling_output` is a mel chunk: it is copied out
of the ZMQ frame it arrived in (it is a read-only view), kept in the request state in step order, and
the field is cleared so the stock code builds a normal `RequestOutput`. Each new `CompletionOutput`
takes the pending chunks (DELTA) or all chunks so far (CUMULATIVE / FINAL_ONLY) as `mel_chunks`.
Outputs held back by `stream_interval` keep their chunks pending, so none is dropped.
"""

from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine.output_processor import OutputProcessor, RequestState

_MARK = "_uttera_patched"


def patch() -> None:
    if getattr(OutputProcessor, _MARK, False):
        return
    original_process = OutputProcessor.process_outputs
    original_completion = RequestState._new_completion_output

    def process_outputs(self, engine_core_outputs, *args, **kwargs):
        for out in engine_core_outputs:
            chunk = out.pooling_output
            if chunk is None:
                continue
            state = self.request_states.get(out.request_id)
            if state is None or state.detokenizer is None:
                continue  # a real pooling request: leave it to the stock path
            if not hasattr(state, "uttera_mel"):
                state.uttera_mel = []
            if chunk.numel():
                state.uttera_mel.append(chunk.clone())
            out.pooling_output = None
        return original_process(self, engine_core_outputs, *args, **kwargs)

    def _new_completion_output(self, token_ids, finish_reason, stop_reason):
        completion = original_completion(self, token_ids, finish_reason, stop_reason)
        chunks = getattr(self, "uttera_mel", None)
        if not chunks:
            completion.mel_chunks = []
        elif self.output_kind == RequestOutputKind.DELTA:
            completion.mel_chunks = chunks[:]
            chunks.clear()  # sent chunks are never read again in DELTA mode
        else:
            completion.mel_chunks = list(chunks)
        return completion

    OutputProcessor.process_outputs = process_outputs
    RequestState._new_completion_output = _new_completion_output
    setattr(OutputProcessor, _MARK, True)
