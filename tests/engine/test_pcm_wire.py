"""The PCM channel's message format (engine_patches/pcm_wire.py), pure: no sockets, no engine."""

import numpy as np
import pytest

from engine_patches.pcm_wire import PcmRoute, decode, encode, sink_address


def test_entries_round_trip_in_order_with_empty_finals():
    rng = np.random.default_rng(0)
    entries = [
        ("a", rng.integers(-32768, 32768, 300).astype(np.int16), False),
        ("b", np.zeros(0, np.int16), True),  # an utterance whose flush had no samples left
        ("c", np.array([-32768, 32767, 0, 1], np.int16), True),
        ("a-2", rng.integers(-32768, 32768, 7).astype(np.int16), False),
    ]
    header, body = encode(entries)
    assert len(body) == 2 * (300 + 4 + 7)
    out = decode([header, body])
    assert [(k, final) for k, _, final in out] == [(k, final) for k, _, final in entries]
    for (_, got, _), (_, want, _) in zip(out, entries):
        assert got.dtype == np.dtype("<i2")
        np.testing.assert_array_equal(got, want)


def test_body_is_int16_little_endian():
    header, body = encode([("k", np.array([1, -2], np.int16), False)])
    assert body == b"\x01\x00\xfe\xff"
    assert decode([header, body])[0][1].tolist() == [1, -2]


def test_empty_message():
    assert decode(encode([])) == []


def test_header_and_body_disagree():
    header, body = encode([("a", np.arange(10, dtype=np.int16), False)])
    with pytest.raises(ValueError, match="names 10 samples, body has 9"):
        decode([header, body[:-2]])
    with pytest.raises(ValueError, match="names 10 samples, body has 11"):
        decode([header, body + b"\x00\x00"])


def test_a_message_has_two_frames():
    header, body = encode([("a", np.arange(3, dtype=np.int16), True)])
    with pytest.raises(ValueError, match="2 frames, got 1"):
        decode([header])
    with pytest.raises(ValueError, match="2 frames, got 3"):
        decode([header, body, b""])


def test_route_travels_as_extra_args_and_names_its_sink():
    route = PcmRoute(sink=3, key="req-1-0", speed=1.25)
    assert PcmRoute.from_arg(route.as_arg()) == route
    assert PcmRoute.from_arg({"sink": 0, "key": "k"}).speed == 1.0
    assert sink_address("ipc:///tmp/x/base", 3) == "ipc:///tmp/x/base-3"
