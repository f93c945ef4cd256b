"""What the load generator's HTTP client costs per chunk it reads: aiohttp (load.py's, `clients.http_request`)
against httpx (the client before 2026-12-07), alternated, against one local server that streams like ours.

    python -m benchmarks.client_cost [--streams 200] [--duration 8] [--rounds 2] [--chunks 40]
                                     [--chunk-bytes 2048] [--gap-ms 30] [--out client_cost.json]

The server (a child process: starlette under uvicorn with uvloop and httptools, as `uttera serve`) answers
`POST /v1/audio/speech` with `--chunks` chunks of `--chunk-bytes` zero bytes, `--gap-ms` apart (the in-engine
vocoder sends one 4-frame chunk, 2,048 bytes of s16le, per engine step). Each client runs `--streams`
workers sending requests back to back for `--duration` s in this process and reports its CPU time per chunk
read and the chunks it read per second (what the server offered: streams x 1000 / gap-ms per second, less
the requests' own turnaround). A client that needs most of a core to read fewer chunks than offered is the
limit of a load run, not the server.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import machine
from benchmarks.clients import http_request, load_client
from benchmarks.playback import RequestRecord
from benchmarks.server import free_port, wait_healthy


def serve(port: int, chunks: int, chunk_bytes: int, gap_s: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    async def speech(request):
        await request.body()

        async def body():
            for _ in range(chunks):
                yield bytes(chunk_bytes)
                await asyncio.sleep(gap_s)

        return StreamingResponse(body(), media_type="audio/pcm", headers={"x-sample-rate": "22050"})

    async def health(request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/v1/audio/speech", speech, methods=["POST"]), Route("/health", health)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop", http="httptools")


async def httpx_request(client, text: str, kind: str, timeout_s: float) -> RequestRecord:
    """The httpx request load.py used before 2026-12-07 (this server answers 200 only)."""
    rec = RequestRecord("http", kind, len(text), time.perf_counter())
    body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", "/v1/audio/speech", json=body) as r:
                async for chunk in r.aiter_bytes():
                    rec.add(time.perf_counter(), len(chunk) / 2)
        rec.t_done = time.perf_counter()
    except Exception as e:  # as load.py did: counted, not raised
        rec.error = type(e).__name__
    return rec


async def run_client(name: str, url: str, streams: int, duration_s: float) -> dict:
    import httpx

    client: Any  # an httpx.AsyncClient or an aiohttp.ClientSession, each with its request function
    request: Callable[..., Awaitable[RequestRecord]]
    if name == "httpx":
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        client, request = httpx.AsyncClient(base_url=url, timeout=60, limits=limits), httpx_request
    else:
        client, request = load_client(url, 60), http_request
    records: list[RequestRecord] = []
    async with client:
        end = time.perf_counter() + duration_s

        async def worker() -> None:
            while time.perf_counter() < end:
                records.append(await request(client, "hello", "short", 60.0))

        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(streams)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    chunks = sum(len(r.arrivals) for r in records)
    return {
        "client": name,
        "requests": len(records),
        "errors": sum(1 for r in records if not r.ok),
        "chunks": chunks,
        "chunks_per_s": round(chunks / wall, 1),
        "cpu_pct": round(100 * cpu / wall, 1),
        "cpu_us_per_chunk": round(1e6 * cpu / chunks, 2) if chunks else None,
        # the chunks as the client read them (one per server chunk unless reads coalesced several)
        "bytes_per_chunk": round(2 * sum(n for r in records for _, n in r.arrivals) / chunks) if chunks else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--chunks", type=int, default=40)
    p.add_argument("--chunk-bytes", type=int, default=2048)
    p.add_argument("--gap-ms", type=float, default=30.0)
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server child's port
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.serve:
        serve(a.serve, a.chunks, a.chunk_bytes, a.gap_ms / 1000)
        return
    import uvloop

    port = free_port()
    child = [sys.executable, "-m", "benchmarks.client_cost", "--serve", str(port)]
    child += ["--chunks", str(a.chunks), "--chunk-bytes", str(a.chunk_bytes), "--gap-ms", str(a.gap_ms)]
    server = subprocess.Popen(child)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", 60, proc=server)
        rows = []
        for rnd in range(a.rounds):
            for name in ("httpx", "aiohttp") if rnd % 2 == 0 else ("aiohttp", "httpx"):
                row = {
                    "round": rnd + 1,
                    **uvloop.run(run_client(name, f"http://127.0.0.1:{port}", a.streams, a.duration)),
                }
                rows.append(row)
                print(
                    f"round {row['round']} {name:>7}: {row['chunks_per_s']:>8.0f} chunks/s, client CPU "
                    f"{row['cpu_pct']:>5.1f} % -> {row['cpu_us_per_chunk']} us/chunk, errors {row['errors']}",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(10)
    offered = a.streams * 1000 / a.gap_ms
    print(f"\n{'client':>8} {'chunks/s':>9} {'CPU %':>6} {'us/chunk':>9}  (offered: up to {offered:.0f} chunks/s)")
    summary = {}
    for name in ("httpx", "aiohttp"):
        mine = [r for r in rows if r["client"] == name]
        us = sorted(r["cpu_us_per_chunk"] for r in mine if r["cpu_us_per_chunk"])
        summary[name] = {
            "cpu_us_per_chunk_median": us[len(us) // 2] if us else None,
            "chunks_per_s_median": sorted(r["chunks_per_s"] for r in mine)[len(mine) // 2],
        }
        print(
            f"{name:>8} {summary[name]['chunks_per_s_median']:>9.0f} "
            f"{sorted(r['cpu_pct'] for r in mine)[len(mine) // 2]:>6.1f} {summary[name]['cpu_us_per_chunk_median']:>9}"
        )
    if a.out:
        meta = {**machine.describe(), "args": vars(a) | {"out": str(a.out)}, "rows": rows, "summary": summary}
        a.out.write_text(json.dumps(meta, indent=1) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
