"""`WebSocket /v1/audio/speech/stream`: runs `SpeechSessionProtocol` over a Starlette WebSocket.

Tasks per socket: this endpoint's task reads client messages; a timer task calls the protocol when
its next deadline (max wait of buffered text, idle timeout) passes; one producer task per running
segment pulls the synthesizer iterator; one writer task sends what the `Outbox` holds, so the socket
has a single writer. All of them feed the protocol object and run the actions it returns, in order
and without yielding in between (`_apply` is synchronous), so no other task can slip a frame between a
`StopSynthesis` and the `cancelled` after it. Backpressure is taken before pulling more audio: a
producer waits for the outbox to drain below its watermark, or, for a pipelined segment, until the
segments before it have sent their audio.
"""

import asyncio
import itertools
import json
import logging
import time
from typing import assert_never

from starlette.websockets import WebSocket, WebSocketDisconnect

from .. import logs
from ..app_state import AppState
from ..errors import (
    WS_POLICY_VIOLATION,
    EmptyInput,
    EngineNotReady,
    MalformedRequest,
    ServerFault,
    UtteraError,
    as_uttera_error,
)
from ..metrics import Transport
from ..outcome import Outcome
from .outbox import Outbox, OutboxClosed, Outgoing
from ..synthesis import WordTimings
from .text_chunker import ChunkerConfig
from ..audio.wav import duration_s, pcm_bytes
from .actions import (
    Action,
    ClientCancelled,
    Close,
    RequestRejected,
    Segment,
    SendAudio,
    SendMessage,
    StartSynthesis,
    StopSynthesis,
    StreamClosed,
    StreamOpened,
    Underrun,
)
from .messages import error, parse_idle_timeout
from .protocol import SessionLimits, SessionState, SpeechSessionProtocol

log = logging.getLogger(__name__)

WS_TRY_AGAIN_LATER = 1013
CLOSE_WAIT_S = 10.0  # how long the writer may take to deliver what is queued once the session ends
MAX_SEGMENT_CHARS = 300  # longest text chunk: ordinary English stays under the model's prompt limit
_session_ids = itertools.count()


async def speech_stream(websocket: WebSocket) -> None:
    await SpeechStreamSession(websocket, websocket.app.state.uttera).run()


def session_limits(state: AppState, idle_timeout_s: float) -> SessionLimits:
    c = state.config
    max_chars = min(MAX_SEGMENT_CHARS, state.catalog.max_input_chars)
    return SessionLimits(
        sample_rate=state.synth.sample_rate,
        voices=state.catalog.voices,
        max_buffered_chars=c.ws_buffer_chars,
        max_contexts=c.ws_max_contexts,
        idle_timeout_s=idle_timeout_s,
        chunking=ChunkerConfig(
            max_wait_ms=c.ws_max_wait_ms, min_chunk_chars=min(c.ws_min_chunk_chars, max_chars), max_chars=max_chars
        ),
        max_held_bytes=c.ws_outbox_high_bytes,
        # Paced (--max-lead-s), a context's next segment starts when the one before has all its audio,
        # which pacing keeps up to max_lead_s ahead of playback: time enough for its first sentence. Started
        # earlier, it would begin with no audio ahead of it (deadline now), competing with every new
        # stream's first sentence; on 2 CPU cores that doubled TTFA and underran (benchmarks/RESULTS.md).
        pipeline_depth=1 if c.engine.max_lead_s is not None else 2,
    )


