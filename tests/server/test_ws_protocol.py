"""The WebSocket session protocol, pure: messages and synthesis events in, actions out, no socket."""

import json

import pytest

from uttera_server.errors import SynthesisFailed
from uttera_server.metrics import Outcome
from uttera_server.ws_messages import decode_audio_frame, encode_audio_frame
from uttera_server.ws_protocol import (
    Close,
    RequestRejected,
    SendAudio,
    SendMessage,
    SessionLimits,
    SessionState,
    SpeechSessionProtocol,
    StartSynthesis,
    StopSynthesis,
    StreamClosed,
    StreamOpened,
)

RATE = 16000
LIMITS = SessionLimits(sample_rate=RATE, voices=frozenset({"default", "other"}), max_input_chars=50,
                       max_contexts=2)


def proto() -> SpeechSessionProtocol:
    return SpeechSessionProtocol(LIMITS)


def send(p: SpeechSessionProtocol, **message) -> list:
    return p.receive_text(json.dumps(message))


def messages(actions: list) -> list[dict]:
    return [a.message for a in actions if isinstance(a, SendMessage)]


def types(actions: list) -> list[str]:
    return [type(a).__name__ for a in actions]


def started_segment(actions: list):
    (start,) = [a for a in actions if isinstance(a, StartSynthesis)]
    return start.segment


def test_text_flush_end_streams_audio_then_done():
    p = proto()
    actions = send(p, type="text", text="Hello ")
    assert actions == [StreamOpened("default"), SendMessage(
        {"type": "started", "context_id": "default", "sample_rate": RATE, "format": "pcm_s16le"})]
    assert send(p, type="text", text="world.") == []
    seg = started_segment(send(p, type="flush"))
    assert (seg.context_id, seg.text, seg.voice, seg.speed) == ("default", "Hello world.", "default", 1.0)
    pcm = b"\x01\x00" * 800  # 50 ms at 16 kHz
    assert p.audio(seg.id, pcm) == [SendAudio("default", encode_audio_frame("default", pcm))]
    assert send(p, type="end") == []  # the segment is still running
    assert p.audio(seg.id, pcm)
    assert p.segment_done(seg.id) == [
        SendMessage({"type": "done", "context_id": "default", "audio_ms": 100}),
        StreamClosed("default", Outcome.OK, 0.1),
    ]
    assert p.open_contexts == 0 and p.state is SessionState.OPEN


def test_segments_of_a_context_run_one_after_another():
    p = proto()
    send(p, type="text", text="One.")
    first = started_segment(send(p, type="flush"))
    send(p, type="text", text="Two.")
    assert send(p, type="flush") == []  # queued behind the first
    assert send(p, type="end") == []
    second = started_segment(p.segment_done(first.id))
    assert second.text == "Two." and second.id != first.id
    assert messages(p.segment_done(second.id)) == [{"type": "done", "context_id": "default", "audio_ms": 0}]


def test_end_flushes_the_buffer():
    p = proto()
    send(p, type="text", text="Only end.", voice="other", speed=2)
    seg = started_segment(send(p, type="end"))
    assert (seg.text, seg.voice, seg.speed) == ("Only end.", "other", 2.0)
    assert types(p.segment_done(seg.id)) == ["SendMessage", "StreamClosed"]


def test_cancel_stops_synthesis_before_cancelled_and_later_audio_is_dropped():
    p = proto()
    send(p, type="text", text="Long text.")
    seg = started_segment(send(p, type="flush"))
    assert p.audio(seg.id, b"\x00\x00")
    actions = send(p, type="cancel")
    assert actions == [StopSynthesis(seg), SendMessage({"type": "cancelled", "context_id": "default"}),
                       StreamClosed("default", Outcome.CANCELLED, 1 / RATE)]
    assert p.audio(seg.id, b"\x00\x00") == []  # a chunk that raced the cancel
    assert p.segment_done(seg.id) == []
    # the context id can be used again
    assert StreamOpened("default") in send(p, type="text", text="Again.")


def test_cancel_of_an_unknown_context_is_acknowledged():
    assert send(proto(), type="cancel", context_id="x") == [SendMessage({"type": "cancelled", "context_id": "x"})]


@pytest.mark.parametrize("data, code", [
    ("not json", "invalid_json"),
    ("[1, 2]", "invalid_json"),
    ('{"text": "no type"}', "missing_field"),
    ('{"type": 3}', "invalid_type"),
    ('{"type": "speak"}', "unknown_message_type"),
    ('{"type": "text"}', "missing_field"),
    ('{"type": "text", "text": 5}', "invalid_type"),
    ('{"type": "text", "text": "a", "voice": 1}', "invalid_type"),
    ('{"type": "text", "text": "a", "speed": "fast"}', "invalid_type"),
    ('{"type": "text", "text": "a", "speed": true}', "invalid_type"),
    ('{"type": "flush", "context_id": 7}', "invalid_type"),
    ('{"type": "flush", "context_id": ""}', "invalid_type"),
    ('{"type": "flush", "context_id": "' + "x" * 256 + '"}', "invalid_type"),
])  # fmt: skip
def test_malformed_message_answers_error_and_closes_1008(data, code):
    p = proto()
    actions = p.receive_text(data)
    assert [m["code"] for m in messages(actions)] == [code]
    assert actions[-2:] == [RequestRejected(code), Close(1008, code)]
    assert p.state is SessionState.CLOSED
    with pytest.raises(RuntimeError, match="after the session closed"):
        send(p, type="flush")


def test_binary_message_closes_1008():
    p = proto()
    actions = p.receive_bytes(b"\x01\x02")
    assert messages(actions)[0]["code"] == "binary_not_supported"
    assert actions[-1] == Close(1008, "binary_not_supported")


