"""Logging setup: `--log-format text|json`, request ids, and the context they travel in.

JSON lines (one object per line, on stderr) carry:

    time        ISO 8601 UTC with milliseconds, e.g. "2026-12-03T08:11:10.023Z"
    level       INFO, WARNING, ...
    logger      the logger's name (uttera_server.http.speech, uvicorn.access, vllm.v1.engine...)
    message     the formatted message
    request_id  the request's id (HTTP request or WebSocket connection), when there is one
    context_id  the WebSocket context, when there is one
    transport   "http" or "websocket", when inside a request
    ...         any `extra=` fields of the call (durations: ttfa_ms, duration_ms, audio_s; outcome;
                engine_request_id), and `exc_info` as one string

The request id comes from the client's `x-request-id` header when it is valid (1 to 128 characters of
[A-Za-z0-9._:-]), else it is generated; `RequestIdMiddleware` puts it in a context variable for
everything the request runs (tasks copy the context when they are created) and returns it in the
response's (or the WebSocket handshake's) `x-request-id` header. The engine request ids start with it
(`http-<request id>-...`, `ws-<request id>-<segment>-...`), so one stream is traced from the client to
the engine.

In JSON mode vLLM's own loggers, in this process and in the engine processes it spawns, log through
the same formatter (`VLLM_LOGGING_CONFIG_PATH`, unless the operator set it). Output that bypasses
Python logging in those processes (C++ warnings, progress bars) stays as it is.
"""

import atexit
import contextvars
import json
import logging
import logging.config
import os
import re
import sys
import tempfile
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .config import LOG_FORMATS

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
context_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("context_id", default=None)
transport: contextvars.ContextVar[str | None] = contextvars.ContextVar("transport", default=None)

# Attributes every LogRecord has (plus vLLM's record factory's): anything else came from `extra=`.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "fileinfo",
    "color_message",  # uvicorn's ANSI-coloured copy of the message
}


def new_request_id() -> str:
    return uuid.uuid4().hex


def request_id_from(header: str | None) -> str:
    """The client's `x-request-id` if it is 1-128 characters of [A-Za-z0-9._:-], else a new id."""
    if header is not None and _REQUEST_ID.fullmatch(header):
        return header
    return new_request_id()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (tracebacks included, newlines escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, var in (("request_id", request_id), ("context_id", context_id), ("transport", transport)):
            value = getattr(record, key, None) or var.get()
            if value is not None:
                out[key] = value
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def _formatter(log_format: str) -> dict[str, str]:
    if log_format == "json":
        return {"()": f"{__name__}.JsonFormatter"}
    return {"format": TEXT_FORMAT}


def setup_logging(level: str, log_format: str) -> None:
    """Configure the root logger (stderr) once, in `main()`; `level` is a `--log-level` value."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.DEBUG if level == "trace" else level.upper(), handlers=[handler])
    if log_format == "json":
        logging.captureWarnings(True)  # Python warnings of this process become JSON lines too
        _route_vllm_logs_to_json(logging.getLevelName(logging.getLogger().level))


# uttera's code that also runs in the engine's processes (the engine patches, the in-engine vocoder among
# them): there, only the loggers named in VLLM_LOGGING_CONFIG_PATH's config are set up; the rest printed
# bare text (Python's last-resort handler) into the JSON lines.
ENGINE_SIDE_LOGGERS = ("engine_patches",)


def _route_vllm_logs_to_json(level: str = "INFO") -> None:
    """vLLM configures its loggers (here and in its engine processes) from VLLM_LOGGING_CONFIG_PATH when
    it is imported; point it at a config using `JsonFormatter` on stderr, for vLLM's loggers and uttera's
    engine-side ones (at `level`, the server's). Must run before vLLM's import."""
    if os.environ.get("VLLM_LOGGING_CONFIG_PATH") or os.environ.get("VLLM_CONFIGURE_LOGGING") == "0":
        return  # the operator's own choice
    ours = {"handlers": ["json"], "level": level, "propagate": False}
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": _formatter("json")},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {
            "vllm": {"handlers": ["json"], "level": os.environ.get("VLLM_LOGGING_LEVEL", "INFO"), "propagate": False},
            **{name: ours for name in ENGINE_SIDE_LOGGERS},
        },
    }
    fd, path = tempfile.mkstemp(prefix="uttera-vllm-logging-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = path  # inherited by the engine processes

    def remove() -> None:
        if os.path.exists(path):
            os.unlink(path)

    atexit.register(remove)


def uvicorn_log_config(log_format: str) -> dict[str, Any]:
    """uvicorn's `log_config`: its own default for text, its loggers through `JsonFormatter` for json."""
    import uvicorn.config

    if log_format == "text":
        return uvicorn.config.LOGGING_CONFIG
    loggers = ("uvicorn", "uvicorn.error", "uvicorn.access")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": _formatter("json")},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {name: {"handlers": ["json"], "level": "INFO", "propagate": False} for name in loggers},
    }


class RequestIdMiddleware:
    """ASGI middleware: sets `request_id` and `transport` for each HTTP request and WebSocket connection
    and returns the id in the `x-request-id` header (unless the endpoint already set one)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                header = value.decode("latin-1")
                break
        rid = request_id_from(header)
        request_id.set(rid)
        transport.set("websocket" if scope["type"] == "websocket" else "http")
        start = "http.response.start" if scope["type"] == "http" else "websocket.accept"
        raw = (b"x-request-id", rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == start:
                headers = list(message.get("headers") or ())
                if not any(name.lower() == b"x-request-id" for name, _ in headers):
                    message = {**message, "headers": [*headers, raw]}
            await send(message)

        await self.app(scope, receive, send_with_id)
