"""Text frontend time before a synthesis can start its first sentence, by text length.

    python -m benchmarks.frontend_first_sentence [--chars 100,300,600,1200] [--texts 20] [--rounds 3] \\
        [--out benchmarks/results/frontend_first_sentence.json]

Two ways, alternated within each round on the same seeded texts (`benchmarks.texts.long_text`, as the paced
benchmark's listeners send):
- `whole`: the whole text normalized and phonemized before the first sentence (`prepare`, how a synthesis
  started until 2026-12-04);
- `first`: only the first segment that has something to speak (`prepare_segments`, what
  `uttera_server/synthesis/sentences.py` does now; the rest is prepared while the first sentence runs).
Median milliseconds per text. This is time on the first audio's path, and GIL time in the serving process.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.texts import long_text
from uttera_server.frontend import prepare, prepare_segments

ROOT = Path(__file__).resolve().parent.parent


def first_ready(mode: str, text: str) -> float:
    t0 = time.perf_counter()
    if mode == "whole":
        prepare(text)
    else:
        next(part for part in prepare_segments(text) if part)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chars", default="100,300,600,1200")
    p.add_argument("--texts", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "frontend_first_sentence.json")
    a = p.parse_args()
    prepare("Warm up.")  # espeak-ng's data loaded before timing
    lengths = [int(c) for c in a.chars.split(",")]
    texts = {n: [long_text(a.seed + i, n) for i in range(a.texts)] for n in lengths}
    modes = ("whole", "first")
    times: dict[tuple[str, int], list[float]] = {(m, n): [] for m in modes for n in lengths}
    for round_ in range(a.rounds):
        for n in lengths:
            for text in texts[n]:
                for mode in modes if round_ % 2 == 0 else modes[::-1]:
                    times[(mode, n)].append(first_ready(mode, text))
    table = []
    print(f"{'chars':>6} {'whole ms':>9} {'first ms':>9} {'ratio':>6}")
    for n in lengths:
        whole = 1e3 * statistics.median(times[("whole", n)])
        first = 1e3 * statistics.median(times[("first", n)])
        table.append({"min_chars": n, "whole_ms": round(whole, 2), "first_ms": round(first, 2)})
        print(f"{n:>6} {whole:>9.2f} {first:>9.2f} {whole / first:>6.1f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps({"command": machine.command(), "texts": a.texts, "rounds": a.rounds, "levels": table}, indent=2)
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
