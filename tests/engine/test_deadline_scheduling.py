"""Deadline scheduling in the real engine: with every slot busy, the waiting request whose client runs
out of audio first is admitted first, whatever the arrival order (vLLM's priority queue)."""

import asyncio
import time

import pytest

from _timeouts import scaled
from tests.engine.helpers import prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig


@pytest.fixture(scope="module")
async def one_slot_engine(tiny_model_dir):
    engine = MelEngine(
        VoiceModelConfig.load(tiny_model_dir),
        EngineConfig(
            max_num_seqs=1,
            kv_cache_memory_bytes=64 << 20,
            enforce_eager=True,
            block_size=32,
            dtype="float32",
            scheduling="deadline",
        ),
    )
    await asyncio.to_thread(engine.start)
    yield engine
    engine.shutdown()


async def test_waiting_requests_are_admitted_earliest_deadline_first(one_slot_engine):
    engine = one_slot_engine
    first_step: dict[str, float] = {}
    running = asyncio.Event()

    async def run(name: str, ids: list[int], deadline: float | None = None):
        async for _ in engine.generate(ids, request_id=name, deadline=deadline):
            if name not in first_step:
                first_step[name] = time.monotonic()
                running.set()

    busy = asyncio.create_task(run("busy", prompt(400, seed=5)))  # holds the only slot for a while
    await asyncio.wait_for(running.wait(), scaled(30))
    now = time.monotonic()
    ahead = asyncio.create_task(run("ahead", prompt(10, seed=6), deadline=now + 60.0))  # arrives first
    await asyncio.sleep(0.05)
    due = asyncio.create_task(run("due", prompt(10, seed=7), deadline=now))  # its client is waiting
    await asyncio.wait_for(asyncio.gather(busy, ahead, due), scaled(120))
    assert "busy" in first_step and first_step["busy"] < first_step["due"] < first_step["ahead"]
    assert engine.stats.num_waiting == 0
