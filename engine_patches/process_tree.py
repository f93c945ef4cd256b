"""Patch of `vllm.utils.system_utils.kill_process_tree`: a descendant that exits on its own while the tree
is being killed is skipped, instead of failing the shutdown.

vLLM 0.32's version lists an engine core's descendants, then asks each for its name (for a log line)
before sending SIGKILL, and only suppresses `ProcessLookupError`. A descendant that exits between the
listing and the name (a compile or resource-tracker process, often, on a loaded host) raises
`psutil.NoSuchProcess` out of `AsyncLLM.shutdown`: the rest of the tree is not killed, the client's
sockets are not closed, and the server's lifespan shutdown fails (seen in CI, 2026-12-05). Here each
process is signalled through psutil, which checks that the pid is still the same process, and a process
that is gone counts as killed.
"""

import contextlib
import logging

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


def patch() -> None:
    import importlib

    for name in _IMPORTERS:
        module = importlib.import_module(name)
        module.kill_process_tree = kill_process_tree  # type: ignore[attr-defined]  # the patch itself
