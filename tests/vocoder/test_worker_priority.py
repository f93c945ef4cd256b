"""First-chunk priority in the server's vocoder worker (uttera_server/synthesis/vocoder_worker.py), with the real
vocoder: streams whose client is about to run out of audio are vocoded ahead of the others.

These tests reach into the worker's private state (`_cv`, `_pace`, `_intervals`, `_urgent`,
`_first_chunk_frames`) because its deadline policy still lives in the same class as its threads and
queues; they go once the policy is a pure scheduler with time passed in (issue 13)."""

import asyncio
import time

import numpy as np
import pytest
from voc_helpers import offline, random_mel, snr_db


def worker_with_log(vocoder, **kwargs):
    """A VocoderWorker whose StreamingVocoder records the streams of every batched forward."""
    from uttera_server.synthesis.vocoder_worker import VocoderWorker
    from vocoder.streaming import StreamingVocoder

    sv = StreamingVocoder(vocoder, chunk_frames=8, first_chunk_frames=8)
    batches = []
    submit = sv.submit

    def logged_submit(frames, finish=(), **kwargs):
        batches.append(sorted(set(frames) | set(finish)))
        return submit(frames, finish=finish, **kwargs)

    sv.submit = logged_submit
    return VocoderWorker(sv, **kwargs), batches


async def drain(queue: asyncio.Queue) -> np.ndarray:
    parts = []
    while (item := await asyncio.wait_for(queue.get(), 10)) is not None:
        assert not isinstance(item, BaseException), item
        parts.append(item)
    return np.concatenate(parts)


async def feed_together(worker, mels: dict, deadlines: dict) -> dict:
    """Open every stream and queue all its frames and its finish while the worker thread is held, so one
    pass sees them all; returns each stream's PCM."""
    with worker._cv:  # the worker thread waits on this condition: it sees everything at once
        queues = {sid: worker.open(sid, deadline=deadlines[sid]) for sid in mels}
        for sid, mel in mels.items():
            worker.push(sid, mel)
            worker.finish(sid)
    return dict(zip(queues, await asyncio.gather(*(drain(q) for q in queues.values()))))


async def test_urgent_streams_are_vocoded_first_and_exactly(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, urgent_margin_s=0.05)
    try:
        now = time.monotonic()
        mels = {"ahead-1": random_mel(rng, 24), "new": random_mel(rng, 24), "ahead-2": random_mel(rng, 24)}
        deadlines = {"ahead-1": now + 5.0, "new": now, "ahead-2": now + 3.0}
        pcm = await feed_together(worker, mels, deadlines)
        assert batches == [["new"], ["ahead-1", "ahead-2"]] and worker.split_passes == 1
        for sid, mel in mels.items():  # splitting the batch changes nothing in the audio
            assert snr_db(offline(tiny_vocoder, mel), pcm[sid]) > 80
    finally:
        worker.close()


async def test_fcfs_vocodes_one_batch(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, deadline_first=False)
    try:
        now = time.monotonic()
        mels = {"a": random_mel(rng, 16), "b": random_mel(rng, 16)}
        await feed_together(worker, mels, {"a": now + 5.0, "b": now})
        assert batches == [["a", "b"]] and worker.split_passes == 0
    finally:
        worker.close()


@pytest.mark.parametrize("slack", [0.0, 10.0])
async def test_no_split_when_all_streams_are_alike(tiny_vocoder, rng, slack):
    worker, batches = worker_with_log(tiny_vocoder)
    try:
        now = time.monotonic()
        mels = {"a": random_mel(rng, 16), "b": random_mel(rng, 16)}
        await feed_together(worker, mels, {"a": now + slack, "b": now + slack})
        assert batches == [["a", "b"]] and worker.split_passes == 0
    finally:
        worker.close()


async def test_a_stream_gains_slack_with_the_audio_it_delivers(tiny_vocoder, rng):
    worker, _ = worker_with_log(tiny_vocoder)
    try:
        start = time.monotonic()
        queue = worker.open("s", deadline=start)
        worker.push("s", random_mel(rng, 16))
        pcm = await asyncio.wait_for(queue.get(), 10)
        audio_s = pcm.shape[0] / tiny_vocoder.config.sample_rate
        # its client starts playing when the first audio is delivered, and has that much audio from then
        assert start + audio_s <= worker._pace["s"].deadline <= time.monotonic() + audio_s
        worker.cancel("s")
        assert "s" not in worker._pace
    finally:
        worker.close()


