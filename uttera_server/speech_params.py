"""Per-request speech parameters, parsed and validated without I/O.

Shared by `POST /v1/audio/speech` (one JSON body) and the WebSocket protocol (voice and speed on a
context's first text message), so both transports reject the same input with the same error codes.
"""

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeGuard, TypeVar, overload

from .errors import (
    EmptyInput,
    InputTooLong,
    InvalidJSON,
    InvalidSpeed,
    InvalidType,
    MissingField,
    UnknownModel,
    UnknownVoice,
    UnsupportedFormat,
)
from .synthesis.speed import MAX_SPEED, MIN_SPEED
from .synthesis import DEFAULT_VOICE, SpeechSynthesizer, VoiceInfo
from .synthesis.voices import accepted_voices

MODEL_ALIAS = "uttera"  # always accepted as the name of the served model


class AudioFormat(StrEnum):
    WAV = "wav"  # RIFF header with unknown (0xFFFFFFFF) sizes, then PCM s16le mono
    PCM = "pcm"  # raw PCM s16le mono
    MP3 = "mp3"  # MPEG audio layer III, 64 kbit/s, at the voice's rate
    OPUS = "opus"  # Ogg/Opus, 48 kHz, 20 ms packets, 32 kbit/s
    FLAC = "flac"  # lossless, at the voice's rate
    AAC = "aac"  # AAC-LC in ADTS frames, 64 kbit/s, at the voice's rate
    MULAW = "mulaw"  # raw G.711 mu-law, 8 kHz (telephony)


class StreamFormat(StrEnum):
    AUDIO = "audio"  # the encoded audio itself, chunked
    SSE = "sse"  # server-sent events: `speech.audio.delta` (base64 audio), then `speech.audio.done`


_FORMATS = frozenset(f.value for f in AudioFormat)
SUPPORTED_FORMATS = ", ".join(f.value for f in AudioFormat)
_STREAM_FORMATS = frozenset(f.value for f in StreamFormat)


@dataclass(frozen=True, slots=True)
class Catalog:
    """What the served model accepts."""

    model_ids: frozenset[str]
    voices: Mapping[str, VoiceInfo]  # every accepted `voice` string -> the voice it names
    max_input_chars: int

    @classmethod
    def of(cls, synth: SpeechSynthesizer, max_input_chars: int) -> "Catalog":
        """Accepted by `synth`: its model id and the alias; voices by id, by name, and DEFAULT_VOICE."""
        return cls(
            model_ids=frozenset({synth.model_id, MODEL_ALIAS}),
            voices=accepted_voices(synth.voices),
            max_input_chars=min(max_input_chars, synth.max_input_chars),
        )


@dataclass(frozen=True, slots=True)
class SpeechParams:
    text: str
    voice: str = DEFAULT_VOICE  # as the request names it, checked against `Catalog.voices`
    speed: float = 1.0  # 1.0 = the voice's natural rate
    response_format: AudioFormat = AudioFormat.WAV
    stream_format: StreamFormat = StreamFormat.AUDIO


_ABSENT = object()
_D = TypeVar("_D")  # a field's default when absent
_JSON_TYPES = {
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
}


def _is_str(value: object) -> TypeGuard[str]:
    return isinstance(value, str)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _get(obj: Mapping[str, object], name: str, default: object, ok: Callable[[object], bool], expected: str) -> object:
    value = obj.get(name)
    if value is None:  # null counts as absent
        if default is _ABSENT:
            raise MissingField(f"the field {name!r} is required", param=name)
        return default
    if not ok(value):
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        raise InvalidType(f"the field {name!r} must be {expected}, got {got}", param=name)
    return value


@overload
def get_str(obj: Mapping[str, object], name: str) -> str: ...
@overload
def get_str(obj: Mapping[str, object], name: str, default: _D) -> str | _D: ...
def get_str(obj: Mapping[str, object], name: str, default: object = _ABSENT) -> object:
    """`obj[name]` as a string; `MissingField` when absent and no default, `InvalidType` when not a string."""
    return _get(obj, name, default, _is_str, "a string")


@overload
def get_number(obj: Mapping[str, object], name: str) -> float: ...
@overload
def get_number(obj: Mapping[str, object], name: str, default: _D) -> float | _D: ...
def get_number(obj: Mapping[str, object], name: str, default: object = _ABSENT) -> object:
    """`obj[name]` as a float (JSON numbers only: booleans and numeric strings are refused)."""
    value = _get(obj, name, default, _is_number, "a number")
    if not _is_number(value):
        return value  # the default
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range (~1e308) is the client's mistake, not ours
        raise InvalidType(f"the field {name!r} is out of range", param=name) from None


