"""The WebSocket session protocol, pure: messages, synthesis events and a fake clock in, actions out."""

import json

import pytest

from uttera_server.errors import ServerFault, SynthesisFailed
from uttera_server.outcome import Outcome
from uttera_server.ws.text_chunker import ChunkerConfig
from uttera_server.synthesis.word_clock import WordTiming
from uttera_server.ws.actions import (
    ClientCancelled,
    Close,
    RequestRejected,
    SendAudio,
    SendMessage,
    StartSynthesis,
    StopSynthesis,
    StreamClosed,
    StreamOpened,
    Underrun,
)
from uttera_server.synthesis import VoiceInfo
from uttera_server.ws.context import ContextConfig, ContextStream
from uttera_server.ws.messages import decode_audio_frame, encode_audio_frame
from uttera_server.ws.protocol import SessionLimits, SessionState, SpeechSessionProtocol

RATE = 16000
MS = 2 * RATE // 1000  # PCM bytes per ms
DEFAULT = VoiceInfo("default", "test", "en-US", "", True, RATE)
OTHER = VoiceInfo("other", "other", "en-US", "", True, RATE)
LIMITS = SessionLimits(
    sample_rate=RATE,
    voices={"default": DEFAULT, "test": DEFAULT, "other": OTHER},
    max_buffered_chars=120,
    max_contexts=2,
    idle_timeout_s=10.0,
    chunking=ChunkerConfig(max_wait_ms=300, min_chunk_chars=10, max_chars=100),
)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def p(clock) -> SpeechSessionProtocol:
    return SpeechSessionProtocol(LIMITS, clock)


def send(p: SpeechSessionProtocol, **message) -> list:
    return p.receive_text(json.dumps(message))


def messages(actions: list) -> list[dict]:
    return [a.message for a in actions if isinstance(a, SendMessage)]


def kinds(actions: list) -> list[str]:
    """Message types and action names, in order: ["started", "StartSynthesis", ...]."""
    return [a.message["type"] if isinstance(a, SendMessage) else type(a).__name__ for a in actions]


def segments(actions: list) -> list:
    return [a.segment for a in actions if isinstance(a, StartSynthesis)]


def audio_of(actions: list) -> list[tuple[str, bytes]]:
    return [decode_audio_frame(a.frame) for a in actions if isinstance(a, SendAudio)]


