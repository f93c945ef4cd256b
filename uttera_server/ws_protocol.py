"""The speech-stream session as a pure state machine: messages and synthesis events in, actions out.

`SpeechSessionProtocol` does no I/O. `ws_stream.py` feeds it client messages (`receive_text`,
`receive_bytes`, `connection_lost`), synthesis events (`audio`, `segment_done`, `segment_failed`) and
server events (`begin_drain`, `cancel_all`), and executes the returned actions in order.

A context is one utterance stream: its first `text` opens it (`started`), text accumulates, `flush`
cuts the buffer into a `Segment` for the synthesizer, `end` flushes and answers `done` after the last
audio, `cancel` stops it at once. Segments of a context are synthesized one after another, in order.
Later work (incremental segmentation, pipelined segments, word timestamps) changes how segments are cut
from `_Context.parts` and what `audio` emits, not the actions.

Errors: a malformed message (bad JSON, wrong shape, unknown type, binary) is answered with `error` and
closes the socket with 1008. A bad request inside well-formed JSON (unknown voice, input too long, ...)
is answered with `error` carrying the `context_id`; when it concerns an open context, that context ends.
"""

from collections import deque
from dataclasses import dataclass, field
from enum import Enum, auto

from . import ws_messages as wire
from .errors import (
    WS_POLICY_VIOLATION,
    BinaryNotSupported,
    ContextConflict,
    EmptyInput,
    InputTooLong,
    MalformedRequest,
    ShuttingDown,
    TooManyContexts,
    UtteraError,
)
from .metrics import Outcome
from .speech_params import DEFAULT_VOICE, check_speed, check_voice
from .wav import duration_s

WS_GOING_AWAY = 1001  # RFC 6455: the server is shutting down


class SessionState(Enum):
    OPEN = auto()  # accepting contexts
    DRAINING = auto()  # server shutting down: open contexts finish, new ones are refused
    CLOSED = auto()  # Close emitted or connection lost: no more input


class ContextState(Enum):
    OPEN = auto()  # accepting text
    ENDING = auto()  # `end` received: synthesizing what is left, then `done`


@dataclass(frozen=True, slots=True)
class SessionLimits:
    sample_rate: int  # Hz of the PCM the synthesizer yields
    voices: frozenset[str]
    max_input_chars: int  # per segment (the text between two flushes)
    max_contexts: int


@dataclass(frozen=True, slots=True)
class Segment:
    """Text the synthesizer turns into one audio stream."""

    id: int  # unique within the session
    context_id: str
    text: str
    voice: str
    speed: float


# Actions, executed in order by the I/O layer.
@dataclass(frozen=True, slots=True)
class SendMessage:
    message: dict  # a JSON text message


@dataclass(frozen=True, slots=True)
class SendAudio:
    context_id: str
    frame: bytes  # encoded binary frame; queued audio of a context is dropped by StopSynthesis


@dataclass(frozen=True, slots=True)
class StartSynthesis:
    segment: Segment


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
class Close:
    code: int
    reason: str


Action = (
    SendMessage | SendAudio | StartSynthesis | StopSynthesis | StreamOpened | StreamClosed | RequestRejected | Close
)


@dataclass(slots=True)
class _Context:
    id: str
    voice: str
    speed: float
    state: ContextState = ContextState.OPEN
    parts: list[str] = field(default_factory=list)  # text since the last flush
    n_chars: int = 0  # sum of len(parts)
    pending: deque[Segment] = field(default_factory=deque)
    active: Segment | None = None
    any_segment: bool = False  # some non-blank text was flushed
    audio_bytes: int = 0


