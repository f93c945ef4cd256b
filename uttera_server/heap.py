"""The serving process's heap frozen once the engine is up, so the collector's full passes stop walking it.

A serving process holds millions of objects from startup (vLLM, torch, the text frontend's tables) that
live as long as it does. Each automatic full collection walks all of them: on the H100 host each of the
four serving processes paused ~380 ms once under 1,024 paced listeners, and every stream that had just
started underran in that window (benchmarks/RESULTS.md, "The collector's pause"). `freeze()` moves what
exists after startup into the collector's permanent generation after one timed full pass (what vLLM's
`freeze_gc_heap` does to its own engine cores, less its second pass), so later full passes walk only what
was allocated since.
"""

import gc
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Frozen:
    objects: int  # moved to the permanent generation
    full_pass_before_s: float  # one full collection with nothing frozen
    full_pass_after_s: float  # the same once frozen: what an automatic full pass costs from now on


def freeze() -> Frozen:
    """Freeze the heap as it is now (see the module docstring), timing a full pass before and after."""
    callbacks = gc.callbacks[:]  # Python code in a pass lets other threads in: time the pass alone
    gc.callbacks.clear()
    try:
        start = time.perf_counter()
        gc.collect()
        before = time.perf_counter() - start
        gc.freeze()  # what survived that full pass is in the oldest generation: all of it frozen
        start = time.perf_counter()
        gc.collect()
        after = time.perf_counter() - start
    finally:
        gc.callbacks.extend(callbacks)
    return Frozen(gc.get_freeze_count(), before, after)
