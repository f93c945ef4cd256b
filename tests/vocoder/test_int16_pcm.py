"""`StreamingVocoder(int16_pcm=True)`: the same chunks as the float path, made int16 by `to_int16`'s rule
on the vocoder's device, as read-only views of the pass's one host buffer."""

import numpy as np
import pytest
from tests.vocoder.voc_helpers import random_mel, tiny_config

from uttera_server.audio.pcm import to_int16
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder


def chunks(int16_pcm: bool, mels: dict, pieces: list[dict], gain: float) -> dict:
    model = Vocoder.random(tiny_config(lookahead=1), seed=3)
    with StreamingVocoder(model, chunk_frames=8, first_chunk_frames=2, int16_pcm=int16_pcm) as sv:
        run_pass = sv._pass
        sv._pass = lambda *args: run_pass(*args) * gain  # type: ignore[method-assign]  # a random vocoder is quiet
        for uid in mels:
            sv.open(uid)
        outs: dict = {uid: [] for uid in mels}
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            result = sv.submit(piece, finish=list(mels) if last else ())
            for uid, pcm in result.wait().items():
                outs[uid].append(pcm)
    return outs


@pytest.mark.parametrize("gain", [1.0, 200.0])  # 200: loud enough that samples clip at full scale
def test_int16_chunks_equal_to_int16_of_float_chunks(rng, gain):
    mels = {"a": random_mel(rng, 37), "b": random_mel(rng, 5), "c": random_mel(rng, 20)}
    pieces, pos = [], dict.fromkeys(mels, 0)
    while any(pos[u] < len(m) for u, m in mels.items()):
        piece = {}
        for u, m in mels.items():
            k = int(rng.integers(0, 6))
            if pos[u] < len(m) and k:
                piece[u] = m[pos[u] : pos[u] + k]
                pos[u] += len(piece[u])
        pieces.append(piece)
    pieces.append({})
    floats = chunks(False, mels, pieces, gain)
    ints = chunks(True, mels, pieces, gain)
    clipped = 0
    for uid in mels:
        assert len(ints[uid]) == len(floats[uid])
        for f, i in zip(floats[uid], ints[uid]):
            assert f.dtype == np.float32 and i.dtype == np.int16
            np.testing.assert_array_equal(i, to_int16(f))
            assert not i.flags.writeable
            clipped += int((np.abs(f) > 1.0).sum())
        assert sum(len(c) for c in ints[uid]) == len(mels[uid]) * 256
    assert (clipped > 0) == (gain > 1.0)
