"""Graceful shutdown on SIGTERM, on a server of its own: stop accepting, drain, cancel, close the engine; the
same on a terminal's Ctrl-C (SIGINT to the whole process group); the engine's processes stop with a server
that was killed."""

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import psutil
import pytest
from websockets.asyncio.client import connect

from _server_process import start_server, timeout
from _speech_client import collect_until, expect_close, recv_json, send_json
from uttera_server.serve import SHUTDOWN_TAIL_S

DRAIN_S = 8.0  # how long streams may run on after SIGTERM, before scaling


async def test_sigterm_lets_streams_finish_then_cancels_the_rest(model_dir, tmp_path, server_tmp):
    drain_s = timeout(DRAIN_S)  # the grace period is this plus the tail kept for cancelling and closing
    server = start_server(
        model_dir,
        tmp_path / "server.log",
        ("--graceful-shutdown-timeout", str(drain_s + SHUTDOWN_TAIL_S)),
        env={"TMPDIR": str(server_tmp)},
    )
    sockets = socket_files(server_tmp)  # vLLM's and the PCM channel's, all in the server's IPC directory
    assert sockets and {p.parent.name[: len("uttera-ipc-")] for p in sockets} == {"uttera-ipc-"}, sockets
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
        assert server.proc.wait(timeout(60)) == 0  # unwound, not ended by the signal: its cleanup ran
    finally:
        server.stop_cleanly()
    log = server.log_tail(200)
    assert "closing the engine" in log
    assert "Traceback" not in log and "output_handler failed" not in log  # the engine's exit is not a failure
    # the IPC directory is gone with its socket files (vLLM removes none of its own: each start left 7+ in /tmp)
    assert not socket_files(server_tmp) and not list(server_tmp.glob("uttera-ipc-*")), list(server_tmp.rglob("*"))


async def stops_accepting(url: str, within_s: float) -> bool:
    """Whether connections to `url` are refused within `within_s` (answers until then are allowed)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        async with httpx.AsyncClient(base_url=url, timeout=within_s) as http:  # a new connection each time
            try:
                await http.get("/health")
            except httpx.ConnectError:
                return True
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # accepted just before the listener closed, then closed with the rest
        await asyncio.sleep(0.05)
    return False


def socket_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_socket()]


async def test_ctrl_c_lets_a_stream_finish_and_exits_cleanly(model_dir, tmp_path):
    """A terminal sends SIGINT to its whole foreground process group: the engine's processes must not die
    before the serving process has drained (engine_patches/process_tree.py)."""
    server = start_server(model_dir, tmp_path / "server.log", ("--graceful-shutdown-timeout", str(timeout(30))))
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout(60)) as http:
            body = {"model": "uttera", "input": "A request in flight when the operator presses Ctrl-C. " * 3}
            async with http.stream("POST", "/v1/audio/speech", json=body) as r:
                parts = r.aiter_raw()
                audio = bytearray(await anext(parts))
                os.killpg(server.proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of the group
                async for part in parts:  # the stream completes (httpx raises on a cut one)
                    audio += part
        # the stream may end before the server has acted on the signal (uvicorn polls its exit flag every
        # 0.1 s): what counts is that it stops accepting soon after, not within the client's next call
        assert await stops_accepting(server.url, within_s=timeout(10))
        assert server.proc.wait(timeout(60)) == 0
    finally:
        server.stop()
    log = server.log_tail(300)
    assert len(audio) > 44 + 22050, log  # over a second of audio: the whole answer, not a cut
    assert "Application shutdown complete" in log and "Traceback" not in log, log
    assert "EngineCore: trigger received signal=SIGINT" not in log  # the engine was stopped by the server


def test_the_engines_processes_stop_when_the_server_is_killed(model_dir, tmp_path, server_tmp):
    # killed, the server cannot remove its IPC directory: it is made in server_tmp, which the fixture removes
    server = start_server(model_dir, tmp_path / "server.log", env={"TMPDIR": str(server_tmp)})
    engine = [p for p in psutil.Process(server.proc.pid).children(recursive=True) if "EngineCore" in p.name()]
    assert engine, [p.name() for p in psutil.Process(server.proc.pid).children(recursive=True)]
    server.proc.kill()  # the serving process alone, no shutdown of its own
    server.proc.wait()
    gone, alive = psutil.wait_procs(engine, timeout=timeout(30))
    for p in alive:
        p.kill()
    assert not alive, f"engine processes outlived the server: {alive}\n{server.log_tail()}"
