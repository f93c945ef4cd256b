from uttera_server.model.pointer_rules import pointer_window


def window(tokens, n=5, offset=0):
    return pointer_window(tokens, n, max_advance=3, max_dwell=2, offset=offset)


def test_first_pointer_is_zero_and_moves_are_bounded():
    assert window([]) == (0, 0, False)
    assert window([0]) == (0, 3, False)
    assert window([0, 3]) == (3, 4, False)  # never past the last phoneme


def test_dwell_limit_forces_a_move_and_stop_only_at_the_end():
    assert window([0, 1, 1]) == (2, 4, False)
    assert window([0, 4]) == (4, 4, True)
    assert window([0, 4, 4]) == (1, 0, True)  # only STOP is left


def test_offset_maps_tokens_to_pointers():
    assert window([100, 101], offset=100) == (1, 4, False)


def _processor(offset, stop, max_advance=3, max_dwell=2):
    import torch

    from uttera_server.model.pointer_logits import PointerLogitsProcessor

    proc = PointerLogitsProcessor.__new__(PointerLogitsProcessor)  # no vLLM config needed for apply()
    proc.offset, proc.stop, proc.max_advance, proc.max_dwell = offset, stop, max_advance, max_dwell
    proc.device, proc.tracks = torch.device("cpu"), {}
    return proc


def test_vectorized_processor_matches_pointer_window():
    """The logits processor's incremental, vectorized masks equal `pointer_window` for every row, step
    after step, over seeded random legal pointer walks of many lengths."""
    import random

    import torch

    from uttera_server.model.pointer_logits import PointerTrack

    offset, max_phonemes = 10, 12
    stop = offset + max_phonemes
    proc = _processor(offset, stop)
    rng = random.Random(0)
    walks = {i: ([], rng.randint(1, max_phonemes)) for i in range(16)}
    for i, (outputs, n) in walks.items():
        proc.tracks[i] = PointerTrack(n, outputs)
    for _step in range(40):
        logits = torch.zeros(len(walks), stop + 3)
        masked = proc.apply(logits.clone())
        for i, (outputs, n) in walks.items():
            lo, hi, may_stop = pointer_window(outputs, n, max_advance=3, max_dwell=2, offset=offset)
            allowed = [t for t in range(stop + 3) if masked[i, t] != float("-inf")]
            expected = [offset + q for q in range(lo, hi + 1)] + ([stop] if may_stop else [])
            assert allowed == sorted(expected), (i, outputs, n)
            if outputs and outputs[-1] == stop:
                continue
            outputs.append(rng.choice(expected))
