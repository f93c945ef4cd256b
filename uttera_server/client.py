"""An asyncio client of `WebSocket /v1/audio/speech/stream` (docs/protocol.md), for voice agents and tests.

    async with await SpeechStreamClient.connect("ws://127.0.0.1:8000/v1/audio/speech/stream") as client:
        reply = client.context("reply-1", speed=1.1)
        for token in llm_tokens:
            await reply.send_text(token)
        await reply.end()
        async for event in reply.events():      # Started, Audio, Timestamps, Flushed, ..., then Done
            if isinstance(event, Audio):
                play(event.pcm)                   # PCM s16le mono, at the rate `Started` gives

One reader task routes every server message to its context's queue, so contexts are independent: each
handle's `events()` yields that context's events in order and stops after its final one (`Done`,
`Cancelled`, `ContextError`, or `Closed` when the socket closes first).
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .synthesis.word_clock import WordTiming
from .ws.messages import DEFAULT_CONTEXT, decode_audio_frame


@dataclass(frozen=True, slots=True)
class Started:
    context_id: str
    sample_rate: int


@dataclass(frozen=True, slots=True)
class Audio:
    context_id: str
    pcm: bytes  # s16le mono
    received_at: float  # time.monotonic() when it arrived


@dataclass(frozen=True, slots=True)
class Timestamps:
    context_id: str
    words: tuple[WordTiming, ...]


@dataclass(frozen=True, slots=True)
class Flushed:
    context_id: str


@dataclass(frozen=True, slots=True)
class Done:
    context_id: str
    audio_ms: int
    characters: int


@dataclass(frozen=True, slots=True)
class Cancelled:
    context_id: str


@dataclass(frozen=True, slots=True)
class ContextError:
    context_id: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Closed:
    """The socket closed before the context finished."""

    code: int | None
    reason: str


ContextEvent = Started | Audio | Timestamps | Flushed | Done | Cancelled | ContextError  # for one context
Event = ContextEvent | Closed
FINAL = (Done, Cancelled, ContextError, Closed)


@dataclass(slots=True)
class ContextResult:
    """Everything one context produced, from `ContextHandle.collect()`."""

    events: list[Event]
    pcm: bytes
    final: Event  # Done, Cancelled, ContextError or Closed

    @property
    def words(self) -> list[WordTiming]:
        return [w for e in self.events if isinstance(e, Timestamps) for w in e.words]

    @property
    def sample_rate(self) -> int | None:
        return next((e.sample_rate for e in self.events if isinstance(e, Started)), None)


class SpeechStreamClient:
    def __init__(self, ws: ClientConnection):
        self.ws = ws
        self.errors: list[dict[str, Any]] = []  # error messages without a context_id (the socket closes after them)
        self.close_code: int | None = None
        self.close_reason = ""
        self._queues: dict[str, asyncio.Queue[Event]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url: str, *, idle_timeout_s: float | None = None, **kwargs: Any) -> "SpeechStreamClient":
        """Open the socket; `idle_timeout_s` asks the server for a shorter idle timeout than its own;
        `kwargs` go to `websockets.asyncio.client.connect` (e.g. `max_size`, `open_timeout`)."""
        if idle_timeout_s is not None:
            url += ("&" if "?" in url else "?") + f"idle_timeout_s={idle_timeout_s:g}"
        return cls(await connect(url, **kwargs))

    async def __aenter__(self) -> "SpeechStreamClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def context(
        self,
        context_id: str = DEFAULT_CONTEXT,
        *,
        voice: str | None = None,
        speed: float | None = None,
        max_wait_ms: float | None = None,
    ) -> "ContextHandle":
        """A handle on one context; it opens on the server with its first `send_text`. `max_wait_ms`: how
        long its text may wait for a sentence or clause boundary (None: the server's `--ws-max-wait-ms`)."""
        return ContextHandle(self, context_id, voice, speed, max_wait_ms)

    async def send(self, **message: object) -> None:
        await self.ws.send(json.dumps(message))

    async def keepalive(self) -> None:
        """Reset the server's idle timer."""
        await self.send(type="keepalive")

    async def wait_closed(self) -> tuple[int | None, str]:
        """Wait until the server closes the socket; (close code, reason)."""
        await asyncio.shield(self._reader)
        return self.close_code, self.close_reason

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait({self._reader})

    def queue(self, context_id: str) -> asyncio.Queue[Event]:
        """The events of `context_id`, in arrival order."""
        q = self._queues.get(context_id)
        if q is None:
            q = self._queues[context_id] = asyncio.Queue()
            if self._reader.done():
                q.put_nowait(Closed(self.close_code, self.close_reason))
        return q

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    context_id, pcm = decode_audio_frame(message)
                    self.queue(context_id).put_nowait(Audio(context_id, pcm, time.monotonic()))
                    continue
                msg = json.loads(message)
                event = _event(msg)
                if event is None:
                    self.errors.append(msg)
                else:
                    self.queue(event.context_id).put_nowait(event)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.close_reason = self.ws.close_reason or ""
            for q in self._queues.values():
                q.put_nowait(Closed(self.close_code, self.close_reason))


def _event(msg: dict[str, Any]) -> ContextEvent | None:
    """The event of a context's message; None for one without a context (an error of the socket)."""
    cid = msg.get("context_id")
    if not isinstance(cid, str):
        return None
    match msg.get("type"):
        case "started":
            return Started(cid, msg["sample_rate"])
        case "timestamps":
            return Timestamps(cid, tuple(WordTiming(**w) for w in msg["words"]))
        case "flushed":
            return Flushed(cid)
        case "done":
            return Done(cid, msg["audio_ms"], msg["usage"]["characters"])
        case "cancelled":
            return Cancelled(cid)
        case "error":
            return ContextError(cid, msg["code"], msg["message"])
    return None


@dataclass(slots=True)
class ContextHandle:
    client: SpeechStreamClient
    id: str
    voice: str | None = None
    speed: float | None = None
    max_wait_ms: float | None = None

    async def send_text(self, text: str) -> None:
        message: dict[str, object] = {"type": "text", "context_id": self.id, "text": text}
        if self.voice is not None:
            message["voice"] = self.voice
        if self.speed is not None:
            message["speed"] = self.speed
        if self.max_wait_ms is not None:
            message["max_wait_ms"] = self.max_wait_ms
        await self.client.send(**message)

    async def flush(self) -> None:
        """Synthesize what is buffered now; a `Flushed` event follows its last audio."""
        await self.client.send(type="flush", context_id=self.id)

    async def end(self) -> None:
        """No more text: `Done` follows the last audio."""
        await self.client.send(type="end", context_id=self.id)

    async def cancel(self) -> None:
        """Stop now: `Cancelled` follows, and no audio of this context after it."""
        await self.client.send(type="cancel", context_id=self.id)

    async def next_event(self, timeout: float | None = None) -> Event:
        """The context's next event (raises `TimeoutError` after `timeout` seconds)."""
        async with asyncio.timeout(timeout):
            event: Event = await self.client.queue(self.id).get()
        return event

    async def events(self, timeout: float | None = None) -> AsyncIterator[Event]:
        """Events until (and including) the final one; `timeout` bounds the wait for each."""
        while True:
            event = await self.next_event(timeout)
            yield event
            if isinstance(event, FINAL):
                return

    async def collect(self, timeout: float | None = None) -> ContextResult:
        events = [e async for e in self.events(timeout)]
        pcm = b"".join(e.pcm for e in events if isinstance(e, Audio))
        return ContextResult(events, pcm, events[-1])
