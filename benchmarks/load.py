"""Load generator for the uttera server: TTFA, underruns, throughput, over HTTP and WebSocket.

    # one closed-loop run, server started here (floor measured first, see floor.py):
    python -m benchmarks.load --start-server --model voices/default --concurrency 4 --duration 20
    # concurrency sweep, both transports, JSON + PNG:
    python -m benchmarks.load --start-server --model voices/default --sweep 1,2,4,6,8,12 \\
        --transport both --ttfa-budget-ms 300 --out benchmarks/results/load_default_cpu.json
    # open loop (Poisson arrivals, req/s), against a running server, floor from an earlier run:
    python -m benchmarks.load --url http://127.0.0.1:8000 --mode open --sweep 0.5,1,2 \\
        --floor benchmarks/results/load_default_cpu.floor.json
    # paced real-time listeners (paced.py): N streams of one long text each, arrivals over a 10 s ramp:
    python -m benchmarks.load --start-server --model voices/default --mode paced --sweep 2,4,6 --ramp-s 10 \
        --server-args "--max-lead-s 2" --transport both --ttfa-budget-ms 300 --out benchmarks/results/paced_cpu.json
    # mixed voices (a model directory with several): `--voices joe,heart` deals them to the clients in turn;
    # paced levels then also report `streams_held_by_voice`

Per level (one concurrency C, or one arrival rate): TTFA p50/p95/p99 and the floor beside it
(floor.py: one prefill + the decode steps of the first vocoder chunk + one vocoder chunk) with the
ratio TTFA/floor, inter-chunk gap p99, playback underruns (playback.py: a client that starts playing
at its first chunk; total and requests with any), RTF, aggregate audio-seconds per second, errors by
code, engine queue gauges sampled from /metrics, and the engine step time if /metrics has a step
counter. A sweep also reports the highest concurrency such that it and every lower level have zero
underruns, no errors and TTFA p99 within --ttfa-budget-ms. Paced mode (paced.py) reports per level N
the streams held (no error, no underrun) and the most in flight at once, and the sweep the highest N
held whole within the TTFA budget.
"""

import argparse
import asyncio
import contextlib
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import machine, paced
from benchmarks.client_stalls import LoopStalls
from benchmarks.client_stalls import summary as stall_summary
from benchmarks.clients import load_client, session_factory
from benchmarks.loop import closed_loop, open_loop
from benchmarks.plots import plot_sweep
from benchmarks.server import engine_summary, scrape, started_server, wait_healthy
from benchmarks.stats import by_kind, steady_audio_rate, summarize
from benchmarks.texts import TextMix, parse_weights

ROOT = Path(__file__).resolve().parent.parent

TRANSPORTS = {"http": ("http",), "ws": ("ws",), "both": ("http", "ws")}


async def sample_metrics(client: httpx.AsyncClient, every_s: float, out: list) -> None:
    while True:
        await asyncio.sleep(every_s)
        with contextlib.suppress(Exception):
            out.append(await scrape(client))


def _client_ready() -> None:
    """Run once in each client process before the clock starts: this module is imported by then (the
    short sleep keeps one process from taking two of these calls)."""
    time.sleep(0.2)


def _client_part(
    base_url: str,
    transport: str,
    concurrency: int,
    workers: list[int],
    duration_s: float,
    end: float,
    seed: int,
    mix,
    request_timeout: float,
    voices: tuple[str, ...] = ("default",),
) -> tuple[list, dict, float]:
    """One client process of a closed-loop level: its workers' records, its loop stalls
    (client_stalls.LoopStalls.as_dict) and the CPU time it used."""

    async def go():
        async with load_client(base_url, request_timeout) as client:
            open_session = session_factory(transport, base_url, client, request_timeout, voices)
            with LoopStalls() as stalls:
                watch = asyncio.create_task(stalls.watch())
                try:
                    records, _, _ = await closed_loop(
                        open_session, concurrency, duration_s, seed, mix, workers=workers, end=end
                    )
                finally:
                    watch.cancel()
            return records, stalls.as_dict()

    cpu0 = time.process_time()
    records, stalls = asyncio.run(go())
    return records, stalls, time.process_time() - cpu0


