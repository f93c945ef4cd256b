"""The speech-stream session as a pure state machine: messages, synthesis events and time in, actions out.

`SpeechSessionProtocol` does no I/O and reads time only from the clock it is given. `endpoint.py`
feeds it client messages (`receive_text`, `receive_bytes`, `connection_lost`), synthesis events
(`audio`, `words`, `segment_done`, `segment_failed`), timer expiries (`on_timer`, due at
`next_deadline()`) and server events (`begin_drain`, `cancel_all`, `server_fault`), and executes the
returned actions (actions.py) in order. docs/protocol.md specifies what the client sees.

A context (context.py) is one audio stream, opened by its first `text`; many run at once on one
socket, independently. The session owns what spans contexts: routing synthesis events by segment id,
the limits, the idle timeout, draining and closing.

Errors: a malformed message (bad JSON, wrong shape, unknown type, binary) is answered with `error` and
closes the socket with 1008. A bad request inside well-formed JSON (unknown voice, too much text, ...)
is answered with `error` carrying the `context_id`; when it concerns an open context, that context ends
and the socket stays open. A server fault answers `error` and closes with 1011.
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from enum import Enum, auto

from . import messages as wire
from ..errors import (
    WS_POLICY_VIOLATION,
    BinaryNotSupported,
    ContextConflict,
    EmptyInput,
    InputTooLong,
    InvalidRequest,
    MalformedRequest,
    ShuttingDown,
    TooManyContexts,
    UtteraError,
)
from ..outcome import Outcome
from ..speech_params import AudioFormat, check_speed, parse_format, resolve_voice
from ..synthesis import DEFAULT_VOICE, VoiceInfo
from .text_chunker import ChunkerConfig
from ..synthesis.word_clock import WordTiming
from .actions import (
    Action,
    ClientCancelled,
    Close,
    RequestRejected,
    SendMessage,
    StartSynthesis,
    StopSynthesis,
    StreamClosed,
    StreamOpened,
)
from .context import ContextConfig, ContextState, ContextStream

WS_NORMAL_CLOSURE = 1000  # RFC 6455: the idle timeout closes a socket that has nothing to do
WS_GOING_AWAY = 1001  # RFC 6455: the server is shutting down
WS_INTERNAL_ERROR = 1011  # RFC 6455: the server hit a fault it cannot recover the session from
MAX_CONTEXT_WAIT_MS = 30_000.0  # the longest chunker wait a context may ask for (`max_wait_ms`)
IDLE_CLOSE_REASON = "idle_timeout"
SHUTDOWN_CLOSE_REASON = "server shutting down"


class SessionState(Enum):
    OPEN = auto()  # accepting contexts
    DRAINING = auto()  # server shutting down: open contexts finish, new ones are refused
    CLOSED = auto()  # Close emitted or connection lost: no more input


@dataclass(frozen=True, slots=True)
class SessionLimits:
    sample_rate: int  # Hz of the PCM the synthesizer yields
    voices: Mapping[str, VoiceInfo]  # every accepted `voice` string -> its voice (speech_params.Catalog)
    max_buffered_chars: int  # text of one context received but not yet synthesized, in characters
    max_contexts: int  # contexts open at once on one socket
    idle_timeout_s: float = 60.0  # close after this long without a client message while nothing is synthesized
    chunking: ChunkerConfig = field(default_factory=ChunkerConfig)
    pipeline_depth: int = 2  # segments of one context synthesized at once
    max_held_bytes: int = 1 << 20  # audio one segment may buffer while an earlier one still streams

    def __post_init__(self) -> None:
        if self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be positive, got {self.idle_timeout_s}")
        if self.max_buffered_chars < 1 or self.max_contexts < 1:
            raise ValueError("max_buffered_chars and max_contexts must be >= 1")


class SpeechSessionProtocol:
    def __init__(self, limits: SessionLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self.state = SessionState.OPEN
        self._context_config = ContextConfig(limits.sample_rate, limits.chunking, limits.pipeline_depth)
        self._contexts: dict[str, ContextStream] = {}
        self._segments: dict[int, ContextStream] = {}  # running segment id -> its context
        self._next_segment = 0
        self._last_activity = clock()

    @property
    def open_contexts(self) -> int:
        return len(self._contexts)

    def segment_live(self, segment_id: int) -> bool:
        return segment_id in self._segments

    def lead_s(self, segment_id: int) -> float:
        """Audio the segment's context has sent and the client has not played yet, in seconds."""
        ctx = self._segments.get(segment_id)
        return 0.0 if ctx is None else ctx.lead_s(self.clock())

    def holds_too_much(self, segment_id: int) -> bool:
        """True while a pipelined segment holds more audio than allowed: its producer should wait."""
        ctx = self._segments.get(segment_id)
        return ctx is not None and ctx.holds_too_much(segment_id, self.limits.max_held_bytes)

    # --- client input ---------------------------------------------------------------------------

    def receive_text(self, data: str) -> list[Action]:
        self._expect_input()
        self._last_activity = self.clock()
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
            case wire.MessageType.KEEPALIVE:
                return []  # resetting the idle clock (above) is all it does

    def receive_bytes(self, data: bytes) -> list[Action]:
        self._expect_input()
        return self._fatal(BinaryNotSupported())

    def connection_lost(self) -> list[Action]:
        if self.state is SessionState.CLOSED and not self._contexts:
            return []
        actions = self._end_all(Outcome.DISCONNECTED)
        self.state = SessionState.CLOSED
        return actions

    # --- synthesis events -----------------------------------------------------------------------

    def audio(self, segment_id: int, pcm: bytes) -> list[Action]:
        """PCM s16le of a running segment; stale segments (cancelled, failed) give nothing."""
        ctx = self._segments.get(segment_id)
        return [] if ctx is None else ctx.audio(segment_id, pcm, self.clock())

    def words(self, segment_id: int, words: list[WordTiming]) -> list[Action]:
        """Word timings of a running segment, times relative to the segment's own audio."""
        ctx = self._segments.get(segment_id)
        return [] if ctx is None else ctx.words(segment_id, words)

    def segment_done(self, segment_id: int) -> list[Action]:
        ctx = self._segments.pop(segment_id, None)
        if ctx is None:
            return []
        now = self._last_activity = self.clock()  # the idle clock starts when the work ends
        return self._after(ctx, ctx.segment_done(segment_id, now))

    def segment_failed(self, segment_id: int, error: UtteraError) -> list[Action]:
        ctx = self._segments.get(segment_id)
        if ctx is None:
            return []
        self._last_activity = self.clock()
        return self._end(ctx, Outcome.ERROR, wire.error(error, ctx.id))

    # --- time -----------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """Clock time at which `on_timer` must run next (max waits of buffered text, the idle timeout)."""
        if self.state is SessionState.CLOSED:
            return None
        deadlines = [d for ctx in self._contexts.values() if (d := ctx.deadline()) is not None]
        if not self._segments:  # nothing being synthesized: the socket may be idle
            deadlines.append(self._last_activity + self.limits.idle_timeout_s)
        return min(deadlines, default=None)

    def on_timer(self) -> list[Action]:
        if self.state is SessionState.CLOSED:
            return []
        now = self.clock()
        if not self._segments and now >= self._last_activity + self.limits.idle_timeout_s:
            ended = self._end_all(Outcome.DISCONNECTED)
            return ended + self._close(WS_NORMAL_CLOSURE, IDLE_CLOSE_REASON)
        actions: list[Action] = []
        for ctx in list(self._contexts.values()):
            actions += self._after(ctx, ctx.tick(now))
        return actions

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
        return actions + self._close(WS_GOING_AWAY, SHUTDOWN_CLOSE_REASON)

    def server_fault(self, error: UtteraError) -> list[Action]:
        """An unexpected failure of the session machinery: tell the client, stop everything, close 1011."""
        if self.state is SessionState.CLOSED:
            return self._end_all(Outcome.ERROR)
        actions = [SendMessage(wire.error(error))] + self._end_all(Outcome.ERROR)
        return actions + self._close(WS_INTERNAL_ERROR, error.code)

    # --- message handlers -----------------------------------------------------------------------

    def _on_text(self, msg: wire.ClientMessage) -> list[Action]:
        actions: list[Action] = []
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            try:
                ctx = self._open(msg)
            except UtteraError as e:
                return [SendMessage(wire.error(e, msg.context_id)), RequestRejected(e.code)]
            actions += [
                StreamOpened(ctx.id),
                SendMessage(wire.started(ctx.id, ctx.encoder.sample_rate, ctx.format_name)),
            ]
        else:
            problem = self._conflict(ctx, msg)
            if problem is not None:
                return [SendMessage(wire.error(ContextConflict(problem), ctx.id))]
        buffered = ctx.unspoken_chars + len(msg.text)
        if buffered > self.limits.max_buffered_chars:
            too_long = InputTooLong(
                f"context {ctx.id!r} would hold {buffered} characters of text not yet spoken; the limit is "
                f"{self.limits.max_buffered_chars}: send text no faster than it is spoken, or split it "
                f"into several contexts"
            )
            return actions + self._end(ctx, Outcome.ERROR, wire.error(too_long, ctx.id))
        return actions + self._after(ctx, ctx.text(msg.text, self.clock()))

    def _on_flush(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            return [SendMessage(wire.flushed(msg.context_id))]  # nothing buffered: done at once
        return self._after(ctx, ctx.flush(self.clock()))

    def _on_end(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            e = EmptyInput(f"nothing to synthesize in context {msg.context_id!r}: send text before end")
            return [SendMessage(wire.error(e, msg.context_id)), RequestRejected(e.code)]
        if ctx.state is ContextState.ENDING:
            return []
        actions = ctx.end(self.clock())
        if not ctx.any_segment:
            e = EmptyInput(f"context {ctx.id!r} received only blank text: nothing to synthesize")
            return self._end(ctx, Outcome.ERROR, wire.error(e, ctx.id))
        return self._after(ctx, actions)

    def _on_cancel(self, msg: wire.ClientMessage) -> list[Action]:
        ctx = self._contexts.get(msg.context_id)
        if ctx is None:
            return [SendMessage(wire.cancelled(msg.context_id))]  # idempotent
        return [ClientCancelled(ctx.id)] + self._end(ctx, Outcome.CANCELLED, wire.cancelled(ctx.id))

    # --- helpers --------------------------------------------------------------------------------

    def _expect_input(self) -> None:
        if self.state is SessionState.CLOSED:
            raise RuntimeError("SpeechSessionProtocol: client input after the session closed")

    def _open(self, msg: wire.ClientMessage) -> ContextStream:
        if self.state is SessionState.DRAINING:
            raise ShuttingDown()
        if len(self._contexts) >= self.limits.max_contexts:
            raise TooManyContexts(
                f"{len(self._contexts)} contexts are open, the limit per socket: end or cancel one first"
            )
        voice = resolve_voice(DEFAULT_VOICE if msg.voice is None else msg.voice, self.limits.voices)
        speed = 1.0 if msg.speed is None else msg.speed
        check_speed(speed)
        fmt = AudioFormat.PCM if msg.format is None else parse_format(msg.format, param="format")
        config = self._context_config
        if msg.max_wait_ms is not None:
            if not 0 < msg.max_wait_ms <= MAX_CONTEXT_WAIT_MS:
                raise InvalidRequest(
                    f"max_wait_ms must be a number of milliseconds in (0, {MAX_CONTEXT_WAIT_MS:.0f}], "
                    f"got {msg.max_wait_ms:g}",
                    param="max_wait_ms",
                )
            config = replace(config, chunking=replace(config.chunking, max_wait_ms=msg.max_wait_ms))
        ctx = ContextStream(msg.context_id, voice, speed, config, self._new_segment_id, fmt)
        self._contexts[ctx.id] = ctx
        return ctx

    def _new_segment_id(self) -> int:
        self._next_segment += 1
        return self._next_segment - 1

    def _conflict(self, ctx: ContextStream, msg: wire.ClientMessage) -> str | None:
        if ctx.state is ContextState.ENDING:
            return f"context {ctx.id!r} is ending: wait for its done message before sending text to it"
        if (
            (msg.voice is not None and self.limits.voices.get(msg.voice) != ctx.voice)
            or (msg.speed is not None and msg.speed != ctx.speed)
            or (msg.format is not None and msg.format != ctx.audio_format.value)
            or (msg.max_wait_ms is not None and msg.max_wait_ms != ctx.config.chunking.max_wait_ms)
        ):
            return (
                f"voice, speed, format and max_wait_ms of context {ctx.id!r} are set by its first text message "
                f"and cannot change"
            )
        return None

    def _after(self, ctx: ContextStream, actions: list[Action]) -> list[Action]:
        """Route the segments `ctx` started; retire it once it finished (it emitted `done`)."""
        for action in actions:
            if isinstance(action, StartSynthesis):
                self._segments[action.segment.id] = ctx
        if ctx.state is ContextState.FINISHED:
            del self._contexts[ctx.id]
            actions.append(StreamClosed(ctx.id, Outcome.OK, ctx.audio_s))
            if self.state is SessionState.DRAINING:
                actions += self._close_if_drained()
        return actions

    def _end(
        self, ctx: ContextStream, outcome: Outcome, notice: dict[str, Any] | None = None, *, may_close: bool = True
    ) -> list[Action]:
        """Remove `ctx`: stop its synthesis (which drops its queued audio), then send `notice`, then count
        it; while draining, close the socket after the last context unless `may_close` is False."""
        actions: list[Action] = list(ctx.stop())
        for action in actions:
            if isinstance(action, StopSynthesis):
                self._segments.pop(action.segment.id, None)
        if notice is not None:
            actions.append(SendMessage(notice))
        del self._contexts[ctx.id]
        actions.append(StreamClosed(ctx.id, outcome, ctx.audio_s))
        if may_close and self.state is SessionState.DRAINING:
            actions += self._close_if_drained()
        return actions

    def _end_all(self, outcome: Outcome) -> list[Action]:
        actions: list[Action] = []
        for ctx in list(self._contexts.values()):
            actions += self._end(ctx, outcome, may_close=False)
        return actions

    def _fatal(self, e: MalformedRequest) -> list[Action]:
        actions: list[Action] = [SendMessage(wire.error(e))]
        actions += self._end_all(Outcome.ERROR) if self._contexts else [RequestRejected(e.code)]
        return actions + self._close(WS_POLICY_VIOLATION, e.code)

    def _close_if_drained(self) -> list[Action]:
        if self._contexts:
            return []
        return self._close(WS_GOING_AWAY, SHUTDOWN_CLOSE_REASON)

    def _close(self, code: int, reason: str) -> list[Action]:
        if self.state is SessionState.CLOSED:
            return []
        self.state = SessionState.CLOSED
        return [Close(code, reason)]
