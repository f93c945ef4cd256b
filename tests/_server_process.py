"""`uttera serve` as a subprocess on a free port, for the endpoint tests (see conftest.py).

Timeouts scale with UTTERA_TESTS_TIMEOUT_FACTOR.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _timeouts import scaled

from uttera_server.runtime_dirs import IPC_DIR_ENV

REPO = Path(__file__).resolve().parents[1]
MAX_INPUT_CHARS = 1000  # the test server's --max-input-chars
STARTUP_TIMEOUT_S = 300.0  # engine start on a small shared CPU host
STOP_TIMEOUT_S = 60.0
SERVER_ARGS = (
    "--max-input-chars",
    str(MAX_INPUT_CHARS),
    "--max-num-seqs",
    "8",
    "--log-level",
    "info",
    "--kv-cache-memory-bytes",
    str(256 << 20),
)


timeout = scaled  # the name the server tests use


@contextlib.contextmanager
def server_tmpdir() -> Iterator[Path]:
    """A TMPDIR for a server of a test's own, removed afterwards. Its path is short: a socket path holds at
    most 107 bytes, and under pytest's tmp_path the server's IPC directory would have no room for them."""
    path = Path(tempfile.mkdtemp(prefix="uttera-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProcess:
    url: str
    proc: subprocess.Popen
    log_path: Path

    def log_tail(self, n: int = 60) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self) -> int:
        """SIGTERM, then wait for the graceful shutdown; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout(STOP_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and the engine processes it spawned
            self.proc.wait()
            pytest.fail(f"server did not stop within {timeout(STOP_TIMEOUT_S)} s after SIGTERM:\n{self.log_tail()}")

    def stop_cleanly(self) -> None:
        """`stop`, then check that the shutdown ran to its end (serve.py unwinds on SIGTERM and exits 0; a
        signal that lands before serve() runs ends the process with -SIGTERM, also accepted)."""
        status = self.stop()
        log = self.log_tail(200)
        assert status in (0, -signal.SIGTERM), f"server exited with status {status}:\n{log}"
        assert "Application shutdown complete" in log, f"the lifespan shutdown did not finish:\n{log}"


def uttera_command(*args: str) -> list[str]:
    """`python -m uttera_server ARGS`."""
    return [sys.executable, "-m", "uttera_server", *args]


def subprocess_env() -> dict[str, str]:
    """The environment of a server (or CLI) a test starts: the test session's, less its IPC directory
    (conftest.py's `ipc_directory`): each server makes its own and removes it, as it does when deployed."""
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath}
    env.pop(IPC_DIR_ENV, None)
    return env


def start_server(
    model_dir: Path,
    log_path: Path,
    extra_args: tuple[str, ...] = (),
    entry: tuple[str, ...] | None = None,
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """Start the server and wait until GET /health answers 200; fail with its log otherwise. `entry`
    replaces `python -m uttera_server` (a wrapper that takes the same arguments); `env`: more environment."""
    port = free_port()
    command = [
        *(entry or uttera_command()),
        "serve",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *SERVER_ARGS,
        *extra_args,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env={**subprocess_env(), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ServerProcess(f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + timeout(STARTUP_TIMEOUT_S)
    while True:
        if proc.poll() is not None:
            pytest.fail(f"server exited with status {proc.returncode} during startup:\n{server.log_tail()}")
        status, body = get_health(server.url)
        if status == 200:
            return server
        if status == 503 and body.get("status") == "failed":
            server.stop()
            pytest.fail(f"engine failed to start: {body.get('error')}\n{server.log_tail()}")
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"GET /health not 200 within {timeout(STARTUP_TIMEOUT_S)} s:\n{server.log_tail()}")
        time.sleep(0.1)  # poll interval, not a synchronisation


def get_health(url: str) -> tuple[int | None, dict]:
    """(status, JSON body) of GET /health; (None, {}) while nothing listens."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read() or b"{}")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, {}
