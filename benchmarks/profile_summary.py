"""Where a process spends its time, from a py-spy profile in collapsed-stack form (`py-spy record -f raw`).

    py-spy record -p PID -d 10 -r 250 -f raw -o engine.raw
    python -m benchmarks.profile_summary engine.raw [--top 40] [--out engine_profile.json]

Each line of the input is `frame;frame;...;frame COUNT`, outermost frame first, a frame being
`function (file:line)`; with `--subprocesses` py-spy puts a `process PID:"command line"` frame first,
kept whole here as one frame (its command line may hold `;`). Prints, per function (`function file`, line numbers dropped), the share of all
samples in which it is on the stack (inclusive) and at the top (self), highest inclusive first; a
function that recurses counts once per sample. `--out` writes the same as JSON with the input's name.
"""

import argparse
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


_PROCESS = re.compile(r'^(process \d+:"[^"]*");?')


@dataclass(frozen=True, slots=True)
class FunctionShare:
    function: str
    inclusive: float  # fraction of samples with the function anywhere on the stack
    self: float  # fraction of samples with the function at the top


def frame_key(frame: str) -> str:
    """`"f (path/to/file.py:12)"` -> `"f file.py"`; a frame without a location stays as it is."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame.strip()
    return f"{name} {where.rstrip(')').rsplit(':', 1)[0].rsplit('/', 1)[-1]}"


def summarize(lines: list[str]) -> tuple[int, list[FunctionShare]]:
    """Total samples and every function's share, highest inclusive share first."""
    inclusive: Counter[str] = Counter()
    top: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.strip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        process = _PROCESS.match(stack)
        frames = stack[process.end() :].split(";") if process else stack.split(";")
        keys = ([process.group(1)] if process else []) + [frame_key(f) for f in frames if f]
        for key in set(keys):
            inclusive[key] += n
        top[keys[-1]] += n
    if not total:
        return 0, []
    shares = [FunctionShare(k, v / total, top[k] / total) for k, v in inclusive.items()]
    shares.sort(key=lambda s: (-s.inclusive, -s.self, s.function))
    return total, shares


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("raw", type=Path, help="py-spy record -f raw output")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    total, shares = summarize(a.raw.read_text().splitlines())
    print(f"{total} samples in {a.raw}")
    print(f"{'incl %':>7} {'self %':>7}  function")
    for s in shares[: a.top]:
        print(f"{100 * s.inclusive:7.1f} {100 * s.self:7.1f}  {s.function}")
    if a.out:
        top = [{"function": s.function, "inclusive": round(s.inclusive, 4), "self": round(s.self, 4)} for s in shares]
        a.out.write_text(json.dumps({"input": a.raw.name, "samples": total, "functions": top[: a.top]}, indent=2))


if __name__ == "__main__":
    main()
