"""Debug wrapper for memory investigations: runs `uttera serve` and, on each SIGUSR2, appends one line of
heap figures to PROBE_DIR/stats.jsonl. Not part of the server; used for docs/reliability.md ("Soak").

    PROBE_DIR=/tmp/probe [PROBE_FRAMES=12] python -m benchmarks.memprobe serve --model DIR [serve flags]
    kill -USR2 PID   # between soak rounds (python -m benchmarks.soak --pid PID ...)
    touch /tmp/probe/trim   # later signals also call malloc_trim(0) and record the RSS after it

Each line: RSS (MB), sys.getallocatedblocks(), glibc mallinfo2 (MB: `arena` heap from sbrk/arenas, `hblkhd`
mmapped, `uordblks` in use, `fordblks` free but kept); with PROBE_TYPES=1 also gc-tracked objects by
type. With PROBE_FRAMES the first signal starts tracemalloc (so start-up and imports are not traced) and
later ones write snapN.pickle, to compare with `Snapshot.load(b).compare_to(Snapshot.load(a), "traceback")`.
tracemalloc slows the server several-fold and its snapshots fragment the heap: read RSS from runs without
it. glibc only. Run it from the repository root, as a module (it imports benchmarks.heap; the server
is then the checkout's own, and vLLM's spawned engine core finds this module by name).
"""

import collections
import gc
import json
import os
import signal
import sys
import threading
import time
import tracemalloc

from benchmarks.heap import malloc_trim, mallinfo2, rss_mb

FRAMES = int(os.environ.get("PROBE_FRAMES", "0"))


def _heap() -> dict:
    m = mallinfo2()
    return {k: round(getattr(m, k) / 2**20, 2) for k in ("arena", "hblkhd", "uordblks", "fordblks")}


def _dump(out: str, n: list[int]) -> None:
    n[0] += 1
    gc.collect()
    rec = {
        "n": n[0],
        "t": time.time(),
        "rss_mb": rss_mb(),
        "blocks": sys.getallocatedblocks(),
        "mallinfo": _heap(),
        "threads": threading.active_count(),
    }
    if FRAMES and not tracemalloc.is_tracing():
        tracemalloc.start(FRAMES)
    elif FRAMES:
        rec["traced_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.take_snapshot().dump(f"{out}/snap{n[0]}.pickle")
    if os.path.exists(f"{out}/trim"):
        malloc_trim()
        rec["rss_mb_after_trim"] = rss_mb()
        rec["mallinfo_after_trim"] = _heap()
    if os.environ.get("PROBE_TYPES"):  # builds a list of every gc object: itself a few MB of heap
        objects = gc.get_objects()
        rec["gc_objects"] = len(objects)
        rec["top_types"] = collections.Counter(type(o).__name__ for o in objects).most_common(25)
        del objects
    with open(f"{out}/stats.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":  # not in vLLM's spawned engine core, which re-imports the main module
    out, count = os.environ["PROBE_DIR"], [0]
    signal.signal(signal.SIGUSR2, lambda signum, frame: _dump(out, count))
    from uttera_server.cli import main

    sys.exit(main(sys.argv[1:]))