async def closed_loop_processes(base_url: str, transport: str, concurrency: int, a, seed: int):
    """The closed loop with its workers dealt round-robin over `a.client_processes` processes, so the
    client is not the limit at hundreds of streams (at 256 on the H200 one process used 61 % of a core);
    each worker sends the texts it would send in one process."""
    import concurrent.futures
    import multiprocessing

    n = max(1, min(a.client_processes, concurrency))
    groups = [list(range(i, concurrency, n)) for i in range(n)]
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        # every process up and this module imported in it before the shared deadline is set
        await asyncio.gather(*(loop.run_in_executor(pool, _client_ready) for _ in range(n)))
        t0 = time.perf_counter()
        end = t0 + a.duration
        parts = await asyncio.gather(
            *(
                loop.run_in_executor(
                    pool,
                    _client_part,
                    base_url,
                    transport,
                    concurrency,
                    g,
                    a.duration,
                    end,
                    seed,
                    a.mix,
                    a.request_timeout,
                    a.voices,
                )
                for g in groups
            )
        )
        wall = time.perf_counter() - t0
    records = [r for part, _, _ in parts for r in part]
    cpu = [c for _, _, c in parts]
    return (
        records,
        wall,
        {
            "client_processes": n,
            "client_cpu_pct": round(100 * sum(cpu) / wall, 1),
            "client_cpu_pct_max": round(100 * max(cpu) / wall, 1),
            "audio_s_per_s_steady": steady_audio_rate(records, t0, end),
            **stall_summary([s for _, s, _ in parts]),
        },
    )


async def run_level(
    base_url: str, transport: str, mode: str, level: float, a, floor: dict | None, server_log: Path | None = None
) -> dict:
    """One level's row. `server_log`: the started server's log, whose pause warnings a paced level's
    underruns are matched with (paced.server_pause_figures)."""
    async with (
        load_client(base_url, a.request_timeout) as client,
        httpx.AsyncClient(base_url=base_url, timeout=10) as metrics_client,
    ):
        open_session = session_factory(transport, base_url, client, a.request_timeout, a.voices)
        before = await scrape(metrics_client)
        samples: list[dict] = []
        sampler = asyncio.create_task(sample_metrics(metrics_client, a.metrics_interval, samples))
        seed = a.seed + int(level * 1000)
        cpu0 = time.process_time()
        if mode == "closed" and a.client_processes > 1:
            records, wall, info = await closed_loop_processes(base_url, transport, int(level), a, seed)
        elif mode == "paced":
            records, wall, info = await paced.paced_level(
                base_url,
                transport,
                int(level),
                a.ramp_s,
                seed,
                a.stream_chars,
                a.request_timeout,
                a.client_processes,
                a.voices,
            )
        elif mode == "closed":
            records, wall, info = await closed_loop(open_session, int(level), a.duration, seed, a.mix)
        else:
            records, wall, info = await open_loop(open_session, level, a.duration, seed, a.mix)
        sampler.cancel()
        after = await scrape(metrics_client)
        if mode == "paced" and server_log is not None and server_log.exists():
            info.update(paced.server_pause_figures(records, server_log.read_text(errors="replace")))
        if "client_cpu_pct" not in info:
            info["client_cpu_pct"] = round(100 * (time.process_time() - cpu0) / wall, 1)  # of one core
    row = {
        "transport": transport,
        "mode": mode,
        "level": level,
        **summarize(records, wall),
        **info,
        **engine_summary(before, after, samples, wall),
        "by_kind": by_kind(records),
    }
    if floor:
        f = floor["floor_ms"]
        row["floor_ms"] = f
        row["ttfa_p50_over_floor"] = round(row["ttfa_ms_p50"] / f, 2) if row["ttfa_ms_p50"] else None
        row["ttfa_p99_over_floor"] = round(row["ttfa_ms_p99"] / f, 2) if row["ttfa_ms_p99"] else None
    if a.records:
        row["records"] = [r.to_json() for r in records]
    return row


async def warm_up(base_url: str, transport: str, n: int, a) -> None:
    """`n` requests before the levels; a failed one stops the run (a server that cannot answer them would
    make every level's figures meaningless)."""
    if n <= 0:
        return
    mix = TextMix(a.seed + 999_999, a.mix)
    async with load_client(base_url, a.request_timeout) as client:
        open_session = session_factory(transport, base_url, client, a.request_timeout, a.voices)
        for i in range(n):
            async with open_session(i) as session:
                rec = await session.request(*reversed(mix.draw()))
            if not rec.ok:
                raise SystemExit(f"warm-up request {i + 1} of {n} ({transport}) failed: {rec.error or 'no audio'}")


def passes(row: dict, budget_ms: float | None) -> bool:
    return (
        row["ok"] > 0
        and not row["errors"]
        and row["underruns"] == 0
        and (budget_ms is None or (row["ttfa_ms_p99"] or 1e18) <= budget_ms)
    )


def best_level(rows: list[dict], budget_ms: float | None) -> dict:
    """Per transport: the highest level such that it and every lower level pass."""
    out = {}
    for transport in sorted({r["transport"] for r in rows}):
        best = None
        for r in sorted((r for r in rows if r["transport"] == transport), key=lambda r: r["level"]):
            if not passes(r, budget_ms):
                break
            best = r
        out[transport] = (
            None
            if best is None
            else {"level": best["level"], "ttfa_ms_p99": best["ttfa_ms_p99"], "audio_s_per_s": best["audio_s_per_s"]}
        )
    return out


def fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'tr':<4} {'lvl':>5} {'req':>4} {'err':>3} {'TTFA50':>7} {'TTFA95':>7} {'TTFA99':>7} {'floor':>6} "
        f"{'50/fl':>5} {'99/fl':>6} {'gap99':>6} {'undr':>5} {'u-req':>5} {'pre99':>6} {'RTF50':>6} {'aud/s':>6} {'steady':>6} "
        f"{'run':>5} {'wait':>5} {'loop%':>5} {'lp/aud':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['transport']:<4} {r['level']:>5g} {r['requests']:>4} {sum(r['errors'].values()):>3} "
            f"{fmt(r['ttfa_ms_p50']):>7} {fmt(r['ttfa_ms_p95']):>7} {fmt(r['ttfa_ms_p99']):>7} "
            f"{fmt(r.get('floor_ms')):>6} {fmt(r.get('ttfa_p50_over_floor'), '.2f'):>5} "
            f"{fmt(r.get('ttfa_p99_over_floor'), '.2f'):>6} {fmt(r['gap_ms_p99']):>6} {r['underruns']:>5} "
            f"{r['underrun_requests']:>5} {fmt(r['prebuffer_ms_p99']):>6} {fmt(r['rtf_p50'], '.3f'):>6} {fmt(r['audio_s_per_s'], '.2f'):>6} "
            f"{fmt(r.get('audio_s_per_s_steady'), '.1f'):>6} {fmt(r.get('running_requests_mean'), '.1f'):>5} {fmt(r.get('waiting_requests_mean'), '.1f'):>5} "
            f"{fmt(r.get('loop_cpu_pct'), '.0f'):>5} {fmt(r.get('loop_cpu_ms_per_audio_s'), '.1f'):>6}"
        )
    print(
        "TTFA/gap in ms; floor = prefill + first-chunk decode steps + one vocoder chunk (floor.py); "
        "undr = underruns, u-req = requests with any; pre99 = p99 of the client prebuffer (ms after the first "
        "chunk) that would have avoided every underrun; aud/s = audio seconds per second "
        "(from the start to the last request's end); steady = the same in the closed loop's second half, "
        "before the drain; "
        "run/wait = engine requests running/waiting (mean of /metrics samples); loop% = the server's event-loop "
        "thread CPU (100 = one core), lp/aud = its CPU ms per second of audio sent"
    )


