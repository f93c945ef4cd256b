"""Closed-loop and open-loop drivers, independent of what a request is.

A *session factory* is an async context manager factory `open_session(i)` whose session has
`async request(text, kind) -> RequestRecord` (an HTTP client, a WebSocket connection, an in-process
pipeline). Texts come from seeded `TextMix`es, so a driver with the same seed sends the same texts.

closed loop: `concurrency` workers, each sends requests back to back for `duration_s` (its own
    TextMix seeded from `seed` and the worker index), then finishes the request in flight.
open loop: Poisson arrivals at `rate` requests/s for `duration_s` (seeded schedule); each arrival
    opens its own session. `lateness_ms_p99` checks that the generator kept up with its schedule.

Both return `(records, wall_s, info)`: wall_s runs from the start until the last request finished;
info holds driver figures (closed loop: `audio_s_per_s_steady`, stats.steady_audio_rate; open loop:
`arrivals`, `lateness_ms_p99`).
"""

import asyncio
import random
import time

from benchmarks.stats import pct, steady_audio_rate
from benchmarks.texts import TextMix


async def closed_loop(
    open_session, concurrency: int, duration_s: float, seed: int, weights=None, workers=None, end: float | None = None
):
    """`workers`: the worker indices to run here (default all of range(concurrency)); a worker's texts
    depend only on its index, so C workers split over several processes send what one process would.
    `end`: a shared `time.perf_counter()` deadline (the clock is system-wide on Linux), else now +
    duration_s."""
    t0 = time.perf_counter()
    end = t0 + duration_s if end is None else end
    records = []

    async def worker(i: int):
        mix = TextMix(seed * 1000 + i, weights)
        async with open_session(i) as session:
            while time.perf_counter() < end:
                kind, text = mix.draw()
                records.append(await session.request(text, kind))

    await asyncio.gather(*(worker(i) for i in (range(concurrency) if workers is None else workers)))
    return records, time.perf_counter() - t0, {"audio_s_per_s_steady": steady_audio_rate(records, t0, end)}


def poisson_schedule(rate: float, duration_s: float, seed: int) -> list[float]:
    """Arrival offsets in seconds, exponential gaps of mean 1/rate, within [0, duration_s)."""
    rng = random.Random(seed)
    out, t = [], rng.expovariate(rate)
    while t < duration_s:
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def open_loop(open_session, rate: float, duration_s: float, seed: int, weights=None):
    schedule = poisson_schedule(rate, duration_s, seed)
    mix = TextMix(seed, weights)
    texts = [mix.draw() for _ in schedule]
    records, lateness = [], []
    t0 = time.perf_counter()

    async def one(i: int, at: float):
        kind, text = texts[i]
        async with open_session(i) as session:
            lateness.append(time.perf_counter() - (t0 + at))
            records.append(await session.request(text, kind))

    tasks = []
    for i, at in enumerate(schedule):
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, at)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    return records, wall, {"arrivals": len(schedule), "lateness_ms_p99": round(1000 * (pct(lateness, 99) or 0.0), 3)}