def pcm(ms: int, value: int = 1) -> bytes:
    return bytes((value, 0)) * (ms * MS // 2)


# --- one context: text, segments, audio, done -----------------------------------------------------


def test_text_flush_end_streams_audio_then_done(p):
    assert send(p, type="text", text="Hello ") == [
        StreamOpened("default"),
        SendMessage({"type": "started", "context_id": "default", "sample_rate": RATE, "format": "pcm_s16le"}),
    ]
    assert send(p, type="text", text="world") == []  # no boundary yet
    actions = send(p, type="flush")
    (seg,) = segments(actions)
    assert (seg.context_id, seg.text, seg.voice, seg.speed, seg.text_offset) == (
        "default",
        "Hello world",
        DEFAULT,
        1.0,
        0,
    )
    assert kinds(actions) == ["StartSynthesis"]  # flushed waits for the segment's audio
    assert p.audio(seg.id, pcm(50)) == [SendAudio("default", encode_audio_frame("default", pcm(50)))]
    assert send(p, type="end") == []  # the segment is still running
    assert p.audio(seg.id, pcm(50))
    assert p.segment_done(seg.id) == [
        SendMessage({"type": "flushed", "context_id": "default"}),
        SendMessage(
            {"type": "done", "context_id": "default", "audio_ms": 100, "usage": {"characters": 11, "audio_ms": 100}}
        ),
        StreamClosed("default", Outcome.OK, 0.1),
    ]
    assert p.open_contexts == 0 and p.state is SessionState.OPEN


def test_token_feed_starts_synthesis_at_each_sentence_end(p):
    started = []
    for token in ["Hi", " there", ",", " friend", ".", " How", " are", " you", "?", " Fine"]:
        started += segments(send(p, type="text", text=token))
    assert [s.text for s in started] == ["Hi there, friend.", "How are you?"]  # before any end
    assert [s.text_offset for s in started] == [0, 18]
    assert segments(send(p, type="end")) == []  # two segments already run: the third waits
    (last,) = segments(p.segment_done(started[0].id))
    assert last.text == "Fine" and last.text_offset == 31


def test_max_wait_starts_text_without_a_boundary(p, clock):
    send(p, type="text", text="so we walked down the ro")
    assert p.next_deadline() == pytest.approx(clock.now + 0.3)
    clock.now += 0.3
    (seg,) = segments(p.on_timer())
    assert seg.text == "so we walked down the"
    (rest,) = segments(send(p, type="text", text="ad.") + send(p, type="end"))
    assert rest.text == "road." and rest.text_offset == 22


def test_a_context_sets_its_own_max_wait(p, clock):
    send(p, type="text", text="so we walked down the ro", context_id="patient", max_wait_ms=2000)
    send(p, type="text", text="and then we ran up the hill ", context_id="eager")  # the server's 300 ms
    assert p.next_deadline() == pytest.approx(clock.now + 0.3)
    clock.now += 0.3
    (seg,) = segments(p.on_timer())
    assert seg.text == "and then we ran up the hill"  # only the context that kept the server's wait
    assert p.next_deadline() == pytest.approx(clock.now + 1.7)
    clock.now += 1.69
    assert segments(p.on_timer()) == []
    clock.now += 0.01
    (seg,) = segments(p.on_timer())
    assert seg.text == "so we walked down the"


@pytest.mark.parametrize("value", [0, -5, 30_000.5, 1e308])
def test_a_max_wait_out_of_range_refuses_the_context_but_keeps_the_socket(p, value):
    actions = send(p, type="text", text="Hi.", context_id="c", max_wait_ms=value)
    (error,) = messages(actions)
    assert error["code"] == "invalid_request" and error["context_id"] == "c" and "max_wait_ms" in error["message"]
    assert actions[-1] == RequestRejected("invalid_request")
    assert p.state is SessionState.OPEN and p.open_contexts == 0


def test_a_max_wait_that_is_not_a_number_is_malformed(p):
    actions = send(p, type="text", text="Hi.", max_wait_ms="long")
    assert messages(actions)[0]["code"] == "invalid_type" and actions[-1] == Close(1008, "invalid_type")


def test_segments_pipeline_and_their_audio_never_overlaps(p):
    actions = send(p, type="text", text="One is here. Two is here. Three is here. Four")
    first, second = segments(actions)  # the third waits: two run at once
    assert (first.text, second.text) == ("One is here.", "Two is here.")
    assert p.audio(second.id, pcm(20, 2)) == []  # held: the first still streams
    assert p.words(second.id, [WordTiming("Two", 0.0, 10.0, 13, 16)]) == []
    assert p.words(first.id, [WordTiming("One", 0.0, 12.4, 0, 3)]) == []  # goes with the next audio
    actions = p.audio(first.id, pcm(30, 1))
    assert kinds(actions) == ["timestamps", "SendAudio"] and audio_of(actions) == [("default", pcm(30, 1))]
    actions = p.segment_done(first.id)
    # the second's held audio and words go out now, its times offset by the first's 30 ms of audio
    assert kinds(actions) == ["timestamps", "SendAudio", "StartSynthesis"]
    assert audio_of(actions) == [("default", pcm(20, 2))]
    assert messages(actions)[0]["words"] == [
        {"word": "Two", "start_ms": 30, "end_ms": 40, "char_start": 13, "char_end": 16}
    ]
    third = segments(actions)[0]
    assert third.text == "Three is here."
    assert kinds(p.audio(second.id, pcm(10))) == ["SendAudio"]  # it leads now: sent at once


def test_a_finished_segment_waits_for_the_one_before_it(p):
    first, second = segments(send(p, type="text", text="One is here. Two is here. Th"))
    p.audio(second.id, pcm(10, 2))
    assert p.segment_done(second.id) == []
    p.audio(first.id, pcm(10, 1))
    (third,) = segments(send(p, type="end"))  # one runs: room for the third
    actions = p.segment_done(first.id)
    assert audio_of(actions) == [("default", pcm(10, 2))] and kinds(actions) == ["SendAudio"]
    assert kinds(p.segment_done(third.id)) == ["done", "StreamClosed"]


def test_flush_is_acknowledged_after_the_audio_before_it(p):
    a = segments(send(p, type="text", text="First part") + send(p, type="flush"))[0]
    b = segments(send(p, type="text", text="second part") + send(p, type="flush"))[0]
    p.audio(b.id, pcm(5, 2))  # held
    p.audio(a.id, pcm(5, 1))
    actions = p.segment_done(a.id)
    assert kinds(actions) == ["flushed", "SendAudio"]  # a's flushed, then b's audio
    assert kinds(p.segment_done(b.id)) == ["flushed"]


def test_flush_with_nothing_buffered_is_acknowledged_at_once(p):
    assert messages(send(p, type="flush", context_id="x")) == [{"type": "flushed", "context_id": "x"}]
    send(p, type="text", text="   ")
    assert messages(send(p, type="flush")) == [{"type": "flushed", "context_id": "default"}]


def test_end_flushes_the_buffer_with_voice_and_speed(p):
    send(p, type="text", text="Only end.", voice="other", speed=2)
    (seg,) = segments(send(p, type="end"))
    assert (seg.text, seg.voice, seg.speed) == ("Only end.", OTHER, 2.0)
    assert kinds(p.segment_done(seg.id)) == ["done", "StreamClosed"]


def test_timestamps_go_out_before_the_next_audio_or_at_the_segment_end(p):
    a = segments(send(p, type="text", text="Ab cd.") + send(p, type="flush"))[0]
    p.audio(a.id, pcm(40))
    p.segment_done(a.id)
    b = segments(send(p, type="text", text=" Ef gh.") + send(p, type="flush"))[0]
    assert p.words(b.id, [WordTiming("Ef", 1.4, 20.6, 7, 9)]) == []
    p.words(b.id, [WordTiming("gh", 20.6, 30, 10, 12)])
    actions = p.audio(b.id, pcm(10))
    assert kinds(actions) == ["timestamps", "SendAudio"]
    assert messages(actions)[0] == {
        "type": "timestamps",
        "context_id": "default",
        "words": [
            {"word": "Ef", "start_ms": 41, "end_ms": 61, "char_start": 7, "char_end": 9},
            {"word": "gh", "start_ms": 61, "end_ms": 70, "char_start": 10, "char_end": 12},
        ],
    }
    p.words(b.id, [WordTiming("ij", 30, 50, 13, 15)])
    assert kinds(p.segment_done(b.id)) == ["timestamps", "flushed"]


# --- cancel, failures, limits -------------------------------------------------------------------------


def test_cancel_stops_every_running_segment_before_cancelled(p):
    first, second = segments(send(p, type="text", text="One is here. Two is here. Three"))
    assert p.audio(first.id, pcm(1))
    actions = send(p, type="cancel")
    assert actions == [
        ClientCancelled("default"),
        StopSynthesis(first),
        StopSynthesis(second),
        SendMessage({"type": "cancelled", "context_id": "default"}),
        StreamClosed("default", Outcome.CANCELLED, 0.001),
    ]
    assert p.audio(first.id, pcm(1)) == [] and p.audio(second.id, pcm(1)) == []  # raced the cancel
    assert p.words(first.id, [WordTiming("One", 0, 1, 0, 3)]) == []
    assert p.segment_done(first.id) == [] and not p.segment_live(first.id)
    assert StreamOpened("default") in send(p, type="text", text="Again.")  # the id can be used again


def test_cancel_of_an_unknown_context_is_acknowledged(p):
    assert send(p, type="cancel", context_id="x") == [SendMessage({"type": "cancelled", "context_id": "x"})]


def test_contexts_are_independent_and_limited(p):
    a = segments(send(p, type="text", text="A is here.", context_id="a") + send(p, type="flush", context_id="a"))[0]
    b = segments(
        send(p, type="text", text="B is here.", context_id="b", speed=1.5) + send(p, type="flush", context_id="b")
    )[0]
    assert b.speed == 1.5 and a.speed == 1.0
    actions = send(p, type="text", text="C.", context_id="c")
    assert [m["code"] for m in messages(actions)] == ["too_many_contexts"] and messages(actions)[0]["context_id"] == "c"
    assert audio_of(p.audio(b.id, b"\x02\x00")) == [("b", b"\x02\x00")]
    send(p, type="cancel", context_id="a")
    assert p.audio(a.id, b"\x00\x00") == [] and p.audio(b.id, b"\x00\x00")


def test_too_much_unspoken_text_ends_only_that_context(p):
    send(p, type="text", text="Other context.", context_id="other")
    (seg,) = segments(send(p, type="text", text="x " * 30 + ". Next"))  # 62 characters, one segment running
    actions = send(p, type="text", text="y" * 60)  # 6 pending + 61 running + 60 > 120
    assert [m["code"] for m in messages(actions)] == ["input_too_long"]
    assert messages(actions)[0]["context_id"] == "default"
    assert StopSynthesis(seg) in actions and actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0)
    assert p.open_contexts == 1 and p.state is SessionState.OPEN