def loads_json(data: str | bytes, what: str) -> object:
    """`json.loads`, with every parse failure as `InvalidJSON`: besides syntax errors, integers over
    Python's 4,300-digit limit (ValueError) and nesting deeper than the parser's recursion limit."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise InvalidJSON(f"{what} is not valid JSON ({str(e)[:200]}): send a JSON object") from None


# The checks of a request's text, voice and speed, for every way in (HTTP, WebSocket, CLI, and
# `Synthesizer.validate` for callers of the synthesizer itself, hence the type checks).


def check_text(text: str, max_chars: int) -> None:
    if not isinstance(text, str) or not text.strip():
        raise EmptyInput()
    if len(text) > max_chars:
        raise InputTooLong(
            f"input has {len(text)} characters; the limit is {max_chars}: split the text "
            f"(or start the server with a larger --max-input-chars)"
        )


def check_voice(voice: str, voices: Collection[str]) -> None:
    if not isinstance(voice, str) or voice not in voices:
        raise UnknownVoice(f"unknown voice {voice!r}; available: {', '.join(sorted(voices))}")


def resolve_voice(voice: str, voices: Mapping[str, VoiceInfo]) -> VoiceInfo:
    """The voice a request names (`Catalog.voices`), once per request or WebSocket context."""
    check_voice(voice, voices)
    return voices[voice]


def parse_format(value: str, param: str = "response_format") -> AudioFormat:
    """`value` as an `AudioFormat`, or `UnsupportedFormat` naming the supported ones."""
    if value not in _FORMATS:
        raise UnsupportedFormat(f"{param} {value!r} is not supported; supported now: {SUPPORTED_FORMATS}", param=param)
    return AudioFormat(value)


def check_speed(speed: float) -> None:
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not MIN_SPEED <= speed <= MAX_SPEED:
        raise InvalidSpeed(f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}, got {speed!r}")


def parse_speech_request(body: bytes, catalog: Catalog) -> SpeechParams:
    """Parse an OpenAI `POST /v1/audio/speech` body. Unknown fields are ignored, as OpenAI clients
    send fields (`instructions`, ...) this server does not use."""
    obj = loads_json(body, "the body")
    if not isinstance(obj, dict):
        raise InvalidJSON(f"the body must be a JSON object, got {type(obj).__name__}")
    return speech_params_of(obj, catalog)


def parse_speech_query(query: Mapping[str, str], catalog: Catalog) -> SpeechParams:
    """`GET /v1/audio/speech?input=...&voice=...` (for `<audio src>`): the body's fields as query
    parameters, all strings; `model` may be left out, `speed` is a decimal number."""
    obj: dict[str, object] = {"model": MODEL_ALIAS, **query}
    if "speed" in query:
        try:
            obj["speed"] = float(query["speed"])
        except ValueError:
            raise InvalidType(
                f"the query parameter 'speed' must be a number, got {query['speed']!r}", param="speed"
            ) from None
    return speech_params_of(obj, catalog)


def speech_params_of(obj: Mapping[str, object], catalog: Catalog) -> SpeechParams:
    """Validate the fields of an OpenAI speech request (a parsed JSON body or the query)."""
    model = get_str(obj, "model")
    text = get_str(obj, "input")
    voice = get_str(obj, "voice", DEFAULT_VOICE)
    fmt = get_str(obj, "response_format", AudioFormat.WAV.value)
    speed = get_number(obj, "speed", 1.0)
    stream_format = get_str(obj, "stream_format", "audio")

    if model not in catalog.model_ids:
        raise UnknownModel(f"unknown model {model!r}; available: {', '.join(sorted(catalog.model_ids))}")
    check_text(text, catalog.max_input_chars)
    check_voice(voice, catalog.voices)
    if fmt not in _FORMATS:
        raise UnsupportedFormat(f"response_format {fmt!r} is not supported; supported now: {SUPPORTED_FORMATS}")
    if stream_format not in _STREAM_FORMATS:
        raise UnsupportedFormat(
            f"stream_format {stream_format!r} is not supported; use 'audio' (the audio itself, chunked) or "
            f"'sse' (server-sent events with base64 audio)",
            param="stream_format",
        )
    check_speed(speed)
    return SpeechParams(
        text=text, voice=voice, speed=speed, response_format=AudioFormat(fmt), stream_format=StreamFormat(stream_format)
    )
