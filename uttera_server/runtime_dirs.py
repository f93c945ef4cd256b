"""Temporary directories a server makes for its processes, and removes, with their variables, when it stops.

- The IPC directory (`VLLM_RPC_BASE_PATH`): the socket files of every ZMQ channel between the server's
  processes, vLLM's (client <-> engine core, engine core <-> worker) and uttera's PCM sinks
  (pcm_receiver.py). vLLM removes none of its socket files, and a process that is killed cannot: each
  start left 7 or more in the temp directory (thousands on a host that runs the tests).
- The Prometheus multiprocess directory (`PROMETHEUS_MULTIPROC_DIR`) that the serving processes of
  `--api-servers N` share (frontends.py, metrics.py).

Each is set before the processes that use it start (they inherit the variable). An operator's own setting
of either variable is used as it is and left alone.
"""

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

log = logging.getLogger(__name__)

IPC_DIR_ENV = "VLLM_RPC_BASE_PATH"
PROMETHEUS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


# A socket file's path is at most 107 bytes (sockaddr_un.sun_path); vLLM names its files "<dir>/<uuid4>".
_SOCKET_PATH_MAX = 107
_SOCKET_NAME_LEN = 37


@contextlib.contextmanager
def _private_dir(env: str, prefix: str, max_len: int | None = None) -> Iterator[None]:
    if os.environ.get(env):
        yield
        return
    path = tempfile.mkdtemp(prefix=prefix)
    if max_len is not None and len(path.encode()) > max_len:
        os.rmdir(path)  # socket paths under it would be too long: the files go to the temp directory, as before
        log.warning("the temp directory's path is too long for a private IPC directory: %s", path)
        yield
        return
    os.environ[env] = path
    try:
        yield
    finally:
        os.environ.pop(env, None)
        shutil.rmtree(path, ignore_errors=True)


def ipc_dir() -> contextlib.AbstractContextManager[None]:
    """The server's IPC directory, for the whole life of its processes."""
    return _private_dir(IPC_DIR_ENV, "uttera-ipc-", max_len=_SOCKET_PATH_MAX - _SOCKET_NAME_LEN)


def metrics_dir() -> contextlib.AbstractContextManager[None]:
    """The serving processes' shared Prometheus directory."""
    return _private_dir(PROMETHEUS_DIR_ENV, "uttera-metrics-")


def ipc_base() -> str:
    """Where this process's socket files go: the IPC directory, else the temp directory."""
    return os.environ.get(IPC_DIR_ENV) or tempfile.gettempdir()
