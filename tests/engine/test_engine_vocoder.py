"""The in-engine vocoder (engine_patches/engine_vocoder.py), for real: the patched AsyncLLM with its
engine core in its own process, the vocoder in vLLM's worker, PCM over the ZMQ channel (pcm_wire.py)
into a `PcmReceiver` on the test's event loop.

The reference of every utterance is independent of the code under test: the same engine serves plain mel
requests (no `pcm=`), the engine is deterministic (temperature 0), so the same prompt gives the same
mel, and `Vocoder.forward` on that whole mel, converted to int16 as the server does, is what the
utterance's PCM must be: exactly `frames * hop` samples, each within 1 LSB (float rounding between the
batched streaming passes and the one offline pass; a lost, duplicated or misrouted chunk is thousands
of LSB off). The vocoder's chunks (6 frames, then growing to 12) are not multiples of the 4 frames a
step voices, so chunks straddle steps.
"""

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from engine_patches.engine_vocoder import EngineVocoderConfig
from engine_patches.pcm_wire import PcmRoute, decode, sink_address
from _timeouts import scaled
from tests.engine.helpers import prompt
from uttera_server.config import EngineConfig
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig
from uttera_server.synthesis.pcm_receiver import PcmReceiver, new_sink_base
from uttera_server.synthesis.speed import MelTimeScale
from vocoder.model import Vocoder

CHUNK_FRAMES, FIRST_CHUNK_FRAMES = 12, 6
MAX_LSB = 1


def engine_config(**overrides) -> EngineConfig:
    return EngineConfig(
        **{
            "max_num_seqs": 8,
            "kv_cache_memory_bytes": 64 << 20,
            "max_model_len": 2048,
            "enforce_eager": True,
            "block_size": 32,
            "dtype": "float32",
            **overrides,
        }
    )


@dataclass(slots=True)
class VocodingEngine:
    """A real engine that vocodes PCM requests in its worker, and this loop's receiver of its sink 0."""

    engine: MelEngine
    receiver: PcmReceiver
    sink_base: str


async def start_vocoding_engine(model_dir, config: EngineConfig, **vocoder: Any) -> VocodingEngine:
    """`vocoder`: EngineVocoderConfig fields other than the test's chunk sizes (e.g. urgent_s)."""
    sink_base = new_sink_base()
    receiver = PcmReceiver(sink_base, 0)  # bound before the engine starts, as the server does
    receiver.start()
    engine = MelEngine(
        VoiceModelConfig.load(model_dir),
        config,
        engine_vocoder=EngineVocoderConfig(
            sink_base=sink_base,
            chunk_frames=CHUNK_FRAMES,
            first_chunk_frames=FIRST_CHUNK_FRAMES,
            max_utterances=config.max_num_seqs,
            **vocoder,
        ),
    )
    await asyncio.to_thread(engine.start)
    return VocodingEngine(engine, receiver, sink_base)


async def stop_vocoding_engine(v: VocodingEngine) -> None:
    await asyncio.to_thread(v.engine.shutdown)
    assert v.receiver.error is None and v.receiver.alive
    await v.receiver.close()


@pytest.fixture(scope="module")
async def engines(tiny_model_dir):
    """Two engines, started side by side (a start is tens of seconds, mostly on one core): `roomy`, with
    KV for all its load at once, and `cramped`, whose KV cache is far too small for the preemption
    test's load (as in test_preemption_prefix_cache.py), so its scheduler preempts and recomputes."""
    # No timeout of ours around the starts: a thread cannot be cancelled, and vLLM's own bounds them.
    roomy, cramped = await asyncio.gather(
        start_vocoding_engine(tiny_model_dir, engine_config()),
        start_vocoding_engine(tiny_model_dir, engine_config(kv_cache_memory_bytes=9 << 18)),
    )
    yield roomy, cramped
    await asyncio.gather(stop_vocoding_engine(roomy), stop_vocoding_engine(cramped))


@pytest.fixture(scope="module")
def voc(engines) -> VocodingEngine:
    return engines[0]


@pytest.fixture(scope="module")
def vocoder(tiny_model_dir) -> Vocoder:
    return Vocoder.from_dir(tiny_model_dir / "vocoder")


