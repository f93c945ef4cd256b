"""`WebSocket /v1/audio/speech/stream`: runs `SpeechSessionProtocol` over a Starlette WebSocket.

Three kinds of task per socket: this endpoint's task reads client messages; one producer task per
segment pulls the synthesizer iterator; one writer task sends what the `Outbox` holds, so the socket has
a single writer and audio waits behind a bounded queue. All of them feed the protocol object and run
the actions it returns, in order.
"""

import asyncio
import itertools
import json
import logging
import time

from starlette.websockets import WebSocket, WebSocketDisconnect

from .app_state import AppState
from .errors import EngineNotReady, UtteraError, as_uttera_error
from .metrics import Outcome, Transport
from .outbox import Outbox, OutboxClosed, Outgoing
from .wav import duration_s, pcm_bytes
from .ws_messages import error
from .ws_protocol import (
    Action,
    Close,
    RequestRejected,
    Segment,
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

log = logging.getLogger(__name__)

WS_TRY_AGAIN_LATER = 1013
CLOSE_WAIT_S = 10.0  # how long the writer may take to deliver what is queued once the session ends
_session_ids = itertools.count()


async def speech_stream(websocket: WebSocket) -> None:
    await SpeechStreamSession(websocket, websocket.app.state.uttera).run()


class SpeechStreamSession:
    """One socket; a `StreamOwner` so that shutdown can drain and cancel it."""

    def __init__(self, ws: WebSocket, state: AppState):
        self.ws = ws
        self.state = state
        self.id = next(_session_ids)
        c = state.config
        self.proto = SpeechSessionProtocol(SessionLimits(
            sample_rate=state.synth.sample_rate,
            voices=state.catalog.voices,
            max_input_chars=state.catalog.max_input_chars,
            max_contexts=c.ws_max_contexts,
        ))  # fmt: skip
        self.outbox = Outbox(c.ws_outbox_high_bytes, c.ws_outbox_low_bytes)
        self._producers: dict[int, asyncio.Task] = {}  # segment id -> task

    async def run(self) -> None:
        await self.ws.accept()
        if not self.state.synth.is_ready():
            self.state.metrics.request_finished(Transport.WEBSOCKET, Outcome.ERROR)
            await self.ws.send_text(json.dumps(error(EngineNotReady())))
            await self.ws.close(WS_TRY_AGAIN_LATER, EngineNotReady.code)
            return
        writer = asyncio.create_task(self._write_loop())
        self.state.streams.add_owner(self)
        if not self.state.streams.accepting:  # accepted just as shutdown began
            await self.begin_drain()
        try:
            await self._read_loop()
        except Exception:
            log.exception("websocket session %d failed", self.id)
        finally:
            self.state.streams.remove_owner(self)
            await self._apply(self.proto.connection_lost())  # contexts still open count as disconnected
            for task in list(self._producers.values()):
                await self._cancel(task)
            self.outbox.close()  # the writer sends what is queued (a Close, maybe), then stops
            done, _ = await asyncio.wait({writer}, timeout=CLOSE_WAIT_S)
            if not done:
                writer.cancel()
                await asyncio.wait({writer})

    async def begin_drain(self) -> None:
        await self._apply(self.proto.begin_drain())

    async def cancel(self) -> None:
        await self._apply(self.proto.cancel_all())

    async def _read_loop(self) -> None:
        while self.proto.state is not SessionState.CLOSED:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                actions = self.proto.receive_text(message["text"])
            else:
                actions = self.proto.receive_bytes(message.get("bytes") or b"")
            await self._apply(actions)

    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self.outbox.get()
                if item.close is not None:
                    await self.ws.close(*item.close)
                    return
                if isinstance(item.data, bytes):
                    await self.ws.send_bytes(item.data)
                else:
                    await self.ws.send_text(item.data)
        except (OutboxClosed, WebSocketDisconnect, OSError):
            pass  # the session ended or the client went away
        except RuntimeError as e:  # Starlette: sending after the socket closed
            log.debug("websocket session %d: %s", self.id, e)
        finally:
            self.outbox.close()

    async def _apply(self, actions: list[Action]) -> None:
        metrics, streams = self.state.metrics, self.state.streams
        for action in actions:
            match action:
                case SendMessage(message=message):
                    self._put_control(Outgoing(json.dumps(message)))
                case SendAudio(context_id=context_id, frame=frame):
                    try:
                        await self.outbox.put_audio(context_id, frame)
                    except OutboxClosed:
                        pass
                case StartSynthesis(segment=segment):
                    self._producers[segment.id] = asyncio.create_task(self._produce(segment))
                case StopSynthesis(segment=segment):
                    task = self._producers.pop(segment.id, None)
                    if task is not None:
                        await self._cancel(task)
                    self.outbox.drop_audio(segment.context_id)
                case StreamOpened():
                    streams.opened()
                case StreamClosed(outcome=outcome, audio_s=audio_s):
                    streams.closed()
                    metrics.request_finished(Transport.WEBSOCKET, outcome, audio_s)
                case RequestRejected():
                    metrics.request_finished(Transport.WEBSOCKET, Outcome.ERROR)
                case Close(code=code, reason=reason):
                    self._put_control(Outgoing(None, close=(code, reason)))

    def _put_control(self, item: Outgoing) -> None:
        try:
            self.outbox.put_control(item)
        except OutboxClosed:
            pass

    @staticmethod
    async def _cancel(task: asyncio.Task) -> None:
        if task is asyncio.current_task():
            return  # a producer ending its own segment
        task.cancel()
        await asyncio.wait({task})

    async def _produce(self, segment: Segment) -> None:
        """Pull one segment's audio into the protocol; closing the iterator aborts the engine request."""
        synth, metrics = self.state.synth, self.state.metrics
        started, sent = time.monotonic(), 0
        chunks = None
        try:
            chunks = synth.stream(segment.text, voice=segment.voice, speed=segment.speed,
                                  request_id=f"ws-{self.id}-{segment.id}")
            async for chunk in chunks:
                pcm = pcm_bytes(chunk.pcm)
                if sent == 0:
                    metrics.first_audio(Transport.WEBSOCKET, time.monotonic() - started)
                sent += len(pcm)
                await self._apply(self.proto.audio(segment.id, pcm))
        except Exception as e:
            if not isinstance(e, UtteraError):
                log.exception("websocket session %d: segment %d failed", self.id, segment.id)
            actions = self.proto.segment_failed(segment.id, as_uttera_error(e))
        else:
            metrics.synthesis_completed(time.monotonic() - started, duration_s(sent, synth.sample_rate))
            actions = self.proto.segment_done(segment.id)
        finally:
            if chunks is not None:
                await chunks.aclose()
        if self._producers.get(segment.id) is asyncio.current_task():
            del self._producers[segment.id]
        await self._apply(actions)
