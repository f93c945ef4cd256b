"""Patch of `vllm.v1.worker.gpu_model_runner.GPUModelRunner` (`execute_model`, `sample_tokens`; the CPU
runner inherits both).

The model leaves one mel chunk per logits row in `model.step_mel` (`(num_reqs, frames_per_step,
n_mels)`, rows in `input_batch.req_ids` order; uttera_server/model/step_mel.py, the contract: one
`compute_logits` per step, taken here once per step). After the stock sampling and bookkeeping, a row
*voiced* its chunk iff it sampled a token and the token it consumed was a generated pointer: the request
now has at least two generated tokens and the one before this step's is not STOP. (Without async
scheduling a request that sampled STOP is never scheduled again; with it, the scheduler has already
scheduled the next step when it sees the STOP, and that step consumes STOP: its mel is not speech. Under
async scheduling this step's token is vLLM's -1 placeholder and the one before it has been filled in
before sampling, because the pointer logits processor needs the output tokens.) That rule only reads
token state, so it stays right after preemption-recompute (the recomputed last position is a pointer)
and prefix-cache hits; rows of a partial prefill sampled nothing.

A voiced chunk goes one of two ways, per request:
- requests with `extra_args[PCM_ARG]` (the server's default on CUDA): to the in-engine vocoder
  (engine_vocoder.py), which sends PCM on its own channel; the step output carries tokens only;
- other requests: into `ModelRunnerOutput.pooler_output` (the scheduler forwards it as
  `EngineCoreOutput.pooling_output`, a field typed `torch.Tensor | None`, so msgspec carries it across
  the process boundary unchanged), `None` for rows that voiced nothing.

Any output type other than the two vLLM 0.32 returns raises, so a change upstream cannot silently
produce empty audio.
"""

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from vllm.sequence import IntermediateTensors
from vllm.v1.outputs import AsyncModelRunnerOutput, ModelRunnerOutput
from vllm.v1.worker.gpu_model_runner import AsyncGPUModelRunnerOutput, GPUModelRunner

from uttera_server.model.step_mel import StepMel

from .engine_vocoder import CONFIG_KEY, EngineVocoder, EngineVocoderConfig
from .pauses import StepGaps
from .pcm_wire import PCM_ARG, PcmRoute

if TYPE_CHECKING:
    from vllm.v1.core.sched.output import GrammarOutput, SchedulerOutput

_MARK = "_uttera_patched"
_VOCODER = "_uttera_vocoder"  # GPUModelRunner attribute: its EngineVocoder (None: none), once made
_GAPS = "_uttera_step_gaps"  # GPUModelRunner attribute: its StepGaps (pauses.py), once made

RunnerOutput = ModelRunnerOutput | AsyncModelRunnerOutput | IntermediateTensors


class UnsupportedRunnerOutput(RuntimeError):
    pass


def _engine_vocoder(runner: GPUModelRunner) -> EngineVocoder | None:
    """The worker's in-engine vocoder, created on first use; None if the server did not configure one
    (or on a tensor-parallel rank other than 0, which computes the same mel)."""
    if hasattr(runner, _VOCODER):
        made: EngineVocoder | None = getattr(runner, _VOCODER)
        return made
    voc = None
    additional = runner.vllm_config.additional_config
    conf = additional.get(CONFIG_KEY) if isinstance(additional, dict) else None
    if conf is not None:
        from vllm.distributed import get_tensor_model_parallel_rank

        if get_tensor_model_parallel_rank() == 0:
            voc = EngineVocoder(runner.vllm_config.model_config.model, runner.device, EngineVocoderConfig(**conf))
    setattr(runner, _VOCODER, voc)
    return voc


def _step_gaps(runner: GPUModelRunner) -> StepGaps:
    gaps: StepGaps | None = getattr(runner, _GAPS, None)
    if gaps is None:
        gaps = StepGaps()
        setattr(runner, _GAPS, gaps)
    return gaps


def _route(runner: GPUModelRunner, req_id: str) -> PcmRoute | None:
    state = runner.requests.get(req_id)
    if state is None or state.sampling_params is None:
        return None
    arg = (state.sampling_params.extra_args or {}).get(PCM_ARG)
    return PcmRoute.from_arg(arg) if arg is not None else None


def voiced(output_token_ids: list[int], stop_token_id: int) -> bool:
    """Whether this step's row of a request with these generated tokens (this step's last) voiced its
    mel chunk: the token it consumed is a generated pointer (see the module docstring)."""
    return len(output_token_ids) >= 2 and output_token_ids[-2] != stop_token_id


