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

    from uttera_server.model.pointer_logits import PointerLogitsProcessor, PointerTracks

    proc = PointerLogitsProcessor.__new__(PointerLogitsProcessor)  # no vLLM config needed for apply()
    proc.offset, proc.stop, proc.max_advance, proc.max_dwell = offset, stop, max_advance, max_dwell
    proc.device, proc.tracks = torch.device("cpu"), PointerTracks(capacity=4)  # small: rows past it grow it
    proc.pin = False
    return proc


def test_vectorized_processor_matches_pointer_window():
    """The logits processor's incremental, vectorized masks equal `pointer_window` for every row, step
    after step, over seeded random legal pointer walks of many lengths."""
    import random

    import torch

    offset, max_phonemes = 10, 12
    stop = offset + max_phonemes
    proc = _processor(offset, stop)
    rng = random.Random(0)
    walks = {i: ([], rng.randint(1, max_phonemes)) for i in range(16)}
    for i, (outputs, n) in walks.items():
        proc.tracks.add(i, n, outputs)
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


def _check_masks(proc, walks, rows, width, offset, stop):
    """Every tracked row's mask equals `pointer_window` on its tokens so far."""
    import torch

    masked = proc.apply(torch.zeros(rows, width))
    for i, (outputs, n) in walks.items():
        lo, hi, may_stop = pointer_window(outputs, n, max_advance=3, max_dwell=2, offset=offset)
        allowed = [t for t in range(width) if masked[i, t] != float("-inf")]
        expected = [offset + q for q in range(lo, hi + 1)] + ([stop] if may_stop else [])
        assert allowed == sorted(expected), (i, outputs, n)
    untracked = [i for i in range(rows) if i not in walks]
    assert not (masked[untracked] == float("-inf")).any()  # rows with no request are left alone
    return masked


def test_batch_updates_move_swap_remove_and_multi_token_steps():
    """vLLM's batch updates (add, remove, move, swap) keep each row's state with its request, and a row
    that gained several tokens at once (first step after a recompute) folds them all."""
    import random
    from types import SimpleNamespace

    offset, stop, width = 10, 22, 25
    proc = _processor(offset, stop)
    rng = random.Random(1)

    def legal(outputs, n):
        lo, hi, may_stop = pointer_window(outputs, n, max_advance=3, max_dwell=2, offset=offset)
        options = [offset + q for q in range(lo, hi + 1)] + ([stop] if may_stop else [])
        return rng.choice(options)

    def update(removed=(), added=(), moved=()):
        moves = [(a, b, SimpleNamespace(name=name)) for a, b, name in moved]
        proc.update_state(SimpleNamespace(removed=list(removed), added=list(added), moved=moves))

    walks = {i: ([], rng.randint(2, 12)) for i in range(6)}
    update(added=[(i, None, [0] * n, outputs) for i, (outputs, n) in walks.items()])
    for step in range(30):
        _check_masks(proc, walks, 8, width, offset, stop)
        for outputs, n in walks.values():
            for _ in range(3 if step % 7 == 3 else 1):  # some steps fold 3 tokens at once
                if not outputs or outputs[-1] != stop:
                    outputs.append(legal(outputs, n))
        if step % 5 == 1:  # swap two rows
            a, b = rng.sample(sorted(walks), 2)
            walks[a], walks[b] = walks[b], walks[a]
            update(moved=[(a, b, "SWAP")])
        if step % 5 == 2:  # move a row to a free slot (condense), its old slot left empty
            a = rng.choice(sorted(walks))
            b = min(set(range(8)) - set(walks))
            walks[b] = walks.pop(a)
            update(moved=[(a, b, "UNIDIRECTIONAL")])
        if step % 5 == 4:  # one request ends, another starts in its row
            gone = rng.choice(sorted(walks))
            walks[gone] = ([], rng.randint(2, 12))
            update(removed=[gone], added=[(gone, None, [0] * walks[gone][1], walks[gone][0])])
    assert len(proc.tracks) == len(walks) and all(i in proc.tracks for i in walks)
