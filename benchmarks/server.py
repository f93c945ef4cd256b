"""`uttera serve` as a child process on a free port, and scraping its `/metrics`.

    with started_server(model_dir, server_args="--max-num-seqs 16", log_path=...) as base_url:
        before = scrape(base_url)
        ...

The server runs in its own session (process group) so that stopping it also stops the engine core
processes it spawned: SIGTERM (graceful), then SIGKILL to the group after `stop_timeout_s`.
"""

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def started_server(
    model_dir: Path,
    server_args: str = "",
    log_path: Path | None = None,
    startup_timeout_s: float = 900.0,
    stop_timeout_s: float = 60.0,
):
    """Start the server, wait until GET /health is 200, yield its base URL, stop it."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "uttera_server",
        "serve",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *shlex.split(server_args),
    ]
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, startup_timeout_s, proc=proc, log_path=log_path)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # our server's own process group only
                proc.wait()
        if not isinstance(log, int):  # our file, not subprocess.DEVNULL
            log.close()


def wait_healthy(
    base_url: str, timeout_s: float = 30.0, *, proc: subprocess.Popen | None = None, log_path: Path | None = None
) -> None:
    """Wait until GET /health is 200 (for `--url`: fail early when nothing healthy listens there); with
    `proc`, fail as soon as that server process exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} during startup (log: {log_path})")
        try:
            if httpx.get(base_url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"GET {base_url}/health not 200 within {timeout_s} s (log: {log_path})")
        time.sleep(0.5)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (comments dropped)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


async def scrape(client: httpx.AsyncClient) -> dict[str, float]:
    r = await client.get("/metrics")
    r.raise_for_status()
    return parse_metrics(r.text)


STEP_COUNTER = "uttera_engine_steps_total"
STEP_SECONDS = "uttera_engine_step_seconds_total"
REQUESTS = "uttera_requests_total"


TTFA = "uttera_time_to_first_audio_seconds"


def server_ttfa(before: dict, after: dict) -> dict:
    """TTFA as the server measured it during the run (from its histogram, all transports): the mean, and
    the p50 and p99 as the upper bound of the bucket they fall in. Set beside the client's TTFA, it says
    whether a first chunk was late inside the server or before the request reached it."""
    delta = lambda key: after.get(key, 0.0) - before.get(key, 0.0)  # noqa: E731
    count = sum(delta(k) for k in after if k.startswith(TTFA + "_count"))
    if count <= 0:
        return {}
    total = sum(delta(k) for k in after if k.startswith(TTFA + "_sum"))
    buckets: dict[float, float] = {}
    for key in after:
        if key.startswith(TTFA + "_bucket"):
            le = key.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(le)] = buckets.get(float(le), 0.0) + delta(key)

    def bound(q: float) -> float | None:
        return next((1000 * le for le, n in sorted(buckets.items()) if n >= q * count), None)

    return {
        "server_ttfa_ms_mean": round(1000 * total / count, 3),
        "server_ttfa_ms_p50_bucket": bound(0.5),
        "server_ttfa_ms_p99_bucket": bound(0.99),
    }


def engine_summary(before: dict, after: dict, samples: list[dict], wall_s: float) -> dict:
    """Engine figures of a run from /metrics: mean running/waiting requests (sampled), and the mean
    step time if the server exports a step counter (`uttera_engine_steps_total`)."""
    out = {}
    for name in ("uttera_engine_running_requests", "uttera_engine_waiting_requests", "uttera_engine_kv_cache_usage"):
        values = [s[name] for s in samples if name in s]
        if values:
            out[name.removeprefix("uttera_engine_") + "_mean"] = round(sum(values) / len(values), 3)
            out[name.removeprefix("uttera_engine_") + "_max"] = round(max(values), 3)
    if STEP_COUNTER in before and STEP_COUNTER in after:
        steps = after[STEP_COUNTER] - before[STEP_COUNTER]
        out["engine_steps"] = steps
        busy_s = after.get(STEP_SECONDS, 0.0) - before.get(STEP_SECONDS, 0.0)
        out["step_ms_mean"] = round(1000 * busy_s / steps, 3) if steps else None
    else:
        out["step_ms_mean"] = None
        out["step_note"] = f"/metrics has no {STEP_COUNTER}: engine step time not available from the server"
    # Host cost in the serving process per second of audio it sent: the event loop alone, and all its
    # threads (the vocoder's included); and how busy the loop was (100 = one core, its ceiling).
    audio = after.get("uttera_audio_seconds_total", 0.0) - before.get("uttera_audio_seconds_total", 0.0)
    for key, name in (("loop", "uttera_event_loop_cpu_seconds_total"), ("server", "uttera_server_cpu_seconds_total")):
        if name in before and name in after:
            cpu = after[name] - before[name]
            out[f"{key}_cpu_pct"] = round(100 * cpu / wall_s, 1) if wall_s > 0 else None
            out[f"{key}_cpu_ms_per_audio_s"] = round(1000 * cpu / audio, 3) if audio > 0 else None
    for key, name in (
        ("server_underruns", "uttera_stream_underruns_total"),
        ("server_audio_s", "uttera_audio_seconds_total"),
    ):
        if name in before and name in after:
            out[key] = round(after[name] - before[name], 3)
    out.update(server_ttfa(before, after))
    # How the server says the run's requests ended, by transport and status (a client error whose request
    # the server counts "ok" or "disconnected" was lost between them, one it counts "error" was the server's).
    ended = {
        key.removeprefix(REQUESTS): round(after[key] - before.get(key, 0.0))
        for key in after
        if key.startswith(REQUESTS)
    }
    if ended:
        out["server_requests"] = {labels: n for labels, n in sorted(ended.items()) if n}
    return out