def _route_mel(runner: GPUModelRunner, output: ModelRunnerOutput, sampled: list[bool]) -> None:
    step_mel = runner.get_model().step_mel
    if not isinstance(step_mel, StepMel):
        raise UnsupportedRunnerOutput(f"the engine's model is not uttera's (its step_mel is {type(step_mel).__name__})")
    mel = step_mel.take()
    stop = int(runner.model_config.hf_config.stop_token_id)
    voc = _engine_vocoder(runner)
    req_ids = output.req_ids
    if mel is None or not req_ids:
        if voc is not None:
            voc.step()
        return
    n = min(mel.shape[0], len(req_ids))  # rows of a partial prefill past the logits rows sampled nothing
    requests = runner.requests
    if voc is None:
        slots = np.full(len(req_ids), -1, np.int64)
    else:
        slots = voc.slots(req_ids)
        for i in np.flatnonzero(slots < 0).tolist():  # not an utterance yet: open it if it asks for PCM
            if (route := _route(runner, req_ids[i])) is not None:
                voc.open(req_ids[i], route)
                slots[i] = voc.slot_of[req_ids[i]]
    took = np.flatnonzero(np.asarray(sampled[:n], bool))
    voiced_rows = np.asarray(
        [
            i
            for i in took.tolist()
            if (state := requests.get(req_ids[i])) is not None and voiced(state.output_token_ids, stop)
        ],
        np.int64,
    )
    pcm = slots[voiced_rows] >= 0
    if voc is not None:
        voc.step(mel, slots[voiced_rows[pcm]], voiced_rows[pcm])
    host_rows = voiced_rows[~pcm].tolist()
    if host_rows:
        # One copy of the rows that want mel (a sync on CUDA; PCM requests never take this path).
        host = mel[host_rows].detach().to("cpu", torch.float32)
        chunks: list[torch.Tensor | None] = [None] * len(req_ids)
        for j, i in enumerate(host_rows):
            chunks[i] = host[j]
        output.pooler_output = chunks


def check_runner_mode() -> None:
    """The patches cover the older runner only (vLLM 0.32's model runner v2 builds its output elsewhere)."""
    if os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "0") not in ("0", "false", "False", ""):
        raise UnsupportedRunnerOutput(
            "uttera's engine patches cover vLLM's GPUModelRunner, not model runner v2: unset "
            "VLLM_USE_V2_MODEL_RUNNER (or set it to 0)"
        )


def patch() -> None:
    if getattr(GPUModelRunner, _MARK, False):
        return
    original_execute: Callable[..., RunnerOutput | None] = GPUModelRunner.execute_model
    # torch types a method under a bare `@torch.inference_mode` as the decorator object, not a function.
    original_sample: Callable[[GPUModelRunner, "GrammarOutput | None"], RunnerOutput] = GPUModelRunner.sample_tokens  # type: ignore[assignment]

    def execute_model(
        self: GPUModelRunner, scheduler_output: "SchedulerOutput", *args: Any, **kwargs: Any
    ) -> RunnerOutput | None:
        _step_gaps(self).begin(len(scheduler_output.scheduled_cached_reqs.req_ids))
        voc = _engine_vocoder(self)
        if voc is not None and scheduler_output.finished_req_ids:
            voc.finished(scheduler_output.finished_req_ids)
        output = original_execute(self, scheduler_output, *args, **kwargs)
        if output is not None:  # no sampling follows (nothing scheduled)
            if voc is not None:
                voc.step()  # flush finished utterances now
            _step_gaps(self).end()
        return output

    def sample_tokens(self: GPUModelRunner, grammar_output: "GrammarOutput | None") -> RunnerOutput:
        output = original_sample(self, grammar_output)
        if isinstance(output, ModelRunnerOutput):
            _route_mel(self, output, [bool(t) for t in output.sampled_token_ids])
        elif isinstance(output, AsyncGPUModelRunnerOutput):
            # Async scheduling (CUDA): token ids are filled in later, so "sampled" comes from the
            # rows the runner did not discard; attach to the wrapped output. (`voiced` leaves out the
            # extra step of a request that sampled STOP.)
            inner = output._model_runner_output
            invalid = set(output._invalid_req_indices)
            _route_mel(self, inner, [i not in invalid for i in range(len(inner.req_ids))])
        elif output is not None:
            raise UnsupportedRunnerOutput(
                f"uttera's engine patch does not know vLLM's runner output {type(output).__name__}: "
                "the mel would be lost. Use vLLM 0.32.0 with its GPUModelRunner."
            )
        _step_gaps(self).end()
        return output

    # The patch itself: vLLM's methods replaced on the class.
    GPUModelRunner.execute_model = execute_model  # type: ignore[method-assign]
    GPUModelRunner.sample_tokens = sample_tokens  # type: ignore[method-assign,assignment]
    setattr(GPUModelRunner, _MARK, True)
