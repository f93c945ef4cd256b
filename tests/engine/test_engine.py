"""The patched engine, for real: AsyncLLM with its engine core in a separate process (CPU build).

Every mel chunk that reaches the consumer is checked against an independent PyTorch forward of the
same weights at the step that produced it, so "ordered, complete, not mixed between requests" is
checked value by value, also with concurrent requests and consumers that lag behind the engine.
"""

import asyncio
import time

import pytest

from _timeouts import scaled
from tests.engine.helpers import check_against_reference, collect, prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig


@pytest.fixture(scope="session")
async def mel_engine(tiny_model_dir):
    engine = MelEngine(
        VoiceModelConfig.load(tiny_model_dir),
        EngineConfig(
            max_num_seqs=16, kv_cache_memory_bytes=64 << 20, enforce_eager=True, block_size=32, dtype="float32"
        ),
    )
    await asyncio.to_thread(engine.start)
    yield engine
    engine.shutdown()


async def test_one_request_streams_every_step(mel_engine, reference):
    ids = prompt(30, seed=1)
    steps = await collect(mel_engine, ids)
    check_against_reference(reference, mel_engine.model, ids, steps)
    assert mel_engine.last_finish_reason == "stop"


async def test_concurrent_requests_with_lagging_consumers(mel_engine, reference):
    prompts = [prompt(10 + 7 * i, seed=10 + i) for i in range(8)]
    delays = [0.0, 0.03, 0.0, 0.08, 0.0, 0.02, 0.05, 0.0]
    results = await asyncio.gather(*(collect(mel_engine, p, d) for p, d in zip(prompts, delays)))
    for ids, steps in zip(prompts, results):
        check_against_reference(reference, mel_engine.model, ids, steps)


async def test_stream_interval_batches_steps_into_fewer_outputs(mel_engine, reference):
    """With stream_interval k every output after the first carries k steps: the same chunks, in order,
    checked value by value, from about 1/k as many outputs (the serving process's host work)."""
    ids = prompt(40, seed=5)
    for k in (1, 3):
        before = mel_engine.stats.outputs
        steps = [s async for s in mel_engine.generate(ids, stream_interval=k)]
        outputs = mel_engine.stats.outputs - before
        check_against_reference(reference, mel_engine.model, ids, steps)
        tokens = len(steps) + 1  # the first token arrives with no chunk
        assert outputs <= 2 + (tokens - 1 + k - 1) // k, (k, outputs, tokens)
        if k > 1:
            assert outputs < tokens // 2, (k, outputs, tokens)


async def test_long_request_does_not_block_short_ones(mel_engine):
    finished: dict[str, float] = {}

    async def run(name, ids, started=None):
        async for _ in mel_engine.generate(ids):
            if started is not None and not started.is_set():
                started.set()
        finished[name] = time.monotonic()

    long_started = asyncio.Event()
    long_task = asyncio.create_task(run("long", prompt(400, seed=3), long_started))
    await asyncio.wait_for(long_started.wait(), scaled(30))
    await asyncio.gather(*(run(f"short{i}", prompt(8, seed=20 + i)) for i in range(3)))
    assert "long" not in finished, "short requests had to wait for the long one"
    await long_task
    assert all(finished[f"short{i}"] < finished["long"] for i in range(3))


async def test_closing_the_generator_aborts_the_request_and_frees_kv(mel_engine):
    gen = mel_engine.generate(prompt(400, seed=4))
    for _ in range(5):
        await gen.__anext__()
    assert mel_engine.stats.num_running == 1
    assert mel_engine.stats.kv_cache_usage > 0
    await gen.aclose()
    t0 = time.monotonic()
    assert await mel_engine.wait_idle(scaled(5)), mel_engine.stats
    assert time.monotonic() - t0 < scaled(1.0)
    # The engine reports usage every step: run a tiny request to get a fresh report after the abort.
    await collect(mel_engine, prompt(4, seed=5))
    assert mel_engine.stats.kv_cache_usage == 0.0
    assert mel_engine.stats.num_running == 0


async def test_vllm_keeps_no_prometheus_metrics_of_its_own(mel_engine):
    """vLLM's PrometheusStatLogger (which nothing here serves) is replaced by a stand-in that records
    nothing; the server's own recorder still gets every report."""
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    steps = mel_engine.stats.steps
    await collect(mel_engine, prompt(4, seed=6))
    assert mel_engine.stats.steps > steps
    assert mel_engine._llm is not None and mel_engine._llm.logger_manager is not None
    prometheus = [x for x in mel_engine._llm.logger_manager.stat_loggers if isinstance(x, PrometheusStatLogger)]
    assert len(prometheus) == 1
    assert not hasattr(prometheus[0], "gauge_scheduler_running")  # none of vLLM's metrics was made
