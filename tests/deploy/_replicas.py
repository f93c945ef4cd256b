"""Several `uttera serve` replicas on loopback, started in parallel (an engine start costs 20-40 s of a
2-core CPU, so starting them one after the other would triple it), each with JSON logs on stderr.

Timeouts scale with UTTERA_TESTS_TIMEOUT_FACTOR (see tests/_server_process.py).
"""

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _server_process import (
    REPO,
    STARTUP_TIMEOUT_S,
    ServerProcess,
    free_port,
    get_health,
    subprocess_env,
    timeout,
    uttera_command,
)

# Small enough that three replicas and their engine processes fit on the CI machine beside the other tests.
REPLICA_ARGS = (
    "--max-num-seqs",
    "4",
    "--kv-cache-memory-bytes",
    str(64 << 20),
    "--max-input-chars",
    "1000",
    "--log-format",
    "json",
    "--log-level",
    "info",
    "--graceful-shutdown-timeout",
    "5",
    "--max-lead-s",
    "1.0",
)  # streams paced to playback, so they last about their audio's length
# Three engines on two cores: no OpenMP pinning (every engine would pin core 0), one thread each.
REPLICA_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}


@dataclass
class Replica(ServerProcess):
    """One replica; `log_path` is its stderr (JSON lines), `out_path` its stdout."""

    port: int = 0
    out_path: Path | None = None
    killed: bool = field(default=False)

    @property
    def alive(self) -> bool:
        return not self.killed and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the replica and the engine processes it spawned: a crash, no drain."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout(10))
        self.killed = True

    def json_lines(self) -> list[dict]:
        """The stderr lines that are JSON objects (C++ warnings and progress bars of the engine processes
        bypass Python logging and stay as they are)."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


def start_replicas(
    model_dir: Path, log_dir: Path, n: int, extra_args: tuple[str, ...] = (), tmpdir: Path | None = None
) -> list[Replica]:
    """Start `n` replicas at once and wait until every GET /health answers 200; fail with the log of the
    first that did not. `tmpdir`: their TMPDIR (where a killed one leaves its IPC directory)."""
    replicas = []
    env = {**subprocess_env(), **REPLICA_ENV, **({"TMPDIR": str(tmpdir)} if tmpdir is not None else {})}
    for i in range(n):
        port = free_port()
        err, out = log_dir / f"replica-{i}.stderr", log_dir / f"replica-{i}.stdout"
        command = uttera_command(
            "serve", "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(port), *REPLICA_ARGS, *extra_args
        )
        with open(err, "wb") as e, open(out, "wb") as o:
            proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=o, stderr=e, start_new_session=True)
        replicas.append(Replica(f"http://127.0.0.1:{port}", proc, err, port=port, out_path=out))
    deadline = time.monotonic() + timeout(STARTUP_TIMEOUT_S)
    waiting = list(replicas)
    while waiting:
        for r in list(waiting):
            if r.proc.poll() is not None:
                stop_all(replicas)
                pytest.fail(f"replica {r.url} exited with status {r.proc.returncode} during startup:\n{r.log_tail()}")
            status, body = get_health(r.url)
            if status == 200:
                waiting.remove(r)
            elif status == 503 and body.get("status") == "failed":
                stop_all(replicas)
                pytest.fail(f"replica {r.url}: engine failed to start: {body.get('error')}\n{r.log_tail()}")
        if waiting and time.monotonic() > deadline:
            stop_all(replicas)
            pytest.fail(f"GET /health not 200 within {timeout(STARTUP_TIMEOUT_S)} s:\n{waiting[0].log_tail()}")
        time.sleep(0.2)  # poll interval, not a synchronisation
    return replicas


def stop_all(replicas: list[Replica]) -> None:
    """SIGTERM every live replica at once, then wait for each (a graceful stop is a few seconds each)."""
    for r in replicas:
        if r.alive:
            r.proc.send_signal(signal.SIGTERM)
    for r in replicas:
        if not r.killed:
            r.stop()


def live(replicas: list[Replica]) -> list[Replica]:
    return [r for r in replicas if r.alive]
