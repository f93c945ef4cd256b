"""Soak: mixed traffic against a running server for a while, sampling the serving process's RSS and open
file descriptors; reports their slope. Seeded: the same --seed draws the same sequence of actions.

    python -m benchmarks.soak --url http://127.0.0.1:8000 --pid PID [--duration-s 60] [--long]
        [--concurrency 4] [--api-key KEY] [--seed 0] [--out benchmarks/results/soak.json]

--long sets the duration to 20 minutes (the issue's soak). Actions, drawn per worker iteration:
    http        POST /v1/audio/speech, read to the end
    http_drop   POST, read the first chunk, then disconnect
    ws          one WebSocket context, text + end, read to `done`
    ws_cancel   one context, cancelled after its first audio
    bad         a malformed body (400 expected)
Prints one table (outcomes by action; RSS and fds first/last/max and slope per minute) and writes the
summary as JSON (no per-request records). RSS is /proc/PID/status VmRSS; the engine core is another
process and not sampled.

The bound on growth (docs/reliability.md, "The bound, and why"): fds back to their count before traffic
once it stops; and, after a warm-up of at least 10 minutes, the glibc heap *in use* of the serving process
(run it under benchmarks/memprobe.py, SIGUSR2 between windows) grows by under 0.5 KB per request over
>= 2,000 requests, no faster in a later window than in an earlier one. RSS alone is not the test: the heap
glibc keeps after frees moves it by MBs a minute with no leak. The summary's RSS per minute, second-half
slope and KB per request (RSS against completed requests) help read a run.
"""

import argparse
import asyncio
import collections
import json
import os
import random
import time
from pathlib import Path

import httpx
import websockets

ACTIONS = {"http": 4, "http_drop": 2, "ws": 3, "ws_cancel": 2, "bad": 1}
WORDS = (
    "the quick brown fox jumps over a lazy dog while seven sailors sing about wind and salt under a pale morning sky"
).split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))).capitalize() + "."


def _sample(pid: int) -> tuple[float, int]:
    """(RSS in MB, open fds) of `pid`."""
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def _slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt, mv = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 60 * sum((t - mt) * (v - mv) for t, v in points) / var if var else 0.0


async def _act(action: str, text: str, http: httpx.AsyncClient, ws_url: str, headers: dict) -> str:
    body = {"model": "uttera", "input": text, "response_format": "pcm"}
    if action in ("http", "http_drop"):
        async with http.stream("POST", "/v1/audio/speech", json=body) as r:
            if r.status_code != 200:
                return f"http_{r.status_code}"
            async for _ in r.aiter_raw():
                if action == "http_drop":
                    return "dropped"
        return "ok"
    if action == "bad":
        r = await http.post(
            "/v1/audio/speech",
            content=b'{"model": "uttera", "speed": ' + b"9" * 5000 + b"}",
            headers={"content-type": "application/json"},
        )
        return f"http_{r.status_code}"
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps({"type": "text", "text": text, "context_id": "c"}))
        await ws.send(json.dumps({"type": "end", "context_id": "c"}))
        async for message in ws:
            if isinstance(message, bytes):
                if action == "ws_cancel":
                    await ws.send(json.dumps({"type": "cancel", "context_id": "c"}))
                    action = "ws_cancelling"
                continue
            kind = json.loads(message)["type"]
            if kind in ("done", "cancelled", "error"):
                return kind
    return "closed"


