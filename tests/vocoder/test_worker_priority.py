"""First-chunk priority in the server's vocoder worker (uttera_server/synthesis/vocoder_worker.py), end to end
with the real vocoder, through the worker's public API: the passes its schedule plans are the forwards it
runs, splitting or capping a batch changes nothing in the audio, and the schedule hears of what the worker
delivers. The policy itself, decision by decision: test_vocoder_schedule.py."""

import asyncio

import numpy as np
import pytest

from tests.vocoder.voc_helpers import offline, random_mel, snr_db
from uttera_server.synthesis.vocoder_worker import VocoderWorker
from vocoder.streaming import StreamingVocoder


class Clock:
    """The worker's clock, set by hand."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def worker_with_log(vocoder, **kwargs) -> tuple[VocoderWorker, list]:
    """A VocoderWorker driven on the event loop (`driver="loop"`: it runs nothing between the test's
    synchronous calls, so its next pass sees everything queued by then), whose StreamingVocoder records
    the utterances of every batched forward."""
    sv = StreamingVocoder(vocoder, chunk_frames=8, first_chunk_frames=8)
    batches = []
    submit = sv.submit

    def logged_submit(frames, finish=(), **kwargs):
        batches.append(sorted(set(frames) | set(finish)))
        return submit(frames, finish=finish, **kwargs)

    sv.submit = logged_submit  # type: ignore[method-assign]  # a tap that records each pass's utterances
    return VocoderWorker(sv, driver="loop", **kwargs), batches


async def drain(queue: asyncio.Queue) -> np.ndarray:
    parts = []
    while (item := await asyncio.wait_for(queue.get(), 10)) is not None:
        assert not isinstance(item, BaseException), item
        parts.append(item)
    return np.concatenate(parts)


async def feed_together(worker, mels: dict, deadlines: dict) -> dict:
    """Open every utterance and queue all its frames and its finish before the worker's next pass (no await
    in between); returns each utterance's PCM."""
    queues = {uid: worker.open(uid, deadline=deadlines[uid]) for uid in mels}
    for uid, mel in mels.items():
        worker.push(uid, mel)
        worker.finish(uid)
    return dict(zip(queues, await asyncio.gather(*(drain(q) for q in queues.values()))))


async def test_urgent_utterances_are_vocoded_first_and_exactly(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, urgent_margin_s=0.05, clock=Clock(100.0))
    try:
        mels = {"ahead-1": random_mel(rng, 24), "new": random_mel(rng, 24), "ahead-2": random_mel(rng, 24)}
        pcm = await feed_together(worker, mels, {"ahead-1": 105.0, "new": 100.0, "ahead-2": 103.0})
        assert batches == [["new"], ["ahead-1", "ahead-2"]] and worker.split_passes == 1
        for uid, mel in mels.items():  # splitting the batch changes nothing in the audio
            assert snr_db(offline(tiny_vocoder, mel), pcm[uid]) > 80
    finally:
        worker.close()


async def test_fcfs_vocodes_one_batch(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, deadline_first=False, clock=Clock(100.0))
    try:
        mels = {"a": random_mel(rng, 16), "b": random_mel(rng, 16)}
        await feed_together(worker, mels, {"a": 105.0, "b": 100.0})
        assert batches == [["a", "b"]] and worker.split_passes == 0
    finally:
        worker.close()


@pytest.mark.parametrize("slack", [0.0, 10.0])
async def test_no_split_when_all_utterances_are_alike(tiny_vocoder, rng, slack):
    worker, batches = worker_with_log(tiny_vocoder, clock=Clock(100.0))
    try:
        mels = {"a": random_mel(rng, 16), "b": random_mel(rng, 16)}
        await feed_together(worker, mels, {"a": 100.0 + slack, "b": 100.0 + slack})
        assert batches == [["a", "b"]] and worker.split_passes == 0
    finally:
        worker.close()


async def test_a_capped_pass_leaves_later_deadlines_for_the_next_pass(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, max_relaxed_frames=40, clock=Clock(100.0))
    try:
        mels = {"a": random_mel(rng, 32), "b": random_mel(rng, 32)}
        pcm = await feed_together(worker, mels, {"a": 105.0, "b": 103.0})  # both can wait
        assert batches == [["b"], ["a"]] and worker.deferred_passes == 1  # "a" went without a new push
        for uid, mel in mels.items():
            assert snr_db(offline(tiny_vocoder, mel), pcm[uid]) > 80
    finally:
        worker.close()


async def test_the_vocoder_takes_the_first_chunk_the_schedule_sizes(tiny_vocoder, rng):
    clock = Clock(100.0)
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    worker = VocoderWorker(sv, driver="loop", clock=clock)
    try:
        queue = worker.open("s")
        mel = random_mel(rng, 20)
        for t in range(20):
            worker.push("s", mel[t : t + 1])
            clock.now += 0.2  # a slow engine: a frame every 200 ms
        worker.finish("s")
        assert snr_db(offline(tiny_vocoder, mel), await drain(queue)) > 80
        assert sv.first_chunk_frames == worker.schedule.first_chunk_frames() == 21  # outlasts a 200 ms step
    finally:
        worker.close()


@pytest.mark.parametrize("driver", ["thread", "loop"])
async def test_an_utterance_gains_slack_with_the_audio_it_delivers(tiny_vocoder, rng, driver):
    clock = Clock(100.0)
    worker = VocoderWorker(
        StreamingVocoder(tiny_vocoder, chunk_frames=8, first_chunk_frames=8), driver=driver, clock=clock
    )
    try:
        queue = worker.open("s", deadline=99.0)
        worker.push("s", random_mel(rng, 16))
        pcm = await asyncio.wait_for(queue.get(), 10)
        # its client starts playing when the first audio is delivered, and has that much audio from then
        assert worker.schedule.deadline("s") == 100.0 + pcm.shape[0] / tiny_vocoder.config.sample_rate
        worker.cancel("s")
        assert worker.schedule.deadline("s") is None
    finally:
        worker.close()


@pytest.mark.parametrize("driver", ["thread", "loop"])
async def test_an_urgent_utterance_gets_its_held_frames_vocoded_at_once(tiny_vocoder, rng, driver):
    """An utterance running out of audio does not wait for its next chunk to fill up: frames held back by
    the chunk schedule go out with the next pass (here one that another utterance's frames start)."""
    clock = Clock(100.0)
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    worker = VocoderWorker(sv, urgent_margin_s=0.05, driver=driver, clock=clock)
    try:
        mel = random_mel(rng, 30)
        queue = worker.open("low", deadline=130.0)  # ahead for now
        worker.push("low", mel[:8])
        assert (await asyncio.wait_for(queue.get(), 10)).size > 0  # its first chunk
        worker.push("low", mel[8:12])  # 4 frames: the schedule waits for 8
        worker.open("other", deadline=130.0)
        worker.push("other", random_mel(rng, 4))
        await asyncio.sleep(0.2)
        assert queue.empty() and sv.pending_frames("low") == 4
        clock.now = worker.schedule.deadline("low")  # its client is about to run out
        worker.push("other", random_mel(rng, 4))  # any pass
        pcm = await asyncio.wait_for(queue.get(), 10)
        assert pcm.shape[0] == 4 * tiny_vocoder.config.hop_length and sv.pending_frames("low") == 0
        worker.cancel("other")
    finally:
        worker.close()
