from uttera_server.pointer_rules import pointer_window


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
