"""The in-engine vocoder's chunk schedule under a clock (engine_patches/engine_vocoder.py), in this process:
`EngineVocoder` fed step tensors as the model runner patch feeds it, its PCM read from a real ZMQ sink,
time from a controlled clock handed to it (`clock=`). The same rule through real engines:
`test_engine_vocoder.py::test_urgency_in_a_real_engine_vocodes_every_step_else_the_doubling_schedule`.
An utterance whose audio sent is less than `urgent_s` ahead of real-time playback from its first chunk is vocoded at every step; one that is far enough ahead waits for the doubling schedule.
Either way, its PCM equals offline vocoding of its whole mel."""

import numpy as np
import pytest
import torch
import zmq

from engine_patches.engine_vocoder import EngineVocoder, EngineVocoderConfig
from engine_patches.pcm_wire import PcmRoute, decode, sink_address
from uttera_server.synthesis.pcm_receiver import new_sink_base
from vocoder.model import Vocoder

FRAMES_PER_STEP = 4


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()  # handed to EngineVocoder as its clock


def run_utterance(model_dir, clock: Clock, step_s: float, steps: int, urgent_s: float):
    """One utterance voiced for `steps` steps of FRAMES_PER_STEP frames, `step_s` apart on the clock, then
    finished. Returns (its mel, the samples of each message in order, the PCM)."""
    base = new_sink_base()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sink = ctx.socket(zmq.PULL)
    sink.bind(sink_address(base, 0))
    config = EngineVocoderConfig(sink_base=base, chunk_frames=32, first_chunk_frames=8, urgent_s=urgent_s)
    voc = EngineVocoder(model_dir, "cpu", config, clock=clock)
    n_mels = voc.n_mels
    rng = np.random.default_rng(0)
    mel = rng.normal(-5.0, 1.0, (steps, 2, FRAMES_PER_STEP, n_mels)).astype(np.float32)  # 2 rows a step
    try:
        voc.open("r", PcmRoute(sink=0, key="r"))
        for i in range(steps):
            voc.step(
                torch.from_numpy(mel[i]), voc.slots(["r"]), np.array([1])
            )  # our utterance is row 1 of the step tensor
            clock.t += step_s
        voc.finished(["r"])
        voc.step()
        messages = []
        while True:
            entries = decode(sink.recv_multipart())
            ((key, samples, final),) = entries
            assert key == "r"
            messages.append(samples)
            if final:
                break
    finally:
        voc.close()
        sink.close(linger=0)
    return mel[:, 1].reshape(-1, n_mels), messages


def offline(model_dir, mel: np.ndarray) -> np.ndarray:
    vocoder = Vocoder.from_dir(model_dir / "vocoder")
    with torch.inference_mode():
        audio = vocoder(torch.from_numpy(np.ascontiguousarray(mel.T[None])))[0].numpy()
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def assert_exact(messages, mel, model_dir):
    pcm = np.concatenate(messages)
    want = offline(model_dir, mel)
    assert pcm.shape == want.shape
    assert np.abs(pcm.astype(np.int32) - want.astype(np.int32)).max() <= 1


def test_an_utterance_behind_real_time_is_vocoded_every_step(tiny_model_dir, clock):
    # 60 ms a step for 46 ms of audio: the client drains faster than the engine fills, so after its first
    # chunk (2 steps) the utterance goes out at every step, 4 frames = 1024 samples each.
    mel, messages = run_utterance(tiny_model_dir, clock, step_s=0.060, steps=12, urgent_s=0.25)
    hop = 256
    sizes = [m.size for m in messages[:-1]]
    assert sizes[1:] == [FRAMES_PER_STEP * hop] * (len(sizes) - 1), sizes
    assert len(sizes) == 12 - 1  # first chunk after 2 steps, then one message per step
    assert_exact(messages, mel, tiny_model_dir)


def test_an_utterance_well_ahead_follows_the_doubling_schedule(tiny_model_dir, clock):
    # A frozen clock: generation infinitely faster than playback. Chunks of 8, 8, 16, 32 frames once the
    # utterance has 250 ms in hand (the first ~30 frames still go out every step).
    mel, eager = run_utterance(tiny_model_dir, clock, step_s=0.0, steps=24, urgent_s=0.25)
    _, scheduled = run_utterance(tiny_model_dir, clock, step_s=0.0, steps=24, urgent_s=0.0)
    assert [m.size // 256 for m in scheduled[1:-1]] == [8, 16, 32, 32], [m.size for m in scheduled]
    # eager: 1152 samples (8 frames less the lookahead) are 52 ms in hand; each 4-frame step adds 46 ms,
    # so the next 5 steps go out one by one (52 + 5 * 46 > 250), then the schedule takes over.
    sizes = [m.size for m in eager[1:-1]]
    assert sizes[:5] == [FRAMES_PER_STEP * 256] * 5, sizes
    assert max(sizes[5:]) > FRAMES_PER_STEP * 256, sizes
    assert_exact(eager, mel, tiny_model_dir)
    assert_exact(scheduled, mel, tiny_model_dir)
