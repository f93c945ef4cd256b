"""logs.py without a server: request id validation, the JSON formatter's fields, and the middleware on a
tiny Starlette app (HTTP response and WebSocket handshake headers, the context seen by the endpoint)."""

import json
import logging
import os
import sys

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient

from uttera_server import logs


@pytest.mark.parametrize("header", ["abc", "A-b_c.d:e", "x" * 128, "0"])
def test_valid_request_ids_are_kept(header):
    assert logs.request_id_from(header) == header


@pytest.mark.parametrize("header", [None, "", "x" * 129, "has space", "semi;colon", "é", "a/b", "new\nline"])
def test_invalid_request_ids_are_replaced(header):
    rid = logs.request_id_from(header)
    assert rid != header and len(rid) == 32 and int(rid, 16) >= 0


def _record(msg="hello %s", args=("world",), exc_info=None, **extra) -> logging.LogRecord:
    record = logging.getLogger("uttera_server.test").makeRecord(
        "uttera_server.test", logging.WARNING, __file__, 1, msg, args, exc_info, extra=extra
    )
    return record


def test_json_formatter_fields_context_and_extras():
    token = logs.request_id.set("req-1"), logs.context_id.set("ctx-1"), logs.transport.set("websocket")
    try:
        line = logs.JsonFormatter().format(_record(ttfa_ms=12.5, outcome="ok"))
    finally:
        for var, t in zip((logs.request_id, logs.context_id, logs.transport), token):
            var.reset(t)
    out = json.loads(line)
    assert "\n" not in line
    assert out["level"] == "WARNING" and out["logger"] == "uttera_server.test" and out["message"] == "hello world"
    assert (out["request_id"], out["context_id"], out["transport"]) == ("req-1", "ctx-1", "websocket")
    assert out["ttfa_ms"] == 12.5 and out["outcome"] == "ok"
    assert out["time"].endswith("Z") and "T" in out["time"]
    assert {"msg", "args", "levelno", "pathname", "lineno", "thread"}.isdisjoint(out)


def test_json_formatter_outside_a_request_and_with_a_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        line = logs.JsonFormatter().format(_record("failed", (), exc_info=sys.exc_info()))
    out = json.loads(line)
    assert "request_id" not in out and "context_id" not in out
    assert "ValueError: boom" in out["exc_info"] and "\n" not in line


def test_uvicorn_log_config():
    assert logs.uvicorn_log_config("text")["formatters"]["default"]["()"].startswith("uvicorn.")
    config = logs.uvicorn_log_config("json")
    assert config["formatters"]["json"] == {"()": "uttera_server.logs.JsonFormatter"}
    assert {"uvicorn", "uvicorn.error", "uvicorn.access"} <= config["loggers"].keys()


def _app() -> Starlette:
    async def seen(request):
        return JSONResponse({"request_id": logs.request_id.get(), "transport": logs.transport.get()})

    async def own_header(request):
        return PlainTextResponse("x", headers={"x-request-id": "endpoint-set"})

    async def ws(websocket):
        await websocket.accept()
        await websocket.send_json({"request_id": logs.request_id.get(), "transport": logs.transport.get()})
        await websocket.close()

    return Starlette(
        routes=[Route("/seen", seen), Route("/own", own_header), WebSocketRoute("/ws", ws)],
        middleware=[Middleware(logs.RequestIdMiddleware)],
    )


def test_middleware_http():
    with TestClient(_app()) as client:
        r = client.get("/seen", headers={"x-request-id": "client-7"})
        assert r.headers["x-request-id"] == "client-7"
        assert r.json() == {"request_id": "client-7", "transport": "http"}
        r = client.get("/seen", headers={"x-request-id": "bad id"})
        assert r.headers["x-request-id"] == r.json()["request_id"] != "bad id"
        r = client.get("/own")
        assert r.headers.get_list("x-request-id") == ["endpoint-set"]  # not doubled
        r = client.get("/missing")
        assert r.status_code == 404 and len(r.headers["x-request-id"]) == 32


def test_middleware_websocket_handshake():
    with TestClient(_app()) as client:
        with client.websocket_connect("/ws", headers={"x-request-id": "ws-9"}) as ws:
            assert ws.receive_json() == {"request_id": "ws-9", "transport": "websocket"}
            assert dict(ws.extra_headers or [])[b"x-request-id"] == b"ws-9"


def test_log_format_flag(tiny_model_dir):
    from uttera_server.flags import build_config, build_parser
    from uttera_server.config import ServerConfig
    from uttera_server.errors import ConfigError

    parser = build_parser()
    base = ["serve", "--model", str(tiny_model_dir)]
    assert build_config(parser.parse_args(base)).log_format == "text"
    assert build_config(parser.parse_args([*base, "--log-format", "json"])).log_format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--log-format", "yaml"])
    with pytest.raises(ConfigError, match="--log-format"):
        ServerConfig(model_dir=tiny_model_dir, log_format="yaml")


def test_engine_side_warnings_are_json_in_the_engines_processes(monkeypatch, tmp_path):
    """An engine process applies only VLLM_LOGGING_CONFIG_PATH's config (vLLM's dictConfig of it): uttera's
    engine-side loggers are in it, as JSON at the server's level."""
    import subprocess

    monkeypatch.delenv("VLLM_LOGGING_CONFIG_PATH", raising=False)
    monkeypatch.delenv("VLLM_CONFIGURE_LOGGING", raising=False)
    logs._route_vllm_logs_to_json("WARNING")
    path = os.environ.pop("VLLM_LOGGING_CONFIG_PATH")
    script = (
        "import json, logging, logging.config, sys; logging.config.dictConfig(json.load(open(sys.argv[1]))); "
        "logging.getLogger('engine_patches.pauses').warning('paused %d ms', 500); "
        "logging.getLogger('engine_patches.pauses').info('not at WARNING')"
    )
    out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (line,) = out.stderr.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["message"]) == (
        "WARNING",
        "engine_patches.pauses",
        "paused 500 ms",
    )
