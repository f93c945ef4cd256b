"""Paced real-time clients (load.py --mode paced): N listeners, each streams one long text and plays it.

Client i (0..N-1) opens its session at t0 + i * ramp_s / N (so arrivals are spread over the ramp, not
one burst), sends one long text (texts.long_text, seeded by the level seed and i, at least
--stream-chars characters: the default voice speaks ~18 a second, so the default 600 are ~33 s of
audio) and records every chunk. The playback model (playback.py) plays it at 1x from its first chunk:
an underrun is a chunk that came after the listener's audio ran out. A level is held when every stream finished without error or
underrun; `passes` in load.py adds the TTFA p99 budget.

Figures beyond stats.summarize: `streams_held` (finished, no underrun), `peak_streams` (most streams
in flight at once: sent and not yet done), `audio_s_per_stream_p50`, `ramp_s`, and the clients' CPU.
Clients can be dealt round-robin over several processes (`--client-processes`), all starting from one
shared `time.perf_counter()` origin (system-wide on Linux), as in load.closed_loop_processes.
"""

import asyncio
import concurrent.futures
import multiprocessing
import re
import time

from benchmarks.client_stalls import LoopStalls, overlapping
from benchmarks.client_stalls import summary as stall_summary
from benchmarks.clients import load_client, session_factory
from benchmarks.playback import RequestRecord, playback
from benchmarks.stats import pct
from benchmarks.texts import long_text

START_DELAY_S = 0.5  # from computing t0 to the first client's start: every process is waiting by then


def start_offsets(n: int, ramp_s: float) -> list[float]:
    """Client i starts `i * ramp_s / n` seconds after the level's origin (all at 0 without a ramp)."""
    return [i * ramp_s / n for i in range(n)]


async def paced_clients(
    open_session, clients: list[tuple[int, float, str]], t0: float
) -> tuple[list[RequestRecord], dict]:
    """Run `clients` = [(index, start offset s, text)], each its own session, one request each; returns
    their records and this process's loop stalls (client_stalls.LoopStalls.as_dict)."""

    async def one(i: int, offset: float, text: str) -> RequestRecord:
        await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))
        async with open_session(i) as session:
            return await session.request(text, "paced")

    with LoopStalls() as stalls:
        watch = asyncio.create_task(stalls.watch())
        try:
            records = list(await asyncio.gather(*(one(*c) for c in clients)))
        finally:
            watch.cancel()
    return records, stalls.as_dict()


def _client_part(
    base_url: str, transport: str, clients: list, t0: float, timeout_s: float, voices: tuple[str, ...] = ("default",)
):
    """One client process: its clients' records, its loop stalls and the CPU time it used."""

    async def go():
        async with load_client(base_url, timeout_s) as client:
            return await paced_clients(session_factory(transport, base_url, client, timeout_s, voices), clients, t0)

    cpu0 = time.process_time()
    records, stalls = asyncio.run(go())
    return records, stalls, time.process_time() - cpu0


def _ready() -> None:
    time.sleep(0.2)  # keeps one process from taking two of these calls: every process is up after them


def level_clients(n: int, ramp_s: float, seed: int, min_chars: int) -> list[tuple[int, float, str]]:
    """The level's clients: (index, start offset, text), texts seeded by `seed` and the index."""
    return [(i, off, long_text(seed * 100_003 + i, min_chars)) for i, off in enumerate(start_offsets(n, ramp_s))]


async def paced_level(
    base_url: str,
    transport: str,
    n: int,
    ramp_s: float,
    seed: int,
    min_chars: int,
    timeout_s: float,
    processes: int = 1,
    voices: tuple[str, ...] = ("default",),
):
    """One paced level: `(records, wall_s, info)` like loop.py's drivers; wall runs from the first
    client's start to the last stream's end."""
    clients = level_clients(n, ramp_s, seed, min_chars)
    procs = max(1, min(processes, n))
    if procs == 1:
        cpu0 = time.process_time()
        t0 = time.perf_counter() + START_DELAY_S
        async with load_client(base_url, timeout_s) as client:
            records, stalls = await paced_clients(
                session_factory(transport, base_url, client, timeout_s, voices), clients, t0
            )
        wall = time.perf_counter() - t0
        cpu = [time.process_time() - cpu0]
        parts_stalls = [(records, stalls)]
    else:
        loop = asyncio.get_running_loop()
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(procs, mp_context=ctx) as pool:
            await asyncio.gather(*(loop.run_in_executor(pool, _ready) for _ in range(procs)))
            t0 = time.perf_counter() + START_DELAY_S
            parts = await asyncio.gather(
                *(
                    loop.run_in_executor(
                        pool, _client_part, base_url, transport, clients[k::procs], t0, timeout_s, voices
                    )
                    for k in range(procs)
                )
            )
            wall = time.perf_counter() - t0
        records = [r for part, _, _ in parts for r in part]
        cpu = [c for _, _, c in parts]
        parts_stalls = [(part, stalls) for part, stalls, _ in parts]
    info = {
        "client_processes": procs,
        "client_cpu_pct": round(100 * sum(cpu) / wall, 1),
        "client_cpu_pct_max": round(100 * max(cpu) / wall, 1),
        **stream_figures(records, ramp_s),
        **client_stall_figures(parts_stalls),
    }
    return records, wall, info


