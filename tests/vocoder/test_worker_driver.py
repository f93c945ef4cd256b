"""The vocoder worker's two drivers (a thread, or a task on the event loop) give the same exact PCM: every
utterance equals offline vocoding of its whole mel, with deadline ordering, capped passes and cancels."""

import asyncio
import threading

import numpy as np
import pytest
from tests.vocoder.voc_helpers import offline, random_mel, snr_db

from uttera_server.synthesis.vocoder_worker import VocoderWorker
from vocoder.streaming import StreamingVocoder


async def drain(queue: asyncio.Queue) -> np.ndarray:
    parts = []
    while (item := await asyncio.wait_for(queue.get(), 10)) is not None:
        assert not isinstance(item, BaseException), item
        parts.append(item)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


@pytest.mark.parametrize("driver", ["thread", "loop"])
@pytest.mark.parametrize("max_relaxed_frames", [None, 8])
async def test_utterances_match_offline_vocoding(tiny_vocoder, rng, driver, max_relaxed_frames):
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=16, first_chunk_frames=8)
    worker = VocoderWorker(sv, driver=driver, max_relaxed_frames=max_relaxed_frames)
    mels = {f"s{i}": random_mel(rng, n) for i, n in enumerate([5, 37, 64, 90])}
    try:

        async def feed(uid, mel, step):
            queue = worker.open(uid)
            for t in range(0, len(mel), step):
                worker.push(uid, mel[t : t + step])
                await asyncio.sleep(0.001)
            worker.finish(uid)
            return await drain(queue)

        outs = await asyncio.gather(*(feed(uid, mel, 4 + i) for i, (uid, mel) in enumerate(mels.items())))
        # an utterance cancelled mid-way delivers nothing more, and the others are not disturbed
        cancelled = worker.open("gone")
        worker.push("gone", random_mel(rng, 12))
        worker.cancel("gone")
        again = await feed("after", mels["s1"], 5)
    finally:
        worker.close()
    for (uid, mel), pcm in zip(mels.items(), outs):
        ref = offline(tiny_vocoder, mel)
        assert pcm.shape == ref.shape and snr_db(ref, pcm) > 80, uid
    assert snr_db(offline(tiny_vocoder, mels["s1"]), again) > 80
    leftovers = [cancelled.get_nowait() for _ in range(cancelled.qsize())]
    assert all(item is not None for item in leftovers)
    assert worker.batches > 0


async def test_capped_pass_gives_work_back_and_the_worker_runs_it(tiny_vocoder, rng):
    """More non-urgent work than the cap in one pass: the schedule defers some utterances and the worker
    vocodes them in later passes with nothing new pushed; every utterance still equals offline vocoding.
    The clock stands still, so no utterance becomes urgent (urgent utterances are never capped) whatever the
    host's speed, and the loop driver runs only when this task awaits, so one pass sees the whole burst
    (the policy itself, driver aside: tests/vocoder/test_vocoder_schedule.py)."""
    now = [100.0]
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=16, first_chunk_frames=8)
    worker = VocoderWorker(sv, driver="loop", max_relaxed_frames=8, clock=lambda: now[0])
    mels = {f"b{i}": random_mel(rng, 8 + 40) for i in range(4)}
    try:
        queues = {uid: worker.open(uid) for uid in mels}
        for uid, mel in mels.items():
            worker.push(uid, mel[:8])  # the first chunk: urgent (deadline = now), never capped
        firsts = {uid: await asyncio.wait_for(q.get(), 10) for uid, q in queues.items()}
        assert all(isinstance(f, np.ndarray) and f.size for f in firsts.values())
        # Each utterance now has audio ahead of its (frozen) clock: not urgent. No await until all is queued.
        for uid, mel in mels.items():
            worker.push(uid, mel[8:])
            worker.finish(uid)
        rests = {uid: await drain(q) for uid, q in queues.items()}
    finally:
        worker.close()
    assert worker.deferred_passes > 0
    for uid, mel in mels.items():
        pcm = np.concatenate([firsts[uid], rests[uid]])
        ref = offline(tiny_vocoder, mel)
        assert pcm.shape == ref.shape and snr_db(ref, pcm) > 80, uid


async def test_loop_driver_needs_no_thread_and_stops_on_close(tiny_vocoder):
    def threads() -> set:
        return {t for t in threading.enumerate() if t.name == "uttera-vocoder"}

    before = threads()
    worker = VocoderWorker(StreamingVocoder(tiny_vocoder, chunk_frames=16, first_chunk_frames=8), driver="loop")
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "uttera-vocoder"]
    assert threads() == before and not task.done()
    worker.close()
    await asyncio.sleep(0)
    assert task.done()


def test_unknown_driver_is_refused(tiny_vocoder):
    with pytest.raises(ValueError, match="driver"):
        VocoderWorker(StreamingVocoder(tiny_vocoder, chunk_frames=16, first_chunk_frames=8), driver="process")
