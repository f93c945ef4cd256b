"""`prefill_chunk_tokens` in the real engine: a long prompt that arrives while another request decodes is
prefilled over several steps of at most that many phonemes, and its mel is still exactly the reference's."""

import asyncio

import pytest

from _timeouts import scaled
from tests.engine.helpers import check_against_reference, prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig

CHUNK = 16


@pytest.fixture(scope="module")
async def chunking_engine(tiny_model_dir):
    engine = MelEngine(
        VoiceModelConfig.load(tiny_model_dir),
        EngineConfig(
            max_num_seqs=4,
            kv_cache_memory_bytes=64 << 20,
            enforce_eager=True,
            block_size=32,
            dtype="float32",
            prefill_chunk_tokens=CHUNK,
        ),
    )
    await asyncio.to_thread(engine.start)
    yield engine
    engine.shutdown()


async def test_long_prompt_joins_running_decodes_in_chunks(chunking_engine, reference):
    engine = chunking_engine
    decoding = asyncio.Event()
    stop = asyncio.Event()

    async def background():  # keeps one request decoding, so the new prompt is not alone
        async for _ in engine.generate(prompt(400, seed=11), request_id="background"):
            decoding.set()
            if stop.is_set():
                return

    task = asyncio.create_task(background())
    await asyncio.wait_for(decoding.wait(), scaled(30))
    ids = prompt(120, seed=12)
    steps_before = engine.stats.steps
    steps, steps_at_first = [], None
    async for step in engine.generate(ids, request_id="long"):
        if steps_at_first is None:
            steps_at_first = engine.stats.steps
        steps.append(step)
    stop.set()
    await asyncio.wait_for(task, scaled(60))

    # 120 phonemes at 16 a step take 8 prefill steps; the first mel comes one step after the first token.
    assert steps_at_first - steps_before >= 120 // CHUNK
    check_against_reference(reference, engine.model, ids, steps)
