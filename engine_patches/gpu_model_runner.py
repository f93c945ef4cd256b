"""Patch of `vllm.v1.worker.gpu_model_runner.GPUModelRunner.sample_tokens` (also the CPU runner's).

The model leaves one mel chunk per logits row in `model.last_mel` (`(num_reqs, frames_per_step,
n_mels)`, rows in `input_batch.req_ids` order). After the stock sampling and bookkeeping, a row gets
its chunk in `pooler_output` iff it sampled a token and the token it consumed was a pointer, i.e. the
request now has at least two generated tokens. That rule only reads token state, so it stays right
after preemption-recompute (the recomputed last position is a pointer) and prefix-cache hits; rows of a
partial prefill sampled nothing and get `None`, which makes the scheduler emit nothing for them.
"""

import torch
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

_MARK = "_uttera_patched"


def _attach_mel(runner: GPUModelRunner, output: ModelRunnerOutput, sampled: list[bool]) -> None:
    model = runner.get_model()
    mel = getattr(model, "last_mel", None)
    if mel is None or not output.req_ids:
        return
    model.last_mel = None
    # TODO(perf issue): on CUDA this copy syncs the device; a pinned async copy belongs here.
    mel = mel.detach().to("cpu", torch.float32)
    chunks: list[torch.Tensor | None] = [None] * len(output.req_ids)
    for i, req_id in enumerate(output.req_ids):
        if i >= mel.shape[0] or not sampled[i]:
            continue
        state = runner.requests.get(req_id)
        if state is not None and len(state.output_token_ids) >= 2:
            chunks[i] = mel[i].clone()
    if any(c is not None for c in chunks):
        output.pooler_output = chunks


def patch() -> None:
    if getattr(GPUModelRunner, _MARK, False):
        return
    original = GPUModelRunner.sample_tokens

    def sample_tokens(self, grammar_output):
        output = original(self, grammar_output)
        if isinstance(output, ModelRunnerOutput):
            _attach_mel(self, output, [bool(t) for t in output.sampled_token_ids])
        elif hasattr(output, "_model_runner_output"):
            # Async scheduling (CUDA): token ids are filled in later, so "sampled" comes from the
            # rows the runner did not discard; attach to the wrapped output.
            inner = output._model_runner_output
            invalid = set(output._invalid_req_indices)
            _attach_mel(self, inner, [i not in invalid for i in range(len(inner.req_ids))])
        return output

    GPUModelRunner.sample_tokens = sample_tokens
    setattr(GPUModelRunner, _MARK, True)