def test_malformed_message_stops_open_contexts():
    p = proto()
    send(p, type="text", text="Hi.")
    seg = started_segment(send(p, type="flush"))
    actions = p.receive_text("{")
    assert types(actions) == ["SendMessage", "StopSynthesis", "StreamClosed", "Close"]
    assert actions[2] == StreamClosed("default", Outcome.ERROR, 0.0) and actions[1] == StopSynthesis(seg)


@pytest.mark.parametrize("extra, code", [
    ({"voice": "nobody"}, "unknown_voice"),
    ({"speed": 0.1}, "invalid_speed"),
    ({"speed": 4.5}, "invalid_speed"),
])  # fmt: skip
def test_bad_parameters_refuse_the_context_but_keep_the_socket(extra, code):
    p = proto()
    actions = send(p, type="text", text="Hi.", context_id="c", **extra)
    assert messages(actions) == [{"type": "error", "code": code, "message": messages(actions)[0]["message"],
                                  "context_id": "c"}]
    assert actions[-1] == RequestRejected(code)
    assert p.state is SessionState.OPEN and p.open_contexts == 0


def test_voice_and_speed_are_fixed_by_the_first_text():
    p = proto()
    send(p, type="text", text="a", speed=1.5)
    assert send(p, type="text", text="b", speed=1.5) == []
    actions = send(p, type="text", text="c", voice="other")
    assert [m["code"] for m in messages(actions)] == ["context_conflict"]
    assert p.open_contexts == 1  # the context goes on without "c"
    assert started_segment(send(p, type="flush")).text == "ab"


def test_text_after_end_is_refused():
    p = proto()
    send(p, type="text", text="a")
    send(p, type="end")
    assert [m["code"] for m in messages(send(p, type="text", text="b"))] == ["context_conflict"]


def test_too_much_text_before_a_flush_ends_the_context():
    p = proto()
    send(p, type="text", text="x" * 30)
    seg = started_segment(send(p, type="flush"))
    send(p, type="text", text="y" * 30)
    actions = send(p, type="text", text="y" * 30)
    assert [m["code"] for m in messages(actions)] == ["input_too_long"]
    assert StopSynthesis(seg) in actions and actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0)


def test_blank_text_is_not_synthesized():
    p = proto()
    send(p, type="text", text="   ")
    assert send(p, type="flush") == []
    actions = send(p, type="end")
    assert [m["code"] for m in messages(actions)] == ["empty_input"]
    assert actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0)


def test_end_without_text_is_an_error():
    actions = send(proto(), type="end")
    assert [m["code"] for m in messages(actions)] == ["empty_input"]
    assert actions[-1] == RequestRejected("empty_input")


def test_flush_without_context_does_nothing():
    assert send(proto(), type="flush") == []


def test_synthesis_failure_ends_the_context_with_an_error():
    p = proto()
    send(p, type="text", text="Hi.")
    seg = started_segment(send(p, type="end"))
    actions = p.segment_failed(seg.id, SynthesisFailed())
    assert messages(actions)[0]["code"] == "synthesis_failed" and messages(actions)[0]["context_id"] == "default"
    assert actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0)


def test_contexts_are_independent_and_limited():
    p = proto()
    send(p, type="text", text="A.", context_id="a")
    send(p, type="text", text="B.", context_id="b")
    actions = send(p, type="text", text="C.", context_id="c")
    assert [m["code"] for m in messages(actions)] == ["too_many_contexts"]
    a = started_segment(send(p, type="flush", context_id="a"))
    b = started_segment(send(p, type="flush", context_id="b"))
    assert decode_audio_frame(p.audio(b.id, b"\x02\x00")[0].frame) == ("b", b"\x02\x00")
    send(p, type="cancel", context_id="a")
    assert p.audio(a.id, b"\x00\x00") == [] and p.audio(b.id, b"\x00\x00")


def test_connection_lost_stops_everything():
    p = proto()
    send(p, type="text", text="Hi.")
    seg = started_segment(send(p, type="flush"))
    assert p.connection_lost() == [StopSynthesis(seg), StreamClosed("default", Outcome.DISCONNECTED, 0.0)]
    assert p.state is SessionState.CLOSED and p.connection_lost() == []
    assert p.segment_done(seg.id) == []


def test_drain_lets_open_contexts_finish_then_closes():
    p = proto()
    send(p, type="text", text="Hi.")
    seg = started_segment(send(p, type="end"))
    assert p.begin_drain() == []
    actions = send(p, type="text", text="New.", context_id="new")
    assert [m["code"] for m in messages(actions)] == ["shutting_down"]
    assert types(p.segment_done(seg.id)) == ["SendMessage", "StreamClosed", "Close"]
    assert p.state is SessionState.CLOSED


def test_drain_without_contexts_closes_at_once():
    assert proto().begin_drain() == [Close(1001, "server shutting down")]


def test_cancel_all_stops_every_context_and_closes():
    p = proto()
    send(p, type="text", text="Hi.")
    seg = started_segment(send(p, type="flush"))
    actions = p.cancel_all()
    assert actions[0] == StopSynthesis(seg)
    assert messages(actions)[0]["code"] == "shutting_down"
    assert actions[-2:] == [StreamClosed("default", Outcome.CANCELLED, 0.0), Close(1001, "server shutting down")]


def test_audio_frame_layout():
    frame = encode_audio_frame("ctx-é", b"\x10\x00\x20\x00")
    assert frame[0] == 0x01 and frame[1] == len("ctx-é".encode()) == 6
    assert frame[2:8] == "ctx-é".encode() and frame[8:] == b"\x10\x00\x20\x00"
    assert decode_audio_frame(frame) == ("ctx-é", b"\x10\x00\x20\x00")
