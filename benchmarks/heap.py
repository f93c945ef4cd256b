"""This process's memory, for the memory investigations (docs/reliability.md, "Soak"): RSS, and glibc's heap
through `mallinfo2` (glibc 2.33+; Linux only). Used by benchmarks/memprobe.py, benchmarks/vocoder_heap.py
and tests/frontend/test_espeak_leak.py. libc is loaded on first use, so importing this never fails."""

import ctypes
import functools


class MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2`: every field in bytes (`arena` heap from sbrk/arenas, `hblkhd` mmapped,
    `uordblks` in use, `fordblks` free but kept by the allocator)."""

    _fields_ = [
        (k, ctypes.c_size_t)
        for k in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    return libc


def mallinfo2() -> MallInfo2:
    """glibc's heap figures now (bytes)."""
    return _libc().mallinfo2()


def malloc_trim() -> None:
    """Hand the heap's free memory back to the system where glibc can (`malloc_trim(0)`)."""
    _libc().malloc_trim(0)


def rss_mb() -> float:
    """This process's resident set size, MiB (/proc/self/status)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
