"""How a request ended: the `outcome` label of the request metrics (metrics.py), reported by the HTTP
handler and by the WebSocket core, which imports this module and not Prometheus."""

from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"  # by the client (WebSocket cancel) or by server shutdown
    DISCONNECTED = "disconnected"  # the client went away mid-stream