def test_finished_segments_free_their_text_budget(p):
    (seg,) = segments(send(p, type="text", text="x " * 30 + ". Next"))
    p.segment_done(seg.id)
    assert messages(send(p, type="text", text="y" * 100)) == []  # 4 pending + 100 <= 120


def test_synthesis_failure_ends_the_context_with_an_error(p):
    send(p, type="text", text="Hi.")
    seg = segments(send(p, type="end"))[0]
    actions = p.segment_failed(seg.id, SynthesisFailed())
    assert messages(actions)[0]["code"] == "synthesis_failed" and messages(actions)[0]["context_id"] == "default"
    assert actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0) and p.state is SessionState.OPEN


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
def test_malformed_message_answers_error_and_closes_1008(p, data, code):
    actions = p.receive_text(data)
    assert [m["code"] for m in messages(actions)] == [code]
    assert actions[-2:] == [RequestRejected(code), Close(1008, code)]
    assert p.state is SessionState.CLOSED
    with pytest.raises(RuntimeError, match="after the session closed"):
        send(p, type="flush")


def test_binary_message_closes_1008(p):
    actions = p.receive_bytes(b"\x01\x02")
    assert messages(actions)[0]["code"] == "binary_not_supported"
    assert actions[-1] == Close(1008, "binary_not_supported")