class SpeechSessionProtocol:
    def __init__(self, limits: SessionLimits):
        self.limits = limits
        self.state = SessionState.OPEN
        self._contexts: dict[str, _Context] = {}
        self._active: dict[int, _Context] = {}  # segment id -> its context, while synthesizing
        self._next_segment = 0

    @property
    def open_contexts(self) -> int:
        return len(self._contexts)

    # --- client input ---------------------------------------------------------------------------

    def receive_text(self, data: str) -> list[Action]:
        self._expect_input()
        try:
            msg = wire.parse_client_message(data)
        except MalformedRequest as e:
            return self._fatal(e)
        match msg.type:
            case wire.MessageType.TEXT:
                return self._on_text(msg)
            case wire.MessageType.FLUSH:
                return self._on_flush(msg)
            case wire.MessageType.END:
                return self._on_end(msg)
            case wire.MessageType.CANCEL:
                return self._on_cancel(msg)

    def receive_bytes(self, data: bytes) -> list[Action]:
        self._expect_input()
        return self._fatal(BinaryNotSupported())

    def connection_lost(self) -> list[Action]:
        if self.state is SessionState.CLOSED:
            return []
        actions = self._close_all(Outcome.DISCONNECTED)
        self.state = SessionState.CLOSED
        return actions

    # --- synthesis events -----------------------------------------------------------------------

    def audio(self, segment_id: int, pcm: bytes) -> list[Action]:
        """PCM s16le of an active segment -> one audio frame; stale segments (cancelled) give nothing."""
        ctx = self._active.get(segment_id)
        if ctx is None:
            return []
        ctx.audio_bytes += len(pcm)
        return [SendAudio(ctx.id, wire.encode_audio_frame(ctx.id, pcm))]

    def segment_done(self, segment_id: int) -> list[Action]:
        ctx = self._active.pop(segment_id, None)
        if ctx is None:
            return []
        ctx.active = None
        return self._advance(ctx)

    def segment_failed(self, segment_id: int, error: UtteraError) -> list[Action]:
        ctx = self._active.pop(segment_id, None)
        if ctx is None:
            return []
        ctx.active = None
        return self._end(ctx, Outcome.ERROR, wire.error(error, ctx.id))

    # --- server events --------------------------------------------------------------------------

    def begin_drain(self) -> list[Action]:
        """Shutdown step 1: refuse new contexts; close the socket once the open ones are done."""
        if self.state is not SessionState.OPEN:
            return []
        self.state = SessionState.DRAINING
        return self._close_if_drained()

    def cancel_all(self) -> list[Action]:
        """Shutdown step 2: stop every context now and close the socket."""
        if self.state is SessionState.CLOSED:
            return []
        actions: list[Action] = []
        for ctx in list(self._contexts.values()):
            actions += self._end(ctx, Outcome.CANCELLED, wire.error(ShuttingDown(), ctx.id), may_close=False)
        return actions + self._close(WS_GOING_AWAY, "server shutting down")

    # --- message handlers -----------------------------------------------------------------------

    def _on_text(self, msg: wire.ClientMessage) -> list[Action]:
        actions: list[Action] = []
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            try:
                ctx = self._open(msg)
            except UtteraError as e:
                return [SendMessage(wire.error(e, msg.context_id)), RequestRejected(e.code)]
            actions += [StreamOpened(ctx.id), SendMessage(wire.started(ctx.id, self.limits.sample_rate))]
        else:
            problem = self._conflict(ctx, msg)
            if problem is not None:
                return [SendMessage(wire.error(ContextConflict(problem), ctx.id))]
        ctx.parts.append(msg.text)
        ctx.n_chars += len(msg.text)
        if ctx.n_chars > self.limits.max_input_chars:
            e = InputTooLong(
                f"context {ctx.id!r} has {ctx.n_chars} characters since its last flush; the limit is "
                f"{self.limits.max_input_chars}: flush more often"
            )
            return actions + self._end(ctx, Outcome.ERROR, wire.error(e, ctx.id))
        return actions

    def _on_flush(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None or ctx.state is ContextState.ENDING:
            return []  # nothing buffered
        self._cut_segment(ctx)
        return self._advance(ctx)

    def _on_end(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            e = EmptyInput(f"nothing to synthesize in context {msg.context_id!r}: send text before end")
            return [SendMessage(wire.error(e, msg.context_id)), RequestRejected(e.code)]
        if ctx.state is ContextState.ENDING:
            return []
        ctx.state = ContextState.ENDING
        self._cut_segment(ctx)
        if not ctx.any_segment:
            e = EmptyInput(f"context {ctx.id!r} received only blank text: nothing to synthesize")
            return self._end(ctx, Outcome.ERROR, wire.error(e, ctx.id))
        return self._advance(ctx)

    def _on_cancel(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            return [SendMessage(wire.cancelled(msg.context_id))]  # idempotent
        return self._end(ctx, Outcome.CANCELLED, wire.cancelled(ctx.id))

    # --- helpers --------------------------------------------------------------------------------

    def _expect_input(self) -> None:
        if self.state is SessionState.CLOSED:
            raise RuntimeError("SpeechSessionProtocol: client input after the session closed")

    def _open(self, msg: wire.ClientMessage) -> _Context:
        if self.state is SessionState.DRAINING:
            raise ShuttingDown()
        if len(self._contexts) >= self.limits.max_contexts:
            raise TooManyContexts(
                f"{len(self._contexts)} contexts are open, the limit per socket: end or cancel one first"
            )
        voice = DEFAULT_VOICE if msg.voice is None else msg.voice
        speed = 1.0 if msg.speed is None else msg.speed
        check_voice(voice, self.limits.voices)
        check_speed(speed)
        ctx = _Context(msg.context_id, voice, speed)
        self._contexts[ctx.id] = ctx
        return ctx

    @staticmethod
    def _conflict(ctx: _Context, msg: wire.ClientMessage) -> str | None:
        if ctx.state is ContextState.ENDING:
            return f"context {ctx.id!r} is ending: wait for its done message before sending text to it"
        if (msg.voice is not None and msg.voice != ctx.voice) or (msg.speed is not None and msg.speed != ctx.speed):
            return f"voice and speed of context {ctx.id!r} are set by its first text message and cannot change"
        return None

    def _cut_segment(self, ctx: _Context) -> None:
        text = "".join(ctx.parts)
        ctx.parts.clear()
        ctx.n_chars = 0
        if text.strip():
            seg = Segment(self._next_segment, ctx.id, text, ctx.voice, ctx.speed)
            self._next_segment += 1
            ctx.pending.append(seg)
            ctx.any_segment = True

    def _advance(self, ctx: _Context) -> list[Action]:
        """Start the next segment of `ctx`, or finish an ending context that has nothing left."""
        if ctx.active is not None:
            return []
        if ctx.pending:
            ctx.active = ctx.pending.popleft()
            self._active[ctx.active.id] = ctx
            return [StartSynthesis(ctx.active)]
        if ctx.state is ContextState.ENDING:
            audio_ms = round(1000 * duration_s(ctx.audio_bytes, self.limits.sample_rate))
            return self._end(ctx, Outcome.OK, wire.done(ctx.id, audio_ms))
        return []

    def _end(self, ctx: _Context, outcome: Outcome, notice: dict | None = None, *, may_close: bool = True
             ) -> list[Action]:
        """Remove `ctx`: stop its synthesis (which drops its queued audio), then send `notice`, then count
        it; while draining, close the socket after the last context unless `may_close` is False."""
        actions: list[Action] = []
        if ctx.active is not None:
            self._active.pop(ctx.active.id, None)
            actions.append(StopSynthesis(ctx.active))
            ctx.active = None
        if notice is not None:
            actions.append(SendMessage(notice))
        ctx.pending.clear()
        del self._contexts[ctx.id]
        actions.append(StreamClosed(ctx.id, outcome, duration_s(ctx.audio_bytes, self.limits.sample_rate)))
        if may_close and self.state is SessionState.DRAINING:
            actions += self._close_if_drained()
        return actions

    def _close_all(self, outcome: Outcome) -> list[Action]:
        actions: list[Action] = []
        for ctx in list(self._contexts.values()):
            actions += self._end(ctx, outcome, may_close=False)
        return actions

    def _fatal(self, e: MalformedRequest) -> list[Action]:
        actions: list[Action] = [SendMessage(wire.error(e))]
        actions += self._close_all(Outcome.ERROR) if self._contexts else [RequestRejected(e.code)]
        return actions + self._close(WS_POLICY_VIOLATION, e.code)

    def _close_if_drained(self) -> list[Action]:
        if self._contexts:
            return []
        return self._close(WS_GOING_AWAY, "server shutting down")

    def _close(self, code: int, reason: str) -> list[Action]:
        if self.state is SessionState.CLOSED:
            return []
        self.state = SessionState.CLOSED
        return [Close(code, reason)]
