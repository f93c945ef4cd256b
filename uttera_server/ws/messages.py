"""Wire format of `WebSocket /v1/audio/speech/stream`, without I/O (docs/protocol.md is the reference).

Client -> server, JSON text messages (`context_id` optional, default "default"):
    {"type": "text", "text": str, "context_id"?, "voice"?: str, "speed"?: number, "format"?: str,
     "max_wait_ms"?: number}
    {"type": "flush" | "end" | "cancel", "context_id"?}
    {"type": "keepalive"}
Server -> client:
    {"type": "started", "context_id", "sample_rate", "format": "pcm_s16le" | "wav" | "mp3" | ...}
    binary audio frame: 0x01, n (1 byte), context id (n bytes of UTF-8), the next bytes of the context's
        audio stream in its format (PCM s16le mono by default)
    {"type": "timestamps", "context_id", "words": [{"word", "start_ms", "end_ms", "char_start", "char_end"}]}
    {"type": "flushed", "context_id"}
    {"type": "done", "context_id", "audio_ms", "usage": {"characters", "audio_ms"}}
    {"type": "cancelled", "context_id"}
    {"type": "error", "code", "message", "context_id"?}
"""

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import InvalidJSON, InvalidType, UnknownMessageType, UtteraError
from ..speech_params import get_number, get_str, loads_json
from ..synthesis.word_clock import WordTiming

DEFAULT_CONTEXT = "default"
AUDIO_FRAME = 0x01  # first byte of a binary audio frame
MAX_CONTEXT_ID_BYTES = 255  # its length travels in one byte
PCM_FORMAT = "pcm_s16le"


class MessageType(StrEnum):
    TEXT = "text"
    FLUSH = "flush"
    END = "end"
    CANCEL = "cancel"
    KEEPALIVE = "keepalive"


_MESSAGE_TYPES = frozenset(t.value for t in MessageType)


@dataclass(frozen=True, slots=True)
class ClientMessage:
    type: MessageType
    context_id: str = DEFAULT_CONTEXT
    text: str = ""  # TEXT only
    voice: str | None = None  # TEXT only; None = not given
    speed: float | None = None  # TEXT only; None = not given
    format: str | None = None  # TEXT only; an AudioFormat value; None = not given (pcm)
    max_wait_ms: float | None = None  # TEXT only; the context's chunker wait; None = not given (the server's)


def parse_idle_timeout(query: dict[str, str], server_max_s: float) -> float:
    """The connection's idle timeout: `?idle_timeout_s=` (seconds, at most the server's), else the server's."""
    raw = query.get("idle_timeout_s")
    if raw is None:
        return server_max_s
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= server_max_s:  # also refuses nan
        raise InvalidType(
            f"idle_timeout_s must be a number of seconds in (0, {server_max_s:g}], got {raw!r}", param="idle_timeout_s"
        )
    return value


def parse_client_message(data: str) -> ClientMessage:
    """One client text message -> `ClientMessage`; raises `MalformedRequest` subclasses."""
    obj = loads_json(data, "message")
    if not isinstance(obj, dict):
        raise InvalidJSON(f"each message must be a JSON object, got {type(obj).__name__}")
    kind = get_str(obj, "type")
    if kind not in _MESSAGE_TYPES:
        raise UnknownMessageType(f"unknown message type {kind!r}: use text, flush, end, cancel or keepalive")
    if kind == MessageType.KEEPALIVE:
        return ClientMessage(MessageType.KEEPALIVE)
    context_id = get_str(obj, "context_id", DEFAULT_CONTEXT)
    try:
        n = len(context_id.encode())
    except UnicodeEncodeError:
        n = 0
    if not 1 <= n <= MAX_CONTEXT_ID_BYTES:
        raise InvalidType(f"context_id must be 1 to {MAX_CONTEXT_ID_BYTES} bytes of UTF-8", param="context_id")
    if kind != MessageType.TEXT:
        return ClientMessage(MessageType(kind), context_id)
    return ClientMessage(
        MessageType.TEXT,
        context_id,
        text=get_str(obj, "text"),
        voice=get_str(obj, "voice", None),
        speed=get_number(obj, "speed", None),
        format=get_str(obj, "format", None),
        max_wait_ms=get_number(obj, "max_wait_ms", None),
    )


def encode_audio_frame(context_id: str, pcm: bytes) -> bytes:
    """Binary frame: 0x01, len(context id), context id (UTF-8), PCM s16le mono."""
    cid = context_id.encode()
    return bytes((AUDIO_FRAME, len(cid))) + cid + pcm


def decode_audio_frame(frame: bytes) -> tuple[str, bytes]:
    """Inverse of `encode_audio_frame` (for clients and tests): (context id, PCM bytes)."""
    if len(frame) < 2 or frame[0] != AUDIO_FRAME or len(frame) < 2 + frame[1]:
        raise ValueError("not an audio frame")
    n = frame[1]
    return frame[2 : 2 + n].decode(), frame[2 + n :]


def started(context_id: str, sample_rate: int, fmt: str = PCM_FORMAT) -> dict[str, Any]:
    """`sample_rate`: Hz of the context's audio as encoded (48 kHz for opus, 8 kHz for mulaw)."""
    return {"type": "started", "context_id": context_id, "sample_rate": sample_rate, "format": fmt}


def timestamps(context_id: str, words: list[WordTiming]) -> dict[str, Any]:
    return {"type": "timestamps", "context_id": context_id, "words": [
        {"word": w.word, "start_ms": w.start_ms, "end_ms": w.end_ms, "char_start": w.char_start,
         "char_end": w.char_end} for w in words
    ]}  # fmt: skip


def flushed(context_id: str) -> dict[str, Any]:
    return {"type": "flushed", "context_id": context_id}


def done(context_id: str, audio_ms: int, characters: int) -> dict[str, Any]:
    return {
        "type": "done",
        "context_id": context_id,
        "audio_ms": audio_ms,
        "usage": {"characters": characters, "audio_ms": audio_ms},
    }


def cancelled(context_id: str) -> dict[str, Any]:
    return {"type": "cancelled", "context_id": context_id}


def error(exc: UtteraError, context_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "error", "code": exc.code, "message": exc.message}
    if context_id is not None:
        message["context_id"] = context_id
    return message