def test_malformed_message_stops_open_contexts(p):
    seg = segments(send(p, type="text", text="Hi.") + send(p, type="flush"))[0]
    actions = p.receive_text("{")
    assert kinds(actions) == ["error", "StopSynthesis", "StreamClosed", "Close"]
    assert actions[2] == StreamClosed("default", Outcome.ERROR, 0.0) and actions[1] == StopSynthesis(seg)


@pytest.mark.parametrize("extra, code", [
    ({"voice": "nobody"}, "unknown_voice"),
    ({"speed": 0.1}, "invalid_speed"),
    ({"speed": 4.5}, "invalid_speed"),
])  # fmt: skip
def test_bad_parameters_refuse_the_context_but_keep_the_socket(p, extra, code):
    actions = send(p, type="text", text="Hi.", context_id="c", **extra)
    assert messages(actions) == [
        {"type": "error", "code": code, "message": messages(actions)[0]["message"], "context_id": "c"}
    ]
    assert actions[-1] == RequestRejected(code)
    assert p.state is SessionState.OPEN and p.open_contexts == 0


def test_voice_and_speed_are_fixed_by_the_first_text(p):
    send(p, type="text", text="a", speed=1.5)
    assert send(p, type="text", text="b", speed=1.5) == []
    actions = send(p, type="text", text="c", voice="other")
    assert [m["code"] for m in messages(actions)] == ["context_conflict"]
    assert p.open_contexts == 1  # the context goes on without "c"
    assert segments(send(p, type="flush"))[0].text == "ab"


def test_max_wait_is_fixed_by_the_first_text(p):
    send(p, type="text", text="a", max_wait_ms=1000)
    assert send(p, type="text", text="b", max_wait_ms=1000) == [] and send(p, type="text", text="c") == []
    actions = send(p, type="text", text="d", max_wait_ms=500)
    assert [m["code"] for m in messages(actions)] == ["context_conflict"]
    assert segments(send(p, type="flush"))[0].text == "abc"


def test_text_after_end_is_refused(p):
    send(p, type="text", text="a")
    send(p, type="end")
    assert [m["code"] for m in messages(send(p, type="text", text="b"))] == ["context_conflict"]


def test_blank_text_then_end_is_empty_input(p):
    send(p, type="text", text="   ")
    actions = send(p, type="end")
    assert [m["code"] for m in messages(actions)] == ["empty_input"]
    assert actions[-1] == StreamClosed("default", Outcome.ERROR, 0.0)


def test_end_without_text_is_an_error(p):
    actions = send(p, type="end")
    assert [m["code"] for m in messages(actions)] == ["empty_input"]
    assert actions[-1] == RequestRejected("empty_input")


def test_server_fault_closes_1011(p):
    seg = segments(send(p, type="text", text="Hi.") + send(p, type="flush"))[0]
    actions = p.server_fault(ServerFault())
    assert kinds(actions) == ["error", "StopSynthesis", "StreamClosed", "Close"]
    assert messages(actions)[0]["code"] == "internal_error" and "context_id" not in messages(actions)[0]
    assert actions[1] == StopSynthesis(seg) and actions[-1] == Close(1011, "internal_error")


# --- time: idle timeout, keepalive, underruns ---------------------------------------------------------


