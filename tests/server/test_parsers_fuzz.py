"""Fuzzing, in bounded time, of the two parsers that take raw client input: the WebSocket message parser
(and the session past it) and the HTTP speech body parser. Whatever the input, the answer is a parsed value or a typed client
error (`InvalidRequest`: HTTP 4xx, WebSocket `error`/1008), never another exception (which would be a
500 / 1011). Examples are derandomized by the `reproducible` profile (tests/conftest.py)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uttera_server.errors import InvalidRequest
from uttera_server.speech_params import Catalog, SpeechParams, parse_speech_request
from uttera_server.synthesis import VoiceInfo
from uttera_server.ws.messages import ClientMessage, parse_client_message
from uttera_server.ws.protocol import SessionLimits, SessionState, SpeechSessionProtocol

VOICES = {"default": VoiceInfo("default", "test", "en-US", "", True, 22050)}
CATALOG = Catalog(model_ids=frozenset({"uttera"}), voices=VOICES, max_input_chars=100)
LIMITS = SessionLimits(sample_rate=22050, voices=VOICES, max_buffered_chars=100, max_contexts=2, idle_timeout_s=10.0)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.floats(),
    st.just(float("inf")),
    st.just(float("nan")),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=30))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "type",
        "text",
        "context_id",
        "voice",
        "speed",
        "format",
        "max_wait_ms",
        "model",
        "input",
        "response_format",
        "stream_format",
        "x",
    ]
)
objects = st.dictionaries(
    field_names,
    st.one_of(
        values,
        st.sampled_from(["text", "flush", "end", "cancel", "keepalive", "uttera", "default", "wav", "pcm", "audio"]),
    ),
    max_size=6,
)


def _dumps(obj) -> str:
    try:
        return json.dumps(obj)  # allow_nan: Infinity and NaN are what some clients send
    except ValueError:  # an int over the 4,300-digit limit cannot be written either
        return '{"speed": ' + "9" * 5000 + "}"


@FUZZ
@given(st.one_of(objects.map(_dumps), st.text(max_size=200)))
def test_websocket_messages_parse_or_fail_typed(data):
    try:
        assert isinstance(parse_client_message(data), ClientMessage)
    except InvalidRequest:
        pass


@FUZZ
@given(st.lists(objects.map(_dumps), min_size=1, max_size=4))
def test_websocket_sessions_answer_any_messages_with_actions(messages):
    """Past the parser: the session's own checks (voice, speed, format, max_wait_ms, limits) answer with
    actions (an `error` message at worst), never an exception."""
    session = SpeechSessionProtocol(LIMITS, lambda: 100.0)
    for data in messages:
        if session.state is SessionState.CLOSED:
            break
        assert isinstance(session.receive_text(data), list)


@FUZZ
@given(st.one_of(objects.map(lambda o: _dumps(o).encode()), st.binary(max_size=200)))
def test_speech_bodies_parse_or_fail_typed(body):
    try:
        assert isinstance(parse_speech_request(body, CATALOG), SpeechParams)
    except InvalidRequest:
        pass
