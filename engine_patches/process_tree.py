"""The engine's processes at the start and end of their lives.

Engine cores and vLLM's data-parallel coordinator run in a process group of their own. A terminal's Ctrl-C
sends SIGINT to its whole foreground process group: in the server's, an engine core stopped at once (and
its worker, and the coordinator), cutting every stream, where the serving processes meant to let them
finish (uttera_server/serve.py); the serving processes stop the engine themselves once their streams are
done. Out of the group, a process no longer dies with a `killpg` of the server's, so each one watches its
parent and stops (SIGTERM, vLLM's own shutdown) when it is gone, as vLLM's workers do with their pipe.

`kill_process_tree`: a descendant that exits on its own while the tree is being killed is skipped, instead
of failing the shutdown.

vLLM 0.32's version lists an engine core's descendants, then asks each for its name (for a log line)
before sending SIGKILL, and only suppresses `ProcessLookupError`. A descendant that exits between the
listing and the name (a compile or resource-tracker process, often, on a loaded host) raises
`psutil.NoSuchProcess` out of `AsyncLLM.shutdown`: the rest of the tree is not killed, the client's
sockets are not closed, and the server's lifespan shutdown fails (seen in CI, 2026-12-05). Here each
process is signalled through psutil, which checks that the pid is still the same process, and a process
that is gone counts as killed.
"""

import atexit
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import psutil

log = logging.getLogger(__name__)

# The function's module and the one that imported it by name for engine shutdown (`vllm.v1.utils.shutdown`);
# vLLM's DP supervisor (not used here) imports it too.
_IMPORTERS = ("vllm.utils.system_utils", "vllm.v1.utils")


def kill_process_tree(pid: int) -> None:
    """SIGKILL every descendant of `pid`, then `pid` itself; processes already gone are skipped."""
    try:
        parent = psutil.Process(pid)
        children = parent.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for process in [*children, parent]:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process is not parent:
                log.warning("[shutdown] force killing sub process %s pid %d", process.name(), process.pid)
            process.kill()


PARENT_POLL_S = 1.0  # how often a detached engine process checks that its parent is alive


def detach() -> None:
    """In a new engine process: a process group of its own, and a SIGTERM to itself once its parent is gone."""
    os.setpgrp()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        log.warning("[shutdown] the process that started this one (pid %d) is gone: stopping", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="uttera-parent-watch", daemon=True).start()


_clean_exit: list[bool] = []  # registered in this process


def clean_exit() -> None:
    """At this process's exit, after the other `atexit` handlers: freeze the heap, then silence stderr for
    the interpreter's teardown (once per process).

    The interpreter's last collections walk every object the process holds (~630,000 with vLLM and torch
    imported) and took ~2 s in each of the engine's processes on a 2-core CPU, one after the other: the
    worker, then the engine core. The serving process gives the engine 2 s to exit (serve.py,
    ENGINE_CLOSE_S), so every shutdown ended with both force-killed, their shared memory left to the
    resource tracker; with the heap frozen both exit in ~1.5 s (vLLM does the same for its engine core on
    ROCm). What is left is freed by reference counting as the modules are torn down, and that teardown
    prints triton's nanobind "leaked ... instances/types/functions" report (~30 lines, an upstream triton
    leak, not JSON) in every process: stderr goes to /dev/null once everything else has run.

    `atexit` runs its handlers in reverse order, so this one, registered as the patches are applied, runs
    after every handler registered later."""
    if not _clean_exit:
        atexit.register(_exit_quietly)
        _clean_exit.append(True)


def _exit_quietly() -> None:
    gc.freeze()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def run_engine_core(*args: Any, **kwargs: Any) -> None:
    """`EngineCoreProc.run_engine_core`, detached first (the target vLLM's process manager starts)."""
    from vllm.v1.engine.core import EngineCoreProc

    _run_detached(EngineCoreProc, "run_engine_core", args, kwargs)


def run_coordinator(*args: Any, **kwargs: Any) -> None:
    """`DPCoordinatorProc.run_coordinator`, detached first."""
    from vllm.v1.engine.coordinator import DPCoordinatorProc

    _run_detached(DPCoordinatorProc, "run_coordinator", args, kwargs)


def _run_detached(cls: type, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """In the spawned child, the class is not patched: `name` is vLLM's own target (`uttera_<name>` where
    it is)."""
    detach()
    getattr(cls, f"uttera_{name}", getattr(cls, name))(*args, **kwargs)


def patch() -> None:
    import importlib

    from vllm.v1.engine.coordinator import DPCoordinatorProc
    from vllm.v1.engine.core import EngineCoreProc

    for name in _IMPORTERS:
        module = importlib.import_module(name)
        module.kill_process_tree = kill_process_tree  # type: ignore[attr-defined]  # the patch itself
    # The process targets, pickled by name for the spawned child: there, the originals run (this patch has
    # not been applied in a process that is only starting).
    for cls, name, target in (
        (EngineCoreProc, "run_engine_core", run_engine_core),
        (DPCoordinatorProc, "run_coordinator", run_coordinator),
    ):
        if not hasattr(cls, f"uttera_{name}"):
            setattr(cls, f"uttera_{name}", getattr(cls, name))
            setattr(cls, name, staticmethod(target))
