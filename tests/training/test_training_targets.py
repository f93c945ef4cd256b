"""Pointer targets are always legal under the serving rules (docs/model-format.md)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from training.targets import TargetError, chunk_mel, max_dwell, move_classes, pointer_targets


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=60), st.sampled_from([1, 2, 4]))
def test_pointer_targets_are_legal(durations, r):
    # Piper phonemes last >= 1 frame; with its pad merged, >= 2 except the final `$`.
    durations = [max(d, 2) for d in durations[:-1]] + [durations[-1]]
    steps = -(-sum(durations) // r)
    assume((steps - 1) * 3 >= len(durations) - 1)  # reachable at 3 phonemes a step (see the next test)
    p = pointer_targets(np.array(durations), r, max_advance=3)
    assert len(p) == -(-sum(durations) // r)
    assert p[0] == 0 and p[-1] == len(durations) - 1
    moves = np.diff(p)
    assert (moves >= 0).all() and (moves <= 3).all()
    classes = move_classes(p, 3)
    assert classes[-1] == 4 and (classes[:-1] <= 3).all()
    assert 1 <= max_dwell(p) <= len(p)


def test_unreachable_targets_raise():
    # 3 frames at 4 frames a step: one step, which cannot voice 2 phonemes
    with pytest.raises(TargetError, match="cannot be reached"):
        pointer_targets(np.array([2, 1]), r=4, max_advance=3)


def test_pointer_is_phoneme_of_first_frame():
    p = pointer_targets(np.array([3, 5, 2, 6]), r=4, max_advance=3)
    # frames: 0 0 0 1 | 1 1 1 1 | 2 2 3 3 | 3 3 3 3  -> first frames 0, 1, 2, 3
    assert p.tolist() == [0, 1, 2, 3]


def test_chunk_mel_repeats_last_frame():
    mel = np.arange(10 * 2, dtype=np.float32).reshape(10, 2)
    chunks = chunk_mel(mel, 4)
    assert chunks.shape == (3, 4, 2)
    assert (chunks[2, 2:] == mel[-1]).all()
