"""Graceful shutdown on SIGTERM, on a server of its own: stop accepting, drain, cancel, close the engine."""

import signal
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from _server_process import start_server, timeout
from _speech_client import collect_until, expect_close, recv_json, send_json
from uttera_server.serve import SHUTDOWN_TAIL_S

DRAIN_S = 8.0  # how long streams may run on after SIGTERM, before scaling


async def test_sigterm_lets_streams_finish_then_cancels_the_rest(model_dir, tmp_path):
    drain_s = timeout(DRAIN_S)  # the grace period is this plus the tail kept for cancelling and closing
    server = start_server(
        model_dir, tmp_path / "server.log", ("--graceful-shutdown-timeout", str(drain_s + SHUTDOWN_TAIL_S))
    )
    ws_url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout(60)) as http, \
                connect(ws_url) as busy, connect(ws_url) as idle:  # fmt: skip
            # a context that is never ended: only the cancel step stops it
            await send_json(busy, type="text", text="Never ended.")
            assert (await recv_json(busy))["type"] == "started"
            body = {"model": "uttera", "input": "A request in flight when the signal comes. " * 3}
            async with http.stream("POST", "/v1/audio/speech", json=body) as r:
                parts = r.aiter_raw()
                audio = bytearray(await anext(parts))
                server.proc.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                code, _ = await expect_close(idle)  # a socket with nothing open closes at once
                assert code == 1001
                async for part in parts:  # the stream in flight completes (httpx raises on a cut one)
                    audio += part
            assert len(audio) > 44 and time.monotonic() - signalled < drain_s

            async with httpx.AsyncClient(base_url=server.url) as fresh:
                with pytest.raises(httpx.ConnectError):  # no new connections while draining
                    await fresh.get("/health")

            messages, _ = await collect_until(busy, "error")
            assert messages[-1] == {
                "type": "error",
                "code": "shutting_down",
                "context_id": "default",
                "message": messages[-1]["message"],
            }
            assert time.monotonic() - signalled >= 0.9 * drain_s  # cancelled only after the drain timeout
            code, _ = await expect_close(busy)
            assert code == 1001
        server.proc.wait(timeout(60))
    finally:
        server.stop_cleanly()
    log = server.log_tail(200)
    assert "closing the engine" in log
    assert "Traceback" not in log and "output_handler failed" not in log  # the engine's exit is not a failure