class SpeechStreamSession:
    """One socket; a `StreamOwner` so that shutdown can drain and cancel it."""

    def __init__(self, ws: WebSocket, state: AppState):
        self.ws = ws
        self.state = state
        self.id = next(_session_ids)
        self._proto: SpeechSessionProtocol | None = None
        self.outbox = Outbox(state.config.ws_outbox_high_bytes, state.config.ws_outbox_low_bytes)
        self._producers: dict[int, asyncio.Task[None]] = {}  # segment id -> task
        self._stopped: set[asyncio.Task[None]] = set()  # cancelled producers, awaited at the end
        self._changed = asyncio.Event()  # the protocol's next deadline may have moved
        self._progress = asyncio.Event()  # set (and replaced) when a segment finishes

    @property
    def proto(self) -> SpeechSessionProtocol:
        """The session's protocol, made in `_run` before anything that uses it starts."""
        if self._proto is None:
            raise RuntimeError(f"websocket session {self.id} has not started")
        return self._proto

    async def run(self) -> None:
        metrics = self.state.metrics
        await self.ws.accept()
        metrics.ws_connections.inc()
        try:
            await self._run()
        finally:
            metrics.ws_connections.dec()

    async def _run(self) -> None:
        if not self.state.synth.is_ready():
            await self._refuse(EngineNotReady(), WS_TRY_AGAIN_LATER)
            return
        try:
            idle_s = parse_idle_timeout(dict(self.ws.query_params), self.state.config.ws_idle_timeout_s)
        except MalformedRequest as e:
            await self._refuse(e, WS_POLICY_VIOLATION)
            return
        self._proto = SpeechSessionProtocol(session_limits(self.state, idle_s))
        writer = asyncio.create_task(self._write_loop())
        timer = asyncio.create_task(self._timer_loop())
        self.state.streams.add_owner(self)
        if not self.state.streams.accepting:  # accepted just as shutdown began
            await self.begin_drain()
        try:
            await self._read_loop()
        except Exception:
            self._fault("reading")
        finally:
            self.state.streams.remove_owner(self)
            self._apply(self.proto.connection_lost())  # contexts still open count as disconnected
            timer.cancel()
            for task in list(self._producers.values()):
                task.cancel()
                self._stopped.add(task)
            await asyncio.wait(self._stopped | {timer})
            self.outbox.close()  # the writer sends what is queued (a Close, maybe), then stops
            done, _ = await asyncio.wait({writer}, timeout=CLOSE_WAIT_S)
            if not done:
                writer.cancel()
                await asyncio.wait({writer})

    async def _refuse(self, e: UtteraError, code: int) -> None:
        self.state.metrics.request_finished(Transport.WEBSOCKET, Outcome.ERROR)
        await self.ws.send_text(json.dumps(error(e)))
        await self.ws.close(code, e.code)

    async def begin_drain(self) -> None:
        self._apply(self.proto.begin_drain())

    async def cancel(self) -> None:
        self._apply(self.proto.cancel_all())

    def _closed(self) -> bool:
        return self.proto.state is SessionState.CLOSED

    async def _read_loop(self) -> None:
        while not self._closed():
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            if self._closed():
                return  # closed by another task (idle timeout, fault) while this one waited
            if message.get("text") is not None:
                actions = self.proto.receive_text(message["text"])
            else:
                actions = self.proto.receive_bytes(message.get("bytes") or b"")
            self._apply(actions)

    async def _timer_loop(self) -> None:
        """Call `on_timer` when the protocol's next deadline passes (deadlines move after every `_apply`)."""
        while self.proto.state is not SessionState.CLOSED:
            self._changed.clear()
            deadline = self.proto.next_deadline()
            delay = None if deadline is None else deadline - time.monotonic()
            if delay is None or delay > 0:
                try:  # not asyncio.wait_for: on 3.11 it can swallow a cancel that races the event
                    async with asyncio.timeout(delay):
                        await self._changed.wait()
                except TimeoutError:
                    pass
                continue
            try:
                self._apply(self.proto.on_timer())
            except Exception:
                self._fault("on a timer")
                return
            if self.proto.next_deadline() == deadline:
                self._changed.clear()
                await self._changed.wait()  # nothing moved it: wait for an event rather than spin

    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self.outbox.get()
                if item.close is not None:
                    await self.ws.close(*item.close)
                    return
                if isinstance(item.data, bytes):
                    await self.ws.send_bytes(item.data)
                elif item.data is not None:
                    await self.ws.send_text(item.data)
        except (OutboxClosed, WebSocketDisconnect, OSError):
            pass  # the session ended or the client went away
        except RuntimeError as e:  # Starlette: sending after the socket closed
            log.debug("websocket session %d: %s", self.id, e)
        finally:
            self.outbox.close()

    def _apply(self, actions: list[Action]) -> None:
        """Run the protocol's actions in order; never yields to the event loop."""
        metrics, streams = self.state.metrics, self.state.streams
        for action in actions:
            match action:
                case SendMessage(message=message):
                    self._put(Outgoing(json.dumps(message)))
                case SendAudio(context_id=context_id, frame=frame):
                    try:
                        self.outbox.put_audio(context_id, frame)
                    except OutboxClosed:
                        pass
                case StartSynthesis(segment=segment):
                    self._producers[segment.id] = asyncio.create_task(self._produce(segment))
                case StopSynthesis(segment=segment):
                    task = self._producers.pop(segment.id, None)
                    if task is not None and task is not asyncio.current_task():
                        task.cancel()  # throws into the synthesizer iterator: the engine request is aborted
                        self._stopped.add(task)
                        task.add_done_callback(self._stopped.discard)
                    self.outbox.drop_audio(segment.context_id)
                case StreamOpened():
                    streams.opened()
                case StreamClosed(outcome=outcome, audio_s=audio_s):
                    streams.closed()
                    metrics.request_finished(Transport.WEBSOCKET, outcome, audio_s)
                case RequestRejected():
                    metrics.request_finished(Transport.WEBSOCKET, Outcome.ERROR)
                case Underrun():
                    metrics.stream_underruns.inc()
                case ClientCancelled():
                    metrics.cancellations.inc()
                case Close(code=code, reason=reason):
                    self._put(Outgoing(None, close=(code, reason)))
                case _:
                    assert_never(action)
        self._changed.set()

    def _put(self, item: Outgoing) -> None:
        try:
            self.outbox.put_control(item)
        except OutboxClosed:
            pass

    def _fault(self, where: str) -> None:
        """An unexpected exception in the session machinery: error, stop every context, close 1011."""
        log.exception("websocket session %d failed %s", self.id, where)
        try:
            self._apply(self.proto.server_fault(ServerFault()))
        except Exception:
            log.exception("websocket session %d: could not report the fault", self.id)
            self.outbox.close()

    async def _produce(self, segment: Segment) -> None:
        """Pull one segment's audio and words into the protocol; closing the iterator aborts the engine
        request. Failures of the synthesizer end the context; failures of the session are faults."""
        synth, metrics, proto = self.state.synth, self.state.metrics, self.proto
        started, sent, failure = time.monotonic(), 0, None
        chunks, ttfa_ms = None, None
        logs.context_id.set(segment.context_id)  # this task's log lines name the context (logs.py)
        engine_request_id = f"ws-{logs.request_id.get() or self.id}-{segment.id}"
        try:
            try:
                chunks = synth.stream(
                    segment.text,
                    voice=segment.voice,
                    speed=segment.speed,
                    request_id=engine_request_id,
                    with_timestamps=True,
                    text_offset=segment.text_offset,
                    lead_s=proto.lead_s(segment.id),
                )
            except EmptyInput:
                pass  # nothing speakable in this piece ("--", an emoji): it has no audio
            except Exception as e:
                failure = e
            while chunks is not None and failure is None:
                try:
                    item = await anext(chunks)
                except StopAsyncIteration:
                    break
                except EmptyInput:
                    break  # found by the text frontend, before any audio: as above
                except Exception as e:
                    failure = e
                    break
                if isinstance(item, WordTimings):
                    self._apply(proto.words(segment.id, list(item.words)))
                else:
                    pcm = pcm_bytes(item.pcm)
                    if sent == 0:
                        metrics.first_audio(Transport.WEBSOCKET, time.monotonic() - started)
                        ttfa_ms = round(1000 * (time.monotonic() - started), 1)
                    sent += len(pcm)
                    self._apply(proto.audio(segment.id, pcm))
                await self._may_continue(segment)
            if self._producers.get(segment.id) is asyncio.current_task():
                del self._producers[segment.id]
            if failure is not None:
                if not isinstance(failure, UtteraError):
                    log.error("websocket session %d: segment %d failed", self.id, segment.id, exc_info=failure)
                self._apply(proto.segment_failed(segment.id, as_uttera_error(failure)))
            else:
                metrics.synthesis_completed(time.monotonic() - started, duration_s(sent, synth.sample_rate))
                self._apply(proto.segment_done(segment.id))
                log.info(
                    "segment %d done",
                    segment.id,
                    extra={
                        "engine_request_id": engine_request_id,
                        "ttfa_ms": ttfa_ms,
                        "audio_s": round(duration_s(sent, synth.sample_rate), 3),
                        "duration_ms": round(1000 * (time.monotonic() - started), 1),
                    },
                )
                self._progress.set()
                self._progress = asyncio.Event()
        except OutboxClosed:
            pass  # the writer is gone: the session is ending
        except Exception:
            self._fault(f"in segment {segment.id}")
        finally:
            if chunks is not None:
                await chunks.aclose()

    async def _may_continue(self, segment: Segment) -> None:
        """Backpressure before pulling more: a pipelined segment waits while it holds too much audio, and
        every producer waits while the outbox is above its high watermark."""
        while self.proto.holds_too_much(segment.id):
            await self._progress.wait()
        await self.outbox.wait_writable()
