"""Time to first byte of POST /v1/audio/speech per response_format, one stream at a time, against a running
server. Seeded: the same texts, formats and order on every run. Prints one table and writes JSON to
benchmarks/results/format_ttfb.json, as the STYLE's benchmarks do.

    python -m benchmarks.format_ttfb --url http://127.0.0.1:8000 --rounds 20

TTFB: from sending the request to the first body byte of audio (for codecs: the first encoded frame,
container header included) as the client reads it; `ratio` is the format's median over pcm's.
"""

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import httpx

FORMATS = ["pcm", "wav", "mp3", "opus", "flac", "aac", "mulaw"]
TEXTS = [
    "Hello there, how can I help you today?",
    "The quick brown fox jumps over the lazy dog.",
    "Streaming speech starts before the sentence is finished.",
    "Please hold while I look that up.",
]


def ttfb(client: httpx.Client, text: str, fmt: str) -> float:
    started = time.perf_counter()
    with client.stream(
        "POST", "/v1/audio/speech", json={"model": "uttera", "input": text, "response_format": fmt}
    ) as r:
        r.raise_for_status()
        first = None
        for _ in r.iter_raw():
            first = first or time.perf_counter()
    assert first is not None, "no body"
    return 1000 * (first - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    results: dict[str, list[float]] = {f: [] for f in FORMATS}
    with httpx.Client(base_url=args.url, timeout=60) as client:
        for f in FORMATS:  # warm-up
            ttfb(client, TEXTS[0], f)
        for _ in range(args.rounds):
            order = FORMATS[:]
            rng.shuffle(order)  # interleaved so drift hits every format alike
            text = rng.choice(TEXTS)
            for f in order:
                results[f].append(ttfb(client, text, f))
    pcm = statistics.median(results["pcm"])
    rows = [
        {
            "format": f,
            "median_ms": round(statistics.median(v), 1),
            "p90_ms": round(statistics.quantiles(v, n=10)[-1], 1),
            "ratio": round(statistics.median(v) / pcm, 3),
        }
        for f, v in results.items()
    ]
    print(f"{'format':8} {'median ms':>10} {'p90 ms':>8} {'x pcm':>7}")
    for r in rows:
        print(f"{r['format']:8} {r['median_ms']:10.1f} {r['p90_ms']:8.1f} {r['ratio']:7.3f}")
    out = Path(__file__).resolve().parent / "results" / "format_ttfb.json"
    out.write_text(
        json.dumps(
            {
                "command": f"python -m benchmarks.format_ttfb --url URL --rounds {args.rounds} --seed {args.seed}",
                "rounds": args.rounds,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
