"""Frames waiting for one WebSocket's writer task, with audio bounded by byte watermarks.

Audio producers check `wait_writable()` before they pull more audio: it waits while more than `high`
bytes of audio are queued, until the writer brings it down to `low` (a client that stops reading pauses
its own synthesis instead of growing server memory). `put_audio` itself never waits, so the session can
run the protocol's actions in order without yielding between them.
Control messages never wait: they are few and small, and a `cancelled` or `error` must not be stuck
behind audio of a client that stopped reading.
"""

import asyncio
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outgoing:
    data: str | bytes | None  # text or binary message; None with `close`
    context_id: str | None = None  # set on audio frames, so a cancel can drop them
    close: tuple[int, str] | None = None  # (code, reason): close the socket after what is before it

    @property
    def audio_bytes(self) -> int:
        """Bytes this item counts against the audio watermarks (audio frames only)."""
        return len(self.data) if self.context_id is not None and self.data is not None else 0


class OutboxClosed(Exception):
    """The writer is gone: nothing more can be sent."""


class Outbox:
    def __init__(self, high_bytes: int, low_bytes: int):
        if not 0 < low_bytes <= high_bytes:
            raise ValueError(f"need 0 < low_bytes <= high_bytes, got {low_bytes}, {high_bytes}")
        self.high = high_bytes
        self.low = low_bytes
        self._items: deque[Outgoing] = deque()
        self._audio_bytes = 0
        self._nonempty = asyncio.Event()
        self._resume = asyncio.Event()  # set while producers may add audio
        self._resume.set()
        self._closed = False

    @property
    def audio_bytes(self) -> int:
        return self._audio_bytes

    def put_control(self, item: Outgoing) -> None:
        self._check_open()
        self._items.append(item)
        self._nonempty.set()

    async def wait_writable(self) -> None:
        """Return once queued audio is at most `high` bytes (after having been above it: at most `low`);
        raises `OutboxClosed` once the writer is gone."""
        while not self._resume.is_set():
            await self._resume.wait()
        self._check_open()

    def put_audio(self, context_id: str, frame: bytes) -> None:
        """Queue an audio frame now (producers call `wait_writable` before making more)."""
        self._check_open()
        self._items.append(Outgoing(frame, context_id))
        self._audio_bytes += len(frame)
        if self._audio_bytes > self.high:
            self._resume.clear()
        self._nonempty.set()

    async def get(self) -> Outgoing:
        while not self._items:
            self._check_open()
            self._nonempty.clear()
            await self._nonempty.wait()
        item = self._items.popleft()
        if item.context_id is not None:
            self._audio_bytes -= item.audio_bytes
            self._maybe_resume()
        return item

    def drop_audio(self, context_id: str) -> int:
        """Remove the queued audio frames of `context_id`; returns how many were dropped."""
        kept = deque(i for i in self._items if i.context_id != context_id)
        dropped = len(self._items) - len(kept)
        self._items = kept
        self._audio_bytes = sum(i.audio_bytes for i in kept)
        self._maybe_resume()
        return dropped

    def close(self) -> None:
        """The writer has stopped: wake everyone; further puts raise `OutboxClosed`."""
        self._closed = True
        self._resume.set()
        self._nonempty.set()

    def _maybe_resume(self) -> None:
        if self._audio_bytes <= self.low:
            self._resume.set()

    def _check_open(self) -> None:
        if self._closed:
            raise OutboxClosed()
