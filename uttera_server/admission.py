"""Admission control without I/O: whether a new request may start, decided before any engine work.

Two bounds (None = unbounded):
    max_connections  HTTP requests in flight (all but /health and /metrics) + open WebSockets;
    max_waiting      HTTP speech requests admitted that have not started their response (no first audio
                     yet). The engine's own waiting count (`engine_stats().num_waiting`, which also holds
                     WebSocket segments) counts too: the larger of the two is compared with the bound. The
                     engine's count lags a burst (a request reaches the engine after its body is read and
                     its text is split), which is why the server counts its own.
A refused request gets `errors.Overloaded` (429 + Retry-After, or WebSocket close 1013).
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class Refusal(StrEnum):
    CONNECTIONS = "connections"
    WAITING = "waiting"


@dataclass(slots=True)
class Admission:
    max_connections: int | None
    max_waiting: int | None
    engine_waiting: Callable[[], int]  # the engine's waiting requests; may raise before the engine starts
    connections: int = 0
    waiting: int = 0

    def refusal(self, waits_for_engine: bool) -> Refusal | None:
        """Why a new request would be refused now, or None if it may start. `waits_for_engine`: it is
        about to queue for the engine (checked after an HTTP body is read, so slow uploads do not count
        as waiting)."""
        if self.max_connections is not None and self.connections >= self.max_connections:
            return Refusal.CONNECTIONS
        return self.waiting_refusal() if waits_for_engine else None

    def waiting_refusal(self) -> Refusal | None:
        if self.max_waiting is not None and self.queued() >= self.max_waiting:
            return Refusal.WAITING
        return None

    def queued(self) -> int:
        try:
            engine = int(self.engine_waiting())
        except Exception:  # engine not started (or gone): only the server's own count
            engine = 0
        return max(self.waiting, engine)

    def admit(self) -> "Ticket":
        self.connections += 1
        return Ticket(self)


@dataclass(slots=True)
class Ticket:
    """One admitted request: `wait()` when it queues for the engine, `started()` when its response starts,
    `release()` when it ends (the last two idempotent)."""

    admission: Admission
    waiting: bool = False
    released: bool = False

    def wait(self) -> None:
        if not self.waiting:
            self.waiting = True
            self.admission.waiting += 1

    def started(self) -> None:
        if self.waiting:
            self.waiting = False
            self.admission.waiting -= 1

    def release(self) -> None:
        self.started()
        if not self.released:
            self.released = True
            self.admission.connections -= 1