def measure_floor(a, out: Path) -> dict:
    """Run floor.py in its own process (its own engine, stopped before the server starts)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.floor",
        "--model",
        str(a.model),
        "--server-args",
        a.server_args,
        "--device",
        a.device,
        "--seed",
        str(a.seed),
        "--out",
        str(out),
    ]
    print("floor:", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads(out.read_text())


def parse_levels(a) -> list[float]:
    if a.sweep:
        return [float(x) for x in a.sweep.split(",")]
    return [float(a.rate if a.mode == "open" else a.concurrency)]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
    target.add_argument("--start-server", action="store_true", help="start `uttera serve` on a free port")
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default", help="model directory (--start-server)")
    p.add_argument("--server-args", default="", help="extra `uttera serve` flags, one string")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where floor.py runs its vocoder")
    p.add_argument("--transport", default="http", choices=tuple(TRANSPORTS))
    p.add_argument("--mode", default="closed", choices=("closed", "open", "paced"))
    p.add_argument("--concurrency", type=int, default=1, help="closed loop: workers; paced: streams")
    p.add_argument("--rate", type=float, default=1.0, help="open loop: arrivals per second")
    p.add_argument(
        "--sweep", default="", help="comma-separated concurrencies (closed), streams (paced) or rates (open)"
    )
    p.add_argument("--ramp-s", type=float, default=10.0, help="paced: client starts spread evenly over this many s")
    p.add_argument(
        "--stream-chars",
        type=int,
        default=600,
        help="paced: characters of each stream's text (the default voice: ~18 a second, 600 ~ 33 s of audio)",
    )
    p.add_argument("--duration", type=float, default=20.0, help="seconds each level sends new requests (not paced)")
    p.add_argument("--warmup", type=int, default=3, help="requests sent and dropped before each transport")
    p.add_argument("--mix", type=parse_weights, default=None, help="text kinds, e.g. short=0.4,medium=0.4,long=0.2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--voices",
        type=lambda v: tuple(x for x in v.split(",") if x),
        default=("default",),
        help="voice ids, dealt to the clients round-robin (mixed voices: joe,heart)",
    )
    p.add_argument("--ttfa-budget-ms", type=float, default=None)
    p.add_argument("--request-timeout", type=float, default=180.0)
    p.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="closed loop: spread the workers over this many client processes (for >= 256 streams)",
    )
    p.add_argument("--metrics-interval", type=float, default=1.0, help="seconds between /metrics samples")
    floor = p.add_mutually_exclusive_group()
    floor.add_argument("--floor", type=Path, help="floor JSON from floor.py (else measured with --start-server)")
    floor.add_argument("--no-floor", action="store_true")
    p.add_argument(
        "--records",
        action="store_true",
        help="also write every request's chunk timeline to OUT.records.json (git-ignored)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "load.json")
    p.add_argument("--server-log", type=Path, default=None, help="default: a temporary file")
    a = p.parse_args()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    meta = machine.describe()
    levels = parse_levels(a)

    floor_data = None
    if a.floor:
        floor_data = json.loads(a.floor.read_text())
    elif a.start_server and not a.no_floor:
        floor_data = measure_floor(a, a.out.with_suffix(".floor.json"))

    def result(rows: list[dict], best=None) -> dict:
        return {
            **meta,
            "model": str(a.model),
            "server_args": a.server_args,
            "seed": a.seed,
            "mode": a.mode,
            "duration_s": a.duration,
            "mix": a.mix or "default",
            "voices": list(a.voices),
            "ttfa_budget_ms": a.ttfa_budget_ms,
            **({"ramp_s": a.ramp_s, "stream_chars": a.stream_chars} if a.mode == "paced" else {}),
            "floor": floor_data,
            "best": best,
            "levels": rows,
        }

    def run_all(base_url: str, server_log: Path | None = None) -> list[dict]:
        rows, records = [], []
        for transport in TRANSPORTS[a.transport]:
            asyncio.run(warm_up(base_url, transport, a.warmup, a))
            for level in levels:
                row = asyncio.run(run_level(base_url, transport, a.mode, level, a, floor_data, server_log))
                row["loadavg_end"] = machine.loadavg()
                if "records" in row:  # per-request records: beside the summary, in a git-ignored file
                    records.append({"transport": transport, "level": level, "records": row.pop("records")})
                    a.out.with_suffix(".records.json").write_text(json.dumps(records) + "\n")
                rows.append(row)
                # Rewritten after every level: a run stopped by a time limit keeps what it finished.
                a.out.write_text(json.dumps({**result(rows), "partial": True}, indent=1) + "\n")
                print(
                    f"  {transport} {a.mode} {level:g}: TTFA p50 {fmt(row['ttfa_ms_p50'])} ms, "
                    f"p99 {fmt(row['ttfa_ms_p99'])} ms, underruns {row['underruns']}, "
                    f"{fmt(row['audio_s_per_s'], '.2f')} audio-s/s, errors {row['errors']}"
                    + (f", held by voice {row['streams_held_by_voice']}" if "streams_held_by_voice" in row else ""),
                    flush=True,
                )
        return rows

    if a.start_server:
        log = a.server_log or Path(tempfile.mkstemp(prefix="uttera-load-", suffix=".log")[1])
        print(f"starting server (log {log})", flush=True)
        with started_server(a.model, a.server_args, log) as base_url:
            rows = run_all(base_url, Path(log))
    else:
        wait_healthy(a.url)
        rows = run_all(a.url)

    (paced.print_table if a.mode == "paced" else print_table)(rows)
    best = best_level(rows, a.ttfa_budget_ms) if a.mode != "open" else None
    if best is not None:
        for transport, b in best.items():
            print(
                f"{transport}: highest {'stream count' if a.mode == 'paced' else 'concurrency'} with zero underruns, no errors"
                f"{'' if a.ttfa_budget_ms is None else f' and TTFA p99 <= {a.ttfa_budget_ms:g} ms'}: "
                + (
                    "none"
                    if b is None
                    else f"{b['level']:g} (TTFA p99 {b['ttfa_ms_p99']:.1f} ms, {b['audio_s_per_s']:.2f} audio-s/s)"
                )
            )
    meta["loadavg_end"] = machine.loadavg()
    a.out.write_text(json.dumps(result(rows, best), indent=1) + "\n")
    print(f"wrote {a.out}")
    if len(levels) > 1:
        png = plot_sweep(
            rows,
            a.out.with_suffix(".png"),
            f"{meta['command']}\n{meta['cpu']} x{meta['cores']}, {meta['date']}",
            floor_data and floor_data["floor_ms"],
            a.ttfa_budget_ms,
        )
        if png:
            print(f"wrote {png}")


if __name__ == "__main__":
    main()
