"""The traps of the output path: preemption-recompute and prefix-cache hits.

An engine with a KV cache far too small for the load preempts running requests and later recomputes
them; with prefix caching on, a repeated prompt starts from cached blocks. Everything fed from one
step to the next is a token, so every chunk must still equal the reference forward at its step.
"""

import asyncio

import pytest

from tests.engine.helpers import check_against_reference, collect, prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig


@pytest.fixture(scope="module")
async def cramped_engine(tiny_model_dir):
    # ~2.3 k tokens of KV (2 layers x K,V x 64 floats x 4 bytes = 1 KiB per token) for 8 requests of
    # 160-token prompts + up to ~480 steps each: the scheduler must preempt. (The CPU backend's blocks
    # hold 128 tokens, so prompts must be longer than that to leave a full, cacheable block.)
    engine = MelEngine(
        VoiceModelConfig.load(tiny_model_dir),
        EngineConfig(
            max_num_seqs=8,
            max_model_len=2048,
            kv_cache_memory_bytes=9 << 18,
            enforce_eager=True,
            dtype="float32",
            enable_prefix_caching=True,
        ),
    )
    await asyncio.to_thread(engine.start)
    yield engine
    engine.shutdown()


async def test_chunks_stay_right_through_preemption(cramped_engine, reference):
    prompts = [prompt(160, seed=100 + i) for i in range(8)]
    results = await asyncio.gather(*(collect(cramped_engine, p) for p in prompts))
    for ids, steps in zip(prompts, results):
        check_against_reference(reference, cramped_engine.model, ids, steps)
    assert cramped_engine.stats.preemptions > 0, "the test did not force a preemption"


async def test_prefix_cache_hit_gives_the_same_chunks(cramped_engine, reference):
    ids = prompt(300, seed=7)
    first = await collect(cramped_engine, ids)
    second = await collect(cramped_engine, ids)
    assert cramped_engine.stats.prefix_cache_hits > 0, "the second request did not hit the prefix cache"
    check_against_reference(reference, cramped_engine.model, ids, second)
    assert [s.pointer for s in first] == [s.pointer for s in second]