async def run(args) -> dict:
    rng = random.Random(args.seed)
    headers = {"authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    ws_url = args.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    names, weights = list(ACTIONS), list(ACTIONS.values())
    plan = ((rng.choices(names, weights)[0], _text(rng)) for _ in iter(int, 1))  # one seeded sequence, shared
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    samples: list[tuple[float, float, int]] = []
    done_at: list[int] = []  # requests completed at each sample
    started = time.monotonic()
    deadline = started + args.duration_s
    cursor = plan

    async def worker(http: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            action, text = next(cursor)
            try:
                outcome = await asyncio.wait_for(_act(action, text, http, ws_url, headers), args.request_timeout_s)
            except Exception as e:  # counted, not raised: the soak goes on
                outcome = f"exc_{type(e).__name__}"
            outcomes[action][outcome] += 1

    async def sampler() -> None:
        while time.monotonic() < deadline + args.settle_s:
            rss, fds = _sample(args.pid)
            samples.append((time.monotonic() - started, rss, fds))
            done_at.append(sum(sum(c.values()) for c in outcomes.values()))
            await asyncio.sleep(args.sample_s)  # the sampling period

    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=args.request_timeout_s) as http:
        await asyncio.gather(sampler(), *(worker(http) for _ in range(args.concurrency)))
    warm = [s for s in samples if s[0] >= args.duration_s / 5 and s[0] <= args.duration_s]
    late = [s for s in warm if s[0] >= args.duration_s / 2]
    per_minute = [next(s for s in samples if s[0] >= 60 * m) for m in range(int(samples[-1][0] // 60) + 1)]
    by_request = {s[0]: n for s, n in zip(samples, done_at)}

    def kb_per_request(window) -> float:  # RSS against requests completed: what a per-request leak adds
        return 1024 / 60 * _slope_per_min([(by_request[t], r) for t, r, _ in window])

    return {
        "command": "python -m benchmarks.soak "
        + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("pid", "out", "api_key", "long")
        ),
        "seed": args.seed,
        "duration_s": args.duration_s,
        "concurrency": args.concurrency,
        "requests": sum(sum(c.values()) for c in outcomes.values()),
        "outcomes": {a: dict(c) for a, c in outcomes.items()},
        "rss_mb": {
            "first": samples[0][1],
            "last": samples[-1][1],
            "max": max(s[1] for s in samples),
            "slope_mb_per_min_after_warmup": _slope_per_min([(t, r) for t, r, _ in warm]),
            "slope_mb_per_min_second_half": _slope_per_min([(t, r) for t, r, _ in late]),
            "kb_per_request_after_warmup": kb_per_request(warm),
            "kb_per_request_second_half": kb_per_request(late),
            "per_minute": [round(r, 1) for _, r, _ in per_minute],
        },
        "fds": {
            "first": samples[0][2],
            "last": samples[-1][2],
            "max": max(s[2] for s in samples),
            "slope_per_min_after_warmup": _slope_per_min([(t, f) for t, _, f in warm]),
            "per_minute": [f for _, _, f in per_minute],
        },
    }


def _print(summary: dict) -> None:
    print(f"{'action':<10} {'outcomes'}")
    for action, counts in sorted(summary["outcomes"].items()):
        print(f"{action:<10} {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}")
    print(f"{'':<10} {'first':>8} {'last':>8} {'max':>8} {'slope/min (after warm-up)':>26}")
    r, f = summary["rss_mb"], summary["fds"]
    print(
        f"{'RSS MB':<10} {r['first']:8.1f} {r['last']:8.1f} {r['max']:8.1f} {r['slope_mb_per_min_after_warmup']:26.2f}"
    )
    print(f"{'fds':<10} {f['first']:8d} {f['last']:8d} {f['max']:8d} {f['slope_per_min_after_warmup']:26.2f}")
    print(
        f"RSS per request after warm-up: {r['kb_per_request_after_warmup']:.2f} KB, over the second half: "
        f"{r['kb_per_request_second_half']:.2f} KB"
    )
    print(
        f"RSS slope over the second half: {r['slope_mb_per_min_second_half']:.2f} MB/min; per minute: "
        + " ".join(f"{x:.0f}" for x in r["per_minute"])
    )
    print(f"{summary['requests']} requests in {summary['duration_s']:.0f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--pid", type=int, required=True, help="the serving process (uttera serve)")
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--long", action="store_true", help="20 minutes")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-s", type=float, default=1.0)
    p.add_argument("--settle-s", type=float, default=5.0, help="keep sampling this long after traffic stops")
    p.add_argument("--request-timeout-s", type=float, default=120.0)
    p.add_argument("--api-key")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/soak.json"))
    args = p.parse_args()
    if args.long:
        args.duration_s = 20 * 60.0
    summary = asyncio.run(run(args))
    _print(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
