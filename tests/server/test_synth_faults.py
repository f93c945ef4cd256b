"""Faults inside the synthesizer end a request with a typed error, never a hang, and mark the server
not ready (the real engine on the tiny model; the faults are injected into the serving process's
parts)."""

import asyncio

import pytest

from _timeouts import scaled
from uttera_server.config import EngineConfig
from uttera_server.errors import EngineNotReady, SynthesisFailed
from uttera_server.synthesis.synthesizer import Synthesizer


@pytest.fixture(scope="module")
async def synth(tiny_model_dir):
    s = Synthesizer(
        tiny_model_dir,
        EngineConfig(max_num_seqs=4, kv_cache_memory_bytes=64 << 20, block_size=32, vocoder_process="frontend"),
    )
    await s.start()
    yield s
    await s.close()


async def _drain(chunks):
    async for _ in chunks:
        pass


async def test_failure_before_the_first_hand_off_reaches_the_consumer(synth, monkeypatch):
    def broken(utterance_id, deadline):
        raise RuntimeError("injected: no utterance")

    monkeypatch.setattr(synth._stage, "open", broken)
    with pytest.raises(SynthesisFailed):
        await asyncio.wait_for(_drain(synth.stream("Hello there.")), scaled(30))
    monkeypatch.undo()
    await asyncio.wait_for(_drain(synth.stream("Hello again.")), scaled(60))  # nothing left behind


async def test_vocoder_worker_fault_fails_the_request_and_readiness(synth, monkeypatch):
    worker = synth.vocoder_worker

    def broken(*args, **kwargs):
        raise RuntimeError("injected vocoder fault")

    monkeypatch.setattr(worker.vocoder, "submit", broken)
    with pytest.raises(SynthesisFailed):
        await asyncio.wait_for(_drain(synth.stream("This request meets a broken vocoder.")), scaled(60))
    assert worker.error is not None
    assert not synth.is_ready()
    with pytest.raises(EngineNotReady):
        synth.stream("And nothing more is accepted.")