def offline_pcm(vocoder: Vocoder, mel: np.ndarray) -> np.ndarray:
    """`(T, n_mels)` mel -> the reference: `Vocoder.forward` on the whole mel, as int16 `(T * hop,)`."""
    with torch.inference_mode():
        audio = vocoder(torch.from_numpy(np.ascontiguousarray(mel.T[None])))[0].numpy()
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def assert_pcm_equal(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.dtype == np.int16 and got.shape == want.shape, (what, got.shape, want.shape)
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max(initial=0) <= MAX_LSB, (what, int(diff.max()), int(np.argmax(diff)), got.shape)


async def mel_of(engine: MelEngine, ids: list[int], max_frames: int | None = None) -> np.ndarray:
    """The `(T, n_mels)` mel of a plain request; with `max_frames`, the request is closed (aborted)
    once it has that many frames."""
    chunks: list[np.ndarray] = []
    async with asyncio.timeout(scaled(180)):
        gen = engine.generate(ids)
        try:
            async for step in gen:
                assert step.mel is not None  # a plain request: mel, not PCM
                chunks.append(step.mel)
                if max_frames is not None and len(chunks) * step.mel.shape[0] >= max_frames:
                    break
        finally:
            await gen.aclose()
    return np.concatenate(chunks)


async def drain(queue: asyncio.Queue, read_delay: float = 0.0) -> np.ndarray:
    """An utterance's int16 PCM arrays up to its `None`, concatenated."""
    parts = []
    while (item := await queue.get()) is not None:
        assert isinstance(item, np.ndarray) and item.dtype == np.int16 and item.ndim == 1, item
        parts.append(item)
        if read_delay:
            await asyncio.sleep(read_delay)  # a lagging consumer, not synchronisation
    return np.concatenate(parts) if parts else np.zeros(0, np.int16)


async def voiced_frames(engine: MelEngine, ids: list[int], route: PcmRoute, step_delay: float = 0.0) -> int:
    """Drive one PCM request to its end; returns the mel frames it voiced (steps * frames_per_step)."""
    n = 0
    async for step in engine.generate(ids, request_id=f"req-{route.key}", pcm=route):
        assert step.mel is None
        n += 1
        if step_delay:
            await asyncio.sleep(step_delay)  # a lagging consumer of the engine's outputs
    return n * engine.model.frames_per_step


async def pcm_of(
    v: VocodingEngine, ids: list[int], key: str, speed: float = 1.0, step_delay: float = 0.0, read_delay: float = 0.0
) -> tuple[int, np.ndarray, asyncio.Queue]:
    """One request vocoded in the engine: (mel frames it voiced, its PCM, its queue after the None)."""
    queue = v.receiver.open(key)
    async with asyncio.timeout(scaled(180)):
        frames, pcm = await asyncio.gather(
            voiced_frames(v.engine, ids, PcmRoute(sink=0, key=key, speed=speed), step_delay), drain(queue, read_delay)
        )
    return frames, pcm, queue


async def test_one_request_pcm_equals_offline_vocoding(voc, vocoder):
    ids = prompt(30, seed=1)
    mel = await mel_of(voc.engine, ids)
    frames, pcm, _ = await pcm_of(voc, ids, "one")
    assert voc.engine.last_finish_reason == "stop"
    assert frames == mel.shape[0]
    assert pcm.shape == (frames * voc.engine.model.hop_length,)
    assert_pcm_equal(pcm, offline_pcm(vocoder, mel))


async def test_concurrent_utterances_are_not_mixed_lost_or_duplicated(voc, vocoder):
    """8 utterances of different lengths, some consumers lagging, batched with the plain requests that
    give their references (the patch routes each row of a step one way or the other)."""
    prompts = [prompt(8 + 9 * i, seed=40 + i) for i in range(8)]
    step_delays = [0.0, 0.02, 0.0, 0.0, 0.05, 0.0, 0.01, 0.0]
    read_delays = [0.0, 0.0, 0.03, 0.0, 0.05, 0.0, 0.0, 0.1]
    mels, results = await asyncio.gather(
        asyncio.gather(*(mel_of(voc.engine, ids) for ids in prompts)),
        asyncio.gather(
            *(
                pcm_of(voc, ids, f"many-{i}", step_delay=sd, read_delay=rd)
                for i, (ids, sd, rd) in enumerate(zip(prompts, step_delays, read_delays))
            )
        ),
    )
    for i, (mel, (frames, pcm, _)) in enumerate(zip(mels, results)):
        assert frames == mel.shape[0], i
        assert_pcm_equal(pcm, offline_pcm(vocoder, mel), f"utterance {i}")


async def test_wire_one_message_per_step_and_one_final_per_utterance(voc, vocoder):
    """The worker's side of the channel, read raw on a second sink: each message names an utterance at
    most once, an utterance's entries carry its PCM in order and end with exactly one `final`, and nothing
    follows it (checked up to a later utterance's final, which the worker sends after everything earlier).
    An utterance on sink 0 runs alongside: one engine, two serving processes' sinks."""
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    tap = context.socket(zmq.PULL)
    tap.bind(sink_address(voc.sink_base, 1))
    try:
        prompts = {f"wire-{i}": prompt(12 + 15 * i, seed=60 + i) for i in range(3)}
        entries: dict[str, list[tuple[np.ndarray, bool]]] = {key: [] for key in [*prompts, "wire-last"]}

        async def read_until_final(*keys: str) -> None:
            while not all(entries[key] and entries[key][-1][1] for key in keys):
                message = decode(await tap.recv_multipart())
                assert len({k for k, _, _ in message}) == len(message), message
                for k, pcm, final in message:
                    entries[k].append((pcm.copy(), final))

        async def run_on_sink_1(key: str, ids: list[int]) -> int:
            return await voiced_frames(voc.engine, ids, PcmRoute(sink=1, key=key))

        async with asyncio.timeout(scaled(180)):
            mels, frames, beside, _ = await asyncio.gather(
                asyncio.gather(*(mel_of(voc.engine, ids) for ids in prompts.values())),
                asyncio.gather(*(run_on_sink_1(key, ids) for key, ids in prompts.items())),
                pcm_of(voc, prompt(40, seed=1), "beside-the-wire"),
                read_until_final(*prompts),
            )
            await asyncio.gather(run_on_sink_1("wire-last", prompt(5, seed=2)), read_until_final("wire-last"))
        assert beside[1].shape == (beside[0] * voc.engine.model.hop_length,)
        for (key, ids), mel, n in zip(prompts.items(), mels, frames):
            got = entries[key]
            assert [final for _, final in got] == [False] * (len(got) - 1) + [True], key
            assert all(pcm.size for pcm, final in got if not final), key  # no empty non-final entry
            assert n == mel.shape[0], key
            assert_pcm_equal(np.concatenate([pcm for pcm, _ in got]), offline_pcm(vocoder, mel), key)
    finally:
        tap.close(linger=0)
        context.term()


async def test_abort_mid_utterance_flushes_it_and_the_engine_goes_on(voc, vocoder):
    engine, receiver = voc.engine, voc.receiver
    ids = prompt(400, seed=3)
    queue = receiver.open("aborted")
    aborts = engine.stats.finished["abort"]
    task = asyncio.create_task(voiced_frames(engine, ids, PcmRoute(sink=0, key="aborted")))
    first = await asyncio.wait_for(queue.get(), scaled(60))
    assert isinstance(first, np.ndarray) and first.size
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()
    assert engine.stats.finished["abort"] == aborts + 1
    # The abort finished the utterance in the worker: what it voiced so far, flushed, then one None.
    async with asyncio.timeout(scaled(30)):
        pcm = np.concatenate([first, await drain(queue)])
    assert await engine.wait_idle(scaled(30)), engine.stats
    assert receiver.error is None and receiver.alive
    hop = engine.model.hop_length
    assert pcm.shape[0] % hop == 0
    frames = pcm.shape[0] // hop
    assert FIRST_CHUNK_FRAMES <= frames < engine.model.max_steps(len(ids)) * engine.model.frames_per_step
    mel = await mel_of(engine, ids, max_frames=frames)
    assert_pcm_equal(pcm, offline_pcm(vocoder, mel[:frames]), "aborted utterance")

    after = prompt(25, seed=9)
    mel = await mel_of(engine, after)
    _, pcm, _ = await pcm_of(voc, after, "after-abort")
    assert_pcm_equal(pcm, offline_pcm(vocoder, mel), "request after the abort")


@pytest.mark.parametrize("speed", [1.5, 0.75])
async def test_speed_scales_the_mel_before_vocoding(voc, vocoder, speed):
    from uttera_server.synthesis.speed import scaled_frames

    ids = prompt(20, seed=11)
    mel = await mel_of(voc.engine, ids)
    frames, pcm, _ = await pcm_of(voc, ids, f"speed-{speed}", speed=speed)
    assert frames == mel.shape[0]
    assert pcm.shape == (scaled_frames(frames, speed) * voc.engine.model.hop_length,)
    scale = MelTimeScale(speed)
    scaled_mel = np.concatenate([scale.push(mel), scale.flush()])
    assert_pcm_equal(pcm, offline_pcm(vocoder, scaled_mel), f"speed {speed}")


async def test_preempted_utterances_still_equal_offline_vocoding(engines, vocoder):
    """Requests are preempted and recomputed while their vocoder utterances stay open; each utterance's PCM is
    still its reference (from the roomy engine: the same weights and prompt give the same mel)."""
    roomy, cramped = engines
    prompts = [prompt(160, seed=100 + i) for i in range(8)]
    mels, results = await asyncio.gather(
        asyncio.gather(*(mel_of(roomy.engine, ids) for ids in prompts)),
        asyncio.gather(*(pcm_of(cramped, ids, f"cramped-{i}") for i, ids in enumerate(prompts))),
    )
    assert cramped.engine.stats.preemptions > 0, "the test did not force a preemption"
    for i, (mel, (frames, pcm, _)) in enumerate(zip(mels, results)):
        assert frames == mel.shape[0], i
        assert_pcm_equal(pcm, offline_pcm(vocoder, mel), f"preempted utterance {i}")


async def test_synthesizer_engine_vocoder_equals_frontend_vocoder(tiny_model_dir):
    """The same text through `Synthesizer(vocoder_process="engine")` and `"frontend"`: the same PCM (a
    random model speaks noise, the same noise), sentence by sentence, at two speeds."""
    from uttera_server.synthesis.synthesizer import AudioChunk, Synthesizer

    text = "Hello there. This is the in-engine vocoder, speaking a second, longer sentence!"
    common = {
        "max_num_seqs": 4,
        "vocoder_device": "cpu",
        "vocoder_chunk_frames": CHUNK_FRAMES,
        "first_chunk_frames": FIRST_CHUNK_FRAMES,
    }
    synths = [
        Synthesizer(tiny_model_dir, engine_config(vocoder_process=where, **common)) for where in ("engine", "frontend")
    ]
    try:
        await asyncio.gather(*(s.start() for s in synths))
        for speed in (1.0, 1.3):
            got = []
            for s in synths:
                chunks = []
                async with asyncio.timeout(scaled(120)):
                    async for item in s.stream(text, speed=speed):
                        if isinstance(item, AudioChunk):
                            chunks.append(item)
                assert sorted({c.sentence for c in chunks}) == [0, 1], speed
                got.append([np.concatenate([c.pcm for c in chunks if c.sentence == k]) for k in (0, 1)])
            for k, (in_engine, here) in enumerate(zip(*got)):
                assert_pcm_equal(in_engine, here, f"speed {speed}, sentence {k}")
    finally:
        await asyncio.gather(*(s.close() for s in synths))


async def test_urgency_in_a_real_engine_vocodes_every_step_else_the_doubling_schedule(voc, vocoder, tiny_model_dir):
    """The urgency rule (engine_vocoder.py, `urgent_s`) through real engines: with a threshold nothing
    reaches (always behind real time) the utterance gets PCM at every step after its first chunk; with 0
    (never behind) only as the doubling chunk schedule allows (vocoder/utterance.py), whatever the host's
    speed. The PCM equals offline vocoding of the same mel either way. (The rule under a controlled clock:
    test_engine_vocoder_urgency.py.)"""
    from vocoder.utterance import Utterance

    ids = prompt(40, seed=7)
    mel = await mel_of(voc.engine, ids)
    always, never = await asyncio.gather(
        start_vocoding_engine(tiny_model_dir, engine_config(), urgent_s=1e9),
        start_vocoding_engine(tiny_model_dir, engine_config(), urgent_s=0.0),
    )
    pieces = {}
    try:
        for name, v in (("always", always), ("never", never)):
            queue = v.receiver.open(name)
            async with asyncio.timeout(scaled(180)):
                frames = await voiced_frames(v.engine, ids, PcmRoute(sink=0, key=name))
            parts = []
            while (item := await asyncio.wait_for(queue.get(), scaled(30))) is not None:
                parts.append(item)
            assert frames == mel.shape[0], name
            assert_pcm_equal(np.concatenate(parts), offline_pcm(vocoder, mel), name)
            pieces[name] = sum(1 for part in parts if part.size)
    finally:
        await asyncio.gather(stop_vocoding_engine(always), stop_vocoding_engine(never))
    steps = mel.shape[0] // voc.engine.model.frames_per_step
    # the schedule's chunks for this many steps (all pending frames go once a chunk is due), plus the tail
    schedule, u = 1, Utterance(slot=0)
    for _ in range(steps):
        u.pending_frames += voc.engine.model.frames_per_step
        if u.is_ready(FIRST_CHUNK_FRAMES, CHUNK_FRAMES):
            u.consumed, u.pending_frames, schedule = u.consumed + u.pending_frames, 0, schedule + 1
    assert pieces["never"] <= schedule < steps // 2, (pieces, schedule, steps)
    assert pieces["always"] >= steps - FIRST_CHUNK_FRAMES // voc.engine.model.frames_per_step - 1, (pieces, steps)


async def test_eight_frames_a_step_pcm_equals_offline_vocoding(tmp_path):
    """A model that emits 8 mel frames a decode step (issue 15's lever: half the row-steps per audio
    second): the vocoder's chunks (6, then 12 frames) cut across its steps, and several utterances share
    each step; every utterance's PCM is still its whole mel vocoded offline."""
    from uttera_server.tiny_model import make_tiny_model

    model_dir = make_tiny_model(tmp_path / "fps8", seed=3, frames_per_step=8)
    v = await start_vocoding_engine(model_dir, engine_config())
    vocoder = Vocoder.from_dir(model_dir / "vocoder")
    try:
        assert v.engine.model.frames_per_step == 8
        prompts = [prompt(10 + 11 * i, seed=80 + i) for i in range(4)]
        mels, results = await asyncio.gather(
            asyncio.gather(*(mel_of(v.engine, ids) for ids in prompts)),
            asyncio.gather(*(pcm_of(v, ids, f"fps8-{i}", read_delay=0.01 * i) for i, ids in enumerate(prompts))),
        )
    finally:
        await stop_vocoding_engine(v)
    for i, (mel, (frames, pcm, _)) in enumerate(zip(mels, results)):
        assert mel.shape[0] % 8 == 0 and frames == mel.shape[0], (i, mel.shape, frames)
        assert_pcm_equal(pcm, offline_pcm(vocoder, mel), f"utterance {i}")


async def test_untimed_sentences_take_few_engine_outputs_and_the_same_pcm(tiny_model_dir):
    """Vocoded in the engine, a stream without word timings asks vLLM for an output every
    UNTIMED_STREAM_INTERVAL steps (the PCM has its own channel); with timings, one per step. The audio is
    the same, and the timed stream still gets its words."""
    from uttera_server.synthesis.pcm_stage import UNTIMED_STREAM_INTERVAL
    from uttera_server.synthesis.synthesizer import AudioChunk, Synthesizer, WordTimings

    text = "This sentence is long enough to take a good number of engine steps before it ends."
    synth = Synthesizer(
        tiny_model_dir,
        engine_config(vocoder_process="engine", max_num_seqs=4, vocoder_device="cpu",
                      vocoder_chunk_frames=CHUNK_FRAMES, first_chunk_frames=FIRST_CHUNK_FRAMES),
    )  # fmt: skip
    try:
        await synth.start()
        runs = {}
        for timed in (False, True):
            before = synth.engine_stats().outputs
            pcm, words = [], []
            async with asyncio.timeout(scaled(120)):
                async for item in synth.stream(text, with_timestamps=timed):
                    if isinstance(item, AudioChunk):
                        pcm.append(item.pcm)
                    elif isinstance(item, WordTimings):
                        words.extend(item.words)
            runs[timed] = (np.concatenate(pcm), words, synth.engine_stats().outputs - before)
        (untimed_pcm, untimed_words, untimed_outputs), (timed_pcm, timed_words, timed_outputs) = runs[False], runs[True]
        m = synth.model
        steps = len(timed_pcm) // (m.frames_per_step * m.hop_length)  # the sentence's decode steps, about
        assert steps > 2 * UNTIMED_STREAM_INTERVAL, "the sentence is too short to show the interval"
        assert untimed_outputs <= steps // UNTIMED_STREAM_INTERVAL + 3
        assert timed_outputs > steps // 2  # about one per step (a lagging consumer may merge a few)
        assert untimed_words == [] and len(timed_words) >= 5
        assert_pcm_equal(untimed_pcm, timed_pcm, "untimed against timed")
    finally:
        await synth.close()