def test_idle_socket_closes_1000_and_keepalive_resets_the_clock(p, clock):
    assert p.next_deadline() == clock.now + 10
    clock.now += 9
    assert send(p, type="keepalive") == []
    assert p.next_deadline() == clock.now + 10
    clock.now += 9.99
    assert p.on_timer() == []
    clock.now += 0.01
    assert p.on_timer() == [Close(1000, "idle_timeout")] and p.state is SessionState.CLOSED


def test_no_idle_timeout_while_synthesizing(p, clock):
    seg = segments(send(p, type="text", text="Long one.") + send(p, type="flush"))[0]
    assert p.next_deadline() is None
    clock.now += 60
    assert p.on_timer() == []
    p.audio(seg.id, pcm(1))
    p.segment_done(seg.id)
    assert p.next_deadline() == clock.now + 10  # counted from the end of the work
    clock.now += 10
    assert kinds(p.on_timer()) == ["StreamClosed", "Close"]  # the open context counts as disconnected


def test_late_audio_is_an_underrun_but_a_slow_client_is_not(p, clock):
    a = segments(send(p, type="text", text="First part") + send(p, type="flush"))[0]
    assert Underrun("default") not in p.audio(a.id, pcm(100))  # plays until now + 0.1
    clock.now += 0.05
    assert Underrun("default") not in p.audio(a.id, pcm(100))  # plays until now + 0.15
    clock.now += 0.2
    assert Underrun("default") in p.audio(a.id, pcm(100))  # 50 ms of silence
    p.segment_done(a.id)
    clock.now += 1.0  # the client sends its next text after the audio ran out
    b = segments(send(p, type="text", text="second part") + send(p, type="flush"))[0]
    clock.now += 0.1
    assert Underrun("default") not in p.audio(b.id, pcm(100))


# --- server events --------------------------------------------------------------------------------------


def test_connection_lost_stops_everything(p):
    seg = segments(send(p, type="text", text="Hi.") + send(p, type="flush"))[0]
    assert p.connection_lost() == [StopSynthesis(seg), StreamClosed("default", Outcome.DISCONNECTED, 0.0)]
    assert p.state is SessionState.CLOSED and p.connection_lost() == []
    assert p.segment_done(seg.id) == []


def test_drain_lets_open_contexts_finish_then_closes(p):
    send(p, type="text", text="Hi.")
    seg = segments(send(p, type="end"))[0]
    assert p.begin_drain() == []
    actions = send(p, type="text", text="New.", context_id="new")
    assert [m["code"] for m in messages(actions)] == ["shutting_down"]
    assert kinds(p.segment_done(seg.id)) == ["done", "StreamClosed", "Close"]
    assert p.state is SessionState.CLOSED


def test_drain_without_contexts_closes_at_once(p):
    assert p.begin_drain() == [Close(1001, "server shutting down")]


def test_cancel_all_stops_every_context_and_closes(p):
    seg = segments(send(p, type="text", text="Hi.") + send(p, type="flush"))[0]
    actions = p.cancel_all()
    assert actions[0] == StopSynthesis(seg)
    assert messages(actions)[0]["code"] == "shutting_down"
    assert actions[-2:] == [StreamClosed("default", Outcome.CANCELLED, 0.0), Close(1001, "server shutting down")]


# --- the context state machine fails loudly ---------------------------------------------------------------


def test_illegal_context_transitions_name_the_states():
    ids = iter(range(100))
    ctx = ContextStream("c", DEFAULT, 1.0, ContextConfig(RATE), lambda: next(ids))
    (start,) = ctx.flush(0.0) if False else ctx.text("Hello there. Next", 0.0)
    seg = start.segment
    ctx.segment_done(seg.id, 0.0)
    with pytest.raises(RuntimeError, match="segment 0 is not running"):
        ctx.segment_done(seg.id, 0.0)
    ctx.end(0.0)
    with pytest.raises(RuntimeError, match="expects state OPEN, it is ENDING"):
        ctx.text("more", 0.0)


def test_audio_frame_layout():
    frame = encode_audio_frame("ctx-é", b"\x10\x00\x20\x00")
    assert frame[0] == 0x01 and frame[1] == len("ctx-é".encode()) == 6
    assert frame[2:8] == "ctx-é".encode() and frame[8:] == b"\x10\x00\x20\x00"
    assert decode_audio_frame(frame) == ("ctx-é", b"\x10\x00\x20\x00")


def test_the_sans_io_core_imports_no_server_machinery():
    """The core (protocol, context, actions, messages) loads without Prometheus or Starlette."""
    import subprocess
    import sys

    code = (
        "import sys, uttera_server.ws.protocol, uttera_server.ws.context, uttera_server.ws.actions; "
        "print(sorted(m for m in ('prometheus_client', 'starlette', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