def client_stall_figures(parts: list[tuple[list[RequestRecord], dict]], events: int = 40) -> dict:
    """The client processes' own stalls (client_stalls.py), how many underruns overlap a stall of the
    process that recorded them, and the first `events` underruns as [wall-clock time the audio ran out
    (s since the epoch, to match server logs), ms until the late chunk, client process]."""
    wall = time.time() - time.perf_counter()
    overlap, starved = 0, []
    for k, (records, stalls) in enumerate(parts):
        for r in records:
            if r.ok and (s := playback(r).starved):
                overlap += overlapping(s, stalls["stalls"] + stalls["gc_pauses"])
                starved += [(a, b, k) for a, b in s]
    return {
        **stall_summary([s for _, s in parts]),
        "underruns_overlapping_client_stall": overlap,
        "underrun_events": [[round(a + wall, 3), round(1000 * (b - a), 1), k] for a, b, k in sorted(starved)[:events]],
    }


def peak_in_flight(records: list[RequestRecord]) -> int:
    """Most streams in flight at once (from sending to the end, or to the last chunk of a failed one)."""
    events = []
    for r in records:
        end = r.t_done or (r.arrivals[-1][0] if r.arrivals else r.t_send)
        events += [(r.t_send, 1), (end, -1)]
    peak = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
        cur += d
        peak = max(peak, cur)
    return peak


def stream_figures(records: list[RequestRecord], ramp_s: float) -> dict:
    ok = [r for r in records if r.ok]
    held = [r for r in ok if playback(r).underruns == 0]
    voices = sorted({r.voice for r in records})
    return {
        "streams_held": len(held),
        **(
            {
                "streams_held_by_voice": {
                    v: f"{sum(r.voice == v for r in held)}/{sum(r.voice == v for r in records)}" for v in voices
                }
            }
            if len(voices) > 1
            else {}
        ),
        "peak_streams": peak_in_flight(records),
        "audio_s_per_stream_p50": round(pct([r.audio_s for r in ok], 50) or 0.0, 2),
        "ramp_s": ramp_s,
    }


def fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'tr':<4} {'N':>5} {'held':>5} {'peak':>5} {'err':>4} {'TTFA50':>7} {'TTFA99':>7} {'gap99':>7} "
        f"{'undr':>5} {'u-str':>5} {'u<1s':>5} {'u-cl':>4} {'u-sv':>4} {'u@s50':>6} {'pre99':>7} {'aud/str':>7} {'aud/s':>7} {'run':>6} {'step':>5} {'loop%':>5}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['transport']:<4} {r['level']:>5g} {r['streams_held']:>5} {r['peak_streams']:>5} "
            f"{sum(r['errors'].values()):>4} {fmt(r['ttfa_ms_p50']):>7} {fmt(r['ttfa_ms_p99']):>7} "
            f"{fmt(r['gap_ms_p99']):>7} {r['underruns']:>5} {r['underrun_requests']:>5} "
            f"{r.get('underruns_first_s', 0):>5} {r.get('underruns_overlapping_client_stall', '-'):>4} "
            f"{r.get('underruns_overlapping_server_pause', '-'):>4} {fmt((r.get('underrun_at_audio_s') or {}).get('p50')):>6} "
            f"{fmt(r['prebuffer_ms_p99']):>7} {fmt(r['audio_s_per_stream_p50']):>7} {fmt(r['audio_s_per_s'], '.2f'):>7} "
            f"{fmt(r.get('running_requests_mean'), '.1f'):>6} {fmt(r.get('step_ms_mean')):>5} "
            f"{fmt(r.get('loop_cpu_pct'), '.0f'):>5}"
        )
    print(
        "N = paced streams (one long text each, played at 1x from its first chunk); held = finished with no "
        "error and no underrun; peak = most in flight at once; TTFA/gap/pre99 in ms; undr = underruns, u-str = "
        "streams with any; u<1s = underruns within a stream's first second of audio, u-cl = underruns whose "
        "starvation overlaps a stall of the client's own event loop or collector (the client may have caused them), "
        "u-sv = those overlapping a pause the server logged (a collector pass or a late engine step, "
        "engine_patches/pauses.py); u@s50 = median seconds of "
        "audio played before an underrun; pre99 = p99 prebuffer that would have avoided them; aud/str = audio s per stream "
        "(p50); aud/s = audio s per s of the level; run = engine running requests (mean); step = engine step ms"
    )


_PAUSE = re.compile(r"(?:paused process \d+ for|engine step came) (\d+) ms .*?t=([\d.]+)\)")


def server_pause_figures(records: list[RequestRecord], log_text: str) -> dict:
    """The server's pause warnings (engine_patches/pauses.py) that fell within the level, and how many
    underruns overlap one: a pause logged at wall-clock t lasting d ms is the interval (t - d, t)."""
    wall = time.time() - time.perf_counter()
    ok = [r for r in records if r.ok]
    if not ok:
        return {}
    start = min(r.t_send for r in ok) + wall
    end = max(r.t_done or r.t_send for r in ok) + wall
    pauses = []
    for line in log_text.splitlines():
        if (m := _PAUSE.search(line)) and start <= float(m.group(2)) <= end:
            t, d = float(m.group(2)), int(m.group(1)) / 1000
            pauses.append(("collector" if "paused process" in line else "step", t - d, t))
    spans = [(a, b) for _, a, b in pauses]
    return {
        "server_collector_pauses": sum(1 for kind, _, _ in pauses if kind == "collector"),
        "server_step_gaps": sum(1 for kind, _, _ in pauses if kind == "step"),
        "server_pause_ms_max": round(1000 * max((b - a for a, b in spans), default=0.0), 1),
        "underruns_overlapping_server_pause": sum(
            overlapping([(a + wall, b + wall) for a, b in playback(r).starved], spans) for r in ok
        ),
    }
