"""Streams in flight and the drain/cancel steps of graceful shutdown.

A stream is one HTTP speech response or one WebSocket context. Owners (an HTTP response, a WebSocket
session) register here so that shutdown can ask them to finish (`begin_drain`) and, after the timeout,
to stop (`cancel`).
"""

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)


class StreamOwner(Protocol):
    async def begin_drain(self) -> None:
        """Finish what is in flight, start nothing new."""

    async def cancel(self) -> None:
        """Stop now: abort synthesis, tell the client, close."""


class ActiveStreams:
    """`count` feeds the active-streams gauge; shutdown waits for the owners, which leave once their
    client has been told everything (a WebSocket session leaves after its close handshake)."""

    def __init__(self) -> None:
        self._count = 0
        self._owners: set[StreamOwner] = set()
        self._no_owners = asyncio.Event()
        self._no_owners.set()
        self.accepting = True  # False once shutdown has begun: new streams are refused with 503

    @property
    def count(self) -> int:
        return self._count

    def opened(self) -> None:
        self._count += 1

    def closed(self) -> None:
        if self._count <= 0:
            raise RuntimeError("ActiveStreams.closed() without a matching opened()")
        self._count -= 1

    def add_owner(self, owner: StreamOwner) -> None:
        self._owners.add(owner)
        self._no_owners.clear()

    def remove_owner(self, owner: StreamOwner) -> None:
        self._owners.discard(owner)
        if not self._owners:
            self._no_owners.set()

    async def drain(self, timeout_s: float) -> bool:
        """Stop accepting, ask every owner to finish, wait up to `timeout_s`; True if all finished."""
        self.accepting = False
        for owner in list(self._owners):
            await owner.begin_drain()
        return await self._wait_owners(timeout_s)

    async def cancel_all(self, timeout_s: float) -> bool:
        """Cancel every owner's streams and wait up to `timeout_s` for the owners to finish."""
        for owner in list(self._owners):
            await owner.cancel()
        if await self._wait_owners(timeout_s):
            return True
        log.error("%d stream owner(s) still running after cancel", len(self._owners))
        return False

    async def _wait_owners(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self._no_owners.wait()
            return True
        except TimeoutError:
            return False
