"""What the WebSocket session protocol asks its I/O layer to do, in order (see protocol.py).

Segments and actions are plain values, so the protocol is tested by comparing lists of them.
"""

from dataclasses import dataclass
from typing import Any

from ..outcome import Outcome
from ..synthesis import VoiceInfo


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of one context's text that the synthesizer turns into audio in one synthesis (one
    `Synthesizer.stream` call): one or more utterances."""

    id: int  # unique within the session
    context_id: str
    text: str
    voice: VoiceInfo  # resolved once, by its context
    speed: float
    text_offset: int = 0  # where `text` starts in the context's whole text (for word timestamps)
    since: float = 0.0  # clock time its oldest character arrived (to tell underruns from a slow client)


@dataclass(frozen=True, slots=True)
class SendMessage:
    message: dict[str, Any]  # a JSON text message


@dataclass(frozen=True, slots=True)
class SendAudio:
    context_id: str
    frame: bytes  # encoded binary frame; queued audio of a context is dropped by StopSynthesis


@dataclass(frozen=True, slots=True)
class StartSynthesis:
    segment: Segment  # synthesize with word timestamps; report with audio / words / segment_done


@dataclass(frozen=True, slots=True)
class StopSynthesis:
    segment: Segment  # abort it (close the synthesizer iterator) and drop its context's queued audio


@dataclass(frozen=True, slots=True)
class StreamOpened:
    context_id: str


@dataclass(frozen=True, slots=True)
class StreamClosed:
    context_id: str
    outcome: Outcome
    audio_s: float


@dataclass(frozen=True, slots=True)
class RequestRejected:
    """A request refused before any context opened (counts as an error request)."""

    code: str


@dataclass(frozen=True, slots=True)
class Underrun:
    """Audio of a context arrived after what was sent before it would have finished playing."""

    context_id: str


@dataclass(frozen=True, slots=True)
class ClientCancelled:
    """The client cancelled an open context (a barge-in)."""

    context_id: str


@dataclass(frozen=True, slots=True)
class Close:
    code: int
    reason: str


Action = (
    SendMessage
    | SendAudio
    | StartSynthesis
    | StopSynthesis
    | StreamOpened
    | StreamClosed
    | RequestRejected
    | Underrun
    | ClientCancelled
    | Close
)
