"""Single-stream latency of the real server: time to first audio (TTFA) and real-time factor (RTF).

    python -m benchmarks.single_stream [--model DIR] [--requests 20] [--seed 0] [--out FILE.json]

Starts `uttera serve` on a free port, waits for /health, then sends the requests one at a time over
chunked HTTP (`response_format=pcm`) and over the WebSocket, measuring from the request to the first
audio byte, and the whole synthesis time over the audio duration. Prints one table; writes JSON.
"""

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import websockets

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent
TEXTS = [
    "Hello there, this is a streaming test.",
    "The quick brown fox jumps over the lazy dog.",
    "Could you tell me the way to the train station, please?",
    "It was the best of times, it was the worst of times.",
    "Our meeting moved to three thirty on Thursday afternoon.",
    "Please remember to water the plants while I am away.",
    "The total comes to forty two dollars and fifteen cents.",
    "She sells sea shells by the sea shore, or so they say.",
    "I will call you back as soon as the results are in.",
    "Turn left at the next light, then keep going for two miles.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


async def http_one(client, text):
    t0 = time.perf_counter()
    first, n = None, 0
    body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
    async with client.stream("POST", "/v1/audio/speech", json=body) as r:
        r.raise_for_status()
        rate = int(r.headers.get("x-sample-rate", "22050"))
        async for chunk in r.aiter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - t0
            n += len(chunk)
    return first, time.perf_counter() - t0, n / 2 / rate


async def ws_one(url, text):
    async with websockets.connect(url, max_size=None) as ws:
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "text", "text": text}))
        await ws.send(json.dumps({"type": "end"}))
        first, n, rate = None, 0, 22050
        async for msg in ws:
            if isinstance(msg, bytes):
                if first is None:
                    first = time.perf_counter() - t0
                n += len(msg) - 2 - msg[1]
            else:
                m = json.loads(msg)
                if m["type"] == "started":
                    rate = m["sample_rate"]
                elif m["type"] == "done":
                    break
                elif m["type"] == "error":
                    raise RuntimeError(m)
        return first, time.perf_counter() - t0, n / 2 / rate


async def run(base, n, seed):
    rng = random.Random(seed)
    texts = [rng.choice(TEXTS) for _ in range(n)]
    results = {}
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        await http_one(client, "Warm up.")
        results["http"] = [await http_one(client, t) for t in texts]
    ws_url = base.replace("http://", "ws://") + "/v1/audio/speech/stream"
    results["websocket"] = [await ws_one(ws_url, t) for t in texts]
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_model = ROOT / "voices" / "default"
    p.add_argument(
        "--model", type=Path, default=default_model if default_model.exists() else ROOT / "models" / "tiny-dev"
    )
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "single_stream.json")
    p.add_argument("--extra", default="", help="extra `uttera serve` flags, one string")
    a = p.parse_args()
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "uttera_server",
        "serve",
        "--model",
        str(a.model),
        "--port",
        str(port),
        *a.extra.split(),
    ]
    log = open(a.out.with_suffix(".server.log"), "w") if a.out.parent.exists() else subprocess.DEVNULL
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                sys.exit(f"server exited with {server.returncode}")
            time.sleep(1)
        results = asyncio.run(run(base, a.requests, a.seed))
    finally:
        server.terminate()
        server.wait(60)
    rows = {}
    print(f"{'transport':<10} {'n':>3} {'TTFA p50 ms':>12} {'TTFA p95 ms':>12} {'RTF mean':>9} {'RTF p95':>8}")
    for transport, rs in results.items():
        ttfa = [r[0] * 1000 for r in rs]
        rtf = [r[1] / r[2] for r in rs]
        rows[transport] = {
            "n": len(rs),
            "ttfa_ms_p50": pct(ttfa, 50),
            "ttfa_ms_p95": pct(ttfa, 95),
            "rtf_mean": statistics.fmean(rtf),
            "rtf_p95": pct(rtf, 95),
            "audio_s_mean": statistics.fmean(r[2] for r in rs),
        }
        r = rows[transport]
        print(
            f"{transport:<10} {r['n']:>3} {r['ttfa_ms_p50']:>12.1f} {r['ttfa_ms_p95']:>12.1f} "
            f"{r['rtf_mean']:>9.3f} {r['rtf_p95']:>8.3f}"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "command": machine.command(),
                "model": str(a.model),
                "seed": a.seed,
                "machine": f"{platform.machine()} {os.cpu_count()} cpus",
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
