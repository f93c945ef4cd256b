"""`StepVocoder` (vocoder/step_vocoder.py): utterances fed as rows of engine-step tensors, state in arrays.
The reference is offline `Vocoder.forward` on each utterance's whole mel, made int16 by the server's rule:
every utterance's concatenated PCM has exactly `frames * hop` samples, each within 1 LSB, whatever the
chunk schedule, the rows' order in the step tensors, host frames mixed in, eager flushes, finishing in the
same step as the last frames, slots reused after closing, or the arrays growing past their capacity."""

import numpy as np
import pytest
import torch
from tests.vocoder.voc_helpers import offline, random_mel, tiny_config

from vocoder.errors import FrameShapeError
from vocoder.model import Vocoder
from vocoder.step_result import StepPass
from vocoder.step_vocoder import StepVocoder

K = 4  # frames per engine step


def int16(pcm: np.ndarray) -> np.ndarray:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).astype(np.int16)


def collect(out: dict, slot_owner: dict, result: StepPass) -> list[int]:
    """Append each entry's PCM to its utterance; returns the slots that got their final entry."""
    finals = []
    for i, slot in enumerate(result.slots):
        uid = slot_owner[int(slot)]
        out[uid].append(result.pcm(i).copy())
        if result.final[i]:
            finals.append(int(slot))
    body = result.body(np.arange(len(result.slots)))
    assert body.size == int((result.hi - result.lo)[result.rows >= 0].sum())
    return finals


def drive(sv: StepVocoder, mels: dict, rng: np.random.Generator, p_eager: float = 0.0, p_host: float = 0.0) -> dict:
    """Every utterance voices K frames a step (in a random row of the step tensor) from a random start
    step; some steps hand an utterance's frames as host frames instead; each is finished after its last
    frames (in the same step or later)."""
    start = {uid: int(rng.integers(0, 6)) for uid in mels}
    slot_of: dict = {}
    owner: dict = {}
    pos = dict.fromkeys(mels, 0)
    out: dict = {uid: [] for uid in mels}
    done: set = set()
    step = 0
    while len(done) < len(mels):
        for uid in mels:
            if step == start[uid] and uid not in slot_of:
                slot_of[uid] = sv.open()
                owner[slot_of[uid]] = uid
        live = [u for u in mels if u in slot_of and u not in done and pos[u] < len(mels[u])]
        order = rng.permutation(len(live) + 2)  # two extra rows nobody owns
        step_mel = torch.from_numpy(rng.standard_normal((len(live) + 2, K, 80)).astype(np.float32))
        slots, rows, host = [], [], {}
        for r, uid in zip(order, live):
            frames = mels[uid][pos[uid] : pos[uid] + K]
            pos[uid] += K
            if rng.random() < p_host:
                host[slot_of[uid]] = frames
            else:
                step_mel[r] = torch.from_numpy(frames)
                slots.append(slot_of[uid])
                rows.append(r)
        finish = [
            slot_of[u] for u in mels if u in slot_of and u not in done and pos[u] >= len(mels[u]) and rng.random() < 0.6
        ]
        eager = rng.random(sv.capacity) < p_eager
        result = sv.submit(step_mel, np.array(slots), np.array(rows), host=host, finish=np.array(finish), eager=eager)
        for slot in collect(out, owner, result):
            done.add(owner[slot])
        step += 1
    assert not sv.is_open.any()
    return {uid: np.concatenate(chunks) for uid, chunks in out.items()}


@pytest.mark.parametrize("lookahead", [0, 2])
@pytest.mark.parametrize(
    "chunk, first, p_eager, p_host", [(32, 8, 0.0, 0.0), (12, 6, 0.3, 0.2), (4, 4, 0.0, 0.5), (7, 2, 1.0, 0.0)]
)
def test_utterances_equal_offline(lookahead, chunk, first, p_eager, p_host, rng):
    model = Vocoder.random(tiny_config(lookahead=lookahead), seed=lookahead)
    mels = {f"u{i}": random_mel(rng, K * n) for i, n in enumerate([1, 2, 5, 9, 16, 25])}
    sv = StepVocoder(model, chunk_frames=chunk, first_chunk_frames=first, capacity=2)  # grows past 2
    got = drive(sv, mels, rng, p_eager=p_eager, p_host=p_host)
    for uid, mel in mels.items():
        want = int16(offline(model, mel))
        assert got[uid].shape == want.shape == (len(mel) * 256,), uid
        assert np.abs(got[uid].astype(np.int32) - want).max() <= 1, uid


def test_the_chunk_schedule_doubles_up_to_chunk_frames(tiny_vocoder, rng):
    sv = StepVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    slot = sv.open()
    sizes = []
    for _ in range(24):
        result = sv.submit(torch.from_numpy(random_mel(rng, K)[None]), np.array([slot]), np.array([0]))
        sizes += [int(h - lo) for h, lo in zip(result.hi, result.lo)]
    # 8 frames less the lookahead and padding (896 samples) first, then 8, 16, 32, 32 frames
    assert sizes == [2048 - 896, 8 * 256, 16 * 256, 32 * 256, 32 * 256], sizes


def test_finishing_an_utterance_that_never_voiced_sends_an_empty_final(tiny_vocoder):
    sv = StepVocoder(tiny_vocoder)
    slot = sv.open()
    result = sv.submit(finish=np.array([slot]))
    assert result.slots.tolist() == [slot] and result.final.tolist() == [True]
    assert result.pcm(0).size == 0 and result.wait() is None
    assert not sv.is_open[slot]


def test_bad_frames_and_unknown_slots_are_refused(tiny_vocoder):
    sv = StepVocoder(tiny_vocoder)
    slot = sv.open()
    with pytest.raises(FrameShapeError):
        sv.submit(torch.zeros(1, K, 79), np.array([slot]), np.array([0]))
    with pytest.raises(ValueError, match="not open"):
        sv.submit(torch.zeros(1, K, 80), np.array([slot + 1]), np.array([0]))
    sv.close(slot)
    with pytest.raises(ValueError, match="not open"):
        sv.close(slot)


def test_utterances_equal_offline_with_the_edge_bins_zeroed(rng):
    model = Vocoder.random(tiny_config(zero_dc_bin=True, zero_nyquist_bin=True), seed=3)
    mels = {f"u{i}": random_mel(rng, K * n) for i, n in enumerate([1, 3, 8, 17])}
    got = drive(
        StepVocoder(model, chunk_frames=12, first_chunk_frames=4, capacity=2), mels, rng, p_eager=0.3, p_host=0.2
    )
    for uid, mel in mels.items():
        assert np.abs(got[uid].astype(np.int32) - int16(offline(model, mel))).max() <= 1, uid
