"""uttera_server/heap.py: what exists when the engine is up is frozen, and a full pass stops walking it."""

import gc

from uttera_server import heap


def test_freezing_takes_the_startup_heap_out_of_full_passes():
    kept = [[i] for i in range(200_000)]  # a long-lived heap of tracked objects, like a serving process's
    try:
        frozen = heap.freeze()
        assert frozen.objects >= len(kept)
        assert frozen.full_pass_after_s < frozen.full_pass_before_s / 5
        assert not any(x is kept for x in gc.get_objects(2))  # no longer walked by generation 2
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