async def test_an_urgent_stream_gets_its_held_frames_vocoded_at_once(tiny_vocoder, rng):
    """A stream running out of audio does not wait for its next chunk to fill up: frames held back by
    the chunk schedule go out with the next pass (here one that another stream's frames start)."""
    from uttera_server.synthesis.vocoder_worker import VocoderWorker
    from vocoder.streaming import StreamingVocoder

    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    worker = VocoderWorker(sv, urgent_margin_s=0.05)
    try:
        mel = random_mel(rng, 30)
        queue = worker.open("low", deadline=time.monotonic() + 30.0)  # ahead for now
        worker.push("low", mel[:8])
        assert (await asyncio.wait_for(queue.get(), 10)).size > 0  # its first chunk
        worker.push("low", mel[8:12])  # 4 frames: the schedule waits for 8
        worker.open("other", deadline=time.monotonic() + 30.0)
        worker.push("other", random_mel(rng, 4))
        await asyncio.sleep(0.2)
        assert queue.empty() and sv.pending_frames("low") == 4
        with worker._cv:
            worker._pace["low"].deadline = time.monotonic()  # its client is about to run out
        worker.push("other", random_mel(rng, 4))  # any pass
        pcm = await asyncio.wait_for(queue.get(), 10)
        assert pcm.shape[0] == 4 * tiny_vocoder.config.hop_length and sv.pending_frames("low") == 0
        worker.cancel("other")
    finally:
        worker.close()


async def test_urgency_weighs_slack_against_the_wait_for_the_next_scheduled_chunk(tiny_vocoder, rng):
    from uttera_server.synthesis.vocoder_worker import VocoderWorker
    from vocoder.streaming import StreamingVocoder

    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    worker = VocoderWorker(sv, urgent_margin_s=0.05)
    try:
        queue = worker.open("s", deadline=time.monotonic())
        worker.push("s", random_mel(rng, 8))
        await asyncio.wait_for(queue.get(), 10)  # first chunk out: the schedule now waits for 8 frames
        now = time.monotonic()
        with worker._cv:
            worker._pace["s"].deadline = now + 0.5
            worker._pace["s"].rate = 10.0  # 8 frames at 10 frames/s: 0.8 s > 0.5 s of slack
        assert worker._urgent({"s"}, {}) == {"s"}
        with worker._cv:
            worker._pace["s"].rate = 200.0  # 0.04 s + margin < 0.5 s: it can wait for a bigger chunk
        assert worker._urgent({"s"}, {}) == set()
        worker.cancel("s")
    finally:
        worker.close()


def test_the_first_chunk_grows_to_outlast_a_slow_step(tiny_vocoder):
    from uttera_server.synthesis.vocoder_worker import VocoderWorker
    from vocoder.streaming import StreamingVocoder

    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    worker = VocoderWorker(sv)
    try:
        c = tiny_vocoder.config
        assert worker._first_chunk_frames() == 8  # too few intervals seen: the configured size
        with worker._cv:
            worker._intervals.extend([0.01] * 100)
        assert worker._first_chunk_frames() == 8  # fast steps: 8 frames already cover them
        with worker._cv:
            worker._intervals.extend([0.2] * 100)  # now the p95 step takes 200 ms
        frames = worker._first_chunk_frames()
        assert 8 < frames <= 32 and frames * c.hop_length - sv.lag_samples >= 0.2 * c.sample_rate
    finally:
        worker.close()


async def test_a_capped_pass_leaves_later_deadlines_for_the_next_pass(tiny_vocoder, rng):
    worker, batches = worker_with_log(tiny_vocoder, max_relaxed_frames=40)
    try:
        now = time.monotonic()
        mels = {"a": random_mel(rng, 32), "b": random_mel(rng, 32)}
        pcm = await feed_together(worker, mels, {"a": now + 5.0, "b": now + 3.0})  # both can wait
        assert batches == [["b"], ["a"]] and worker.deferred_passes == 1
        for sid, mel in mels.items():
            assert snr_db(offline(tiny_vocoder, mel), pcm[sid]) > 80
    finally:
        worker.close()
