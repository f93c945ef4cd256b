"""The model ↔ runner contract (uttera_server/model/step_mel.py): one `compute_logits` per engine step.

The unit tests drive `StepMel` as the model and the runner patch do; the engine test makes the real vLLM
call `compute_logits` twice in one step (a request with prompt logprobs: vLLM computes the prompt
positions' logits after the sampled rows') and checks that the step fails instead of routing the prompt
positions' mel to the sampled requests.
"""

import asyncio

import pytest
import torch

from _timeouts import scaled
from tests.engine.helpers import prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model.step_mel import StepMel, StepMelContractError
from uttera_server.model_dir import VoiceModelConfig


def chunks(rows: int) -> torch.Tensor:
    return torch.randn(rows, 4, 80)


def test_each_step_hands_over_what_its_compute_logits_put():
    handoff = StepMel()
    for rows in (3, 1, 5):
        mel = chunks(rows)
        handoff.put(mel)
        assert handoff.peek() is mel
        assert handoff.take() is mel
        assert handoff.take() is None, "a step that computed no logits hands over nothing"


def test_a_second_compute_logits_in_a_served_step_fails():
    handoff = StepMel()
    handoff.put(chunks(2))
    handoff.take()  # the first served step
    handoff.put(chunks(2))
    with pytest.raises(StepMelContractError, match=r"compute_logits ran twice in one engine step"):
        handoff.put(chunks(7))


def test_warm_up_leaves_chunks_nobody_takes():
    """vLLM's profile and sampler warm-up runs call compute_logits with no step after them."""
    handoff = StepMel()
    handoff.put(chunks(16))
    handoff.put(chunks(1))
    served = chunks(2)
    handoff.put(served)
    assert handoff.take() is served


async def test_engine_step_with_two_compute_logits_fails(tiny_model_dir, capfd):
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.exceptions import EngineDeadError

    model = VoiceModelConfig.load(tiny_model_dir)
    args = MelEngine(
        model,
        EngineConfig(
            max_num_seqs=4, kv_cache_memory_bytes=32 << 20, enforce_eager=True, block_size=32, dtype="float32"
        ),
    ).engine_args()
    engine = {"llm": await asyncio.to_thread(AsyncLLM.from_engine_args, args)}
    try:
        ids = prompt(12, seed=3)

        async def run(request_id: str, **extra) -> int:
            params = SamplingParams(
                temperature=0.0,
                max_tokens=model.max_steps(len(ids)) + 1,
                stop_token_ids=[model.stop_token_id],
                detokenize=False,
                **extra,
            )
            tokens = 0
            async for out in engine["llm"].generate(TokensPrompt(prompt_token_ids=ids), params, request_id):
                tokens = len(out.outputs[0].token_ids)
            return tokens

        assert await asyncio.wait_for(run("plain"), scaled(60)) > 1, "one compute_logits per step: served"
        with pytest.raises(EngineDeadError):
            await asyncio.wait_for(run("prompt-logprobs", prompt_logprobs=1), scaled(60))
    finally:
        await asyncio.to_thread(engine["llm"].shutdown)
        engine.clear()  # (an AsyncLLM still referenced at exit shuts down again in __del__, and fails there)
    logs = capfd.readouterr()
    assert "StepMelContractError: compute_logits ran twice in one engine step" in logs.out + logs.err
