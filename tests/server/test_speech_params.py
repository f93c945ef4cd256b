"""Parsing and validation of the POST /v1/audio/speech body."""

import json

import pytest

from uttera_server import errors as e
from uttera_server.speech_params import (
    AudioFormat,
    Catalog,
    SpeechParams,
    StreamFormat,
    parse_speech_query,
    parse_speech_request,
)
from uttera_server.synthesis import VoiceInfo

VOICE = VoiceInfo("default", "test", "en-US", "", True, 22050)
CATALOG = Catalog(model_ids=frozenset({"uttera", "uttera-x"}), voices={"default": VOICE}, max_input_chars=20)


def parse(**body) -> SpeechParams:
    return parse_speech_request(json.dumps(body).encode(), CATALOG)


def test_defaults_and_unknown_fields():
    assert parse(model="uttera", input="Hi", instructions="ignored") == SpeechParams("Hi")
    p = parse(model="uttera-x", input="Hi", voice="default", response_format="pcm", speed=2)
    assert p == SpeechParams("Hi", "default", 2.0, AudioFormat.PCM) and isinstance(p.speed, float)
    assert parse(model="uttera", input="Hi", speed=None).speed == 1.0  # null = absent


@pytest.mark.parametrize("body, cls, param", [
    ({"input": "Hi"}, e.MissingField, "model"),
    ({"model": "uttera"}, e.MissingField, "input"),
    ({"model": "uttera", "input": 3}, e.InvalidType, "input"),
    ({"model": 1, "input": "Hi"}, e.InvalidType, "model"),
    ({"model": "uttera", "input": "Hi", "voice": ["default"]}, e.InvalidType, "voice"),
    ({"model": "uttera", "input": "Hi", "speed": "1"}, e.InvalidType, "speed"),
    ({"model": "uttera", "input": "Hi", "speed": True}, e.InvalidType, "speed"),
    ({"model": "tts-1", "input": "Hi"}, e.UnknownModel, "model"),
    ({"model": "uttera", "input": ""}, e.EmptyInput, "input"),
    ({"model": "uttera", "input": " \n\t"}, e.EmptyInput, "input"),
    ({"model": "uttera", "input": "x" * 21}, e.InputTooLong, "input"),
    ({"model": "uttera", "input": "Hi", "voice": "alloy"}, e.UnknownVoice, "voice"),
    ({"model": "uttera", "input": "Hi", "response_format": "ogg"}, e.UnsupportedFormat, "response_format"),
    ({"model": "uttera", "input": "Hi", "stream_format": "jsonl"}, e.UnsupportedFormat, "stream_format"),
    ({"model": "uttera", "input": "Hi", "speed": 0.24}, e.InvalidSpeed, "speed"),
    ({"model": "uttera", "input": "Hi", "speed": 4.01}, e.InvalidSpeed, "speed"),
])  # fmt: skip
def test_bad_bodies(body, cls, param):
    with pytest.raises(cls) as info:
        parse(**body)
    assert type(info.value) is cls and info.value.param == param


def test_unsupported_format_names_the_supported_ones():
    with pytest.raises(e.UnsupportedFormat, match="supported now: wav, pcm, mp3, opus, flac, aac, mulaw"):
        parse(model="uttera", input="Hi", response_format="vorbis")


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_every_format_and_sse(fmt):
    p = parse(model="uttera", input="Hi", response_format=fmt.value, stream_format="sse")
    assert (p.response_format, p.stream_format) == (fmt, StreamFormat.SSE)


def test_query_parameters():
    q = parse_speech_query({"input": "Hi", "speed": "1.5", "response_format": "mp3"}, CATALOG)
    assert q == SpeechParams("Hi", speed=1.5, response_format=AudioFormat.MP3)
    with pytest.raises(e.InvalidType) as info:
        parse_speech_query({"input": "Hi", "speed": "fast"}, CATALOG)
    assert info.value.param == "speed"
    with pytest.raises(e.UnknownModel):
        parse_speech_query({"input": "Hi", "model": "tts-1"}, CATALOG)


@pytest.mark.parametrize("body", [b"{", b"[]", b'"text"', b"\xff\xfe", b""])
def test_not_a_json_object(body):
    with pytest.raises(e.InvalidJSON):
        parse_speech_request(body, CATALOG)


def test_nan_speed_is_out_of_range():
    with pytest.raises(e.InvalidSpeed):
        parse_speech_request(b'{"model": "uttera", "input": "Hi", "speed": NaN}', CATALOG)
