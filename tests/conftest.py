"""Shared fixtures: a tiny random-weight model directory, generated once per session (no network), and the
real `uttera serve` on it, shared by tests/server and tests/voice_agent.

`server` (session scope) runs `python -m uttera_server serve --model <tiny_model_dir> ...` on a free port
(see _server_process.py), waits until GET /health answers 200, and stops it with SIGTERM at the end
(asserting a clean exit). It starts only when a test asks for it.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so `make test` is reproducible (a red CI is never
# a new random draw); HYPOTHESIS_PROFILE=explore draws fresh examples each time.
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))


@pytest.fixture(scope="session", autouse=True)
def ipc_directory():
    """The socket files of the engines that tests run in their own process (and of its children) go to one
    IPC directory, removed at the end (vLLM removes none of them); a server a test starts makes its own
    (`_server_process.subprocess_env`)."""
    from uttera_server.runtime_dirs import ipc_dir

    with ipc_dir():
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """The engine patches watch the collector in this process once an in-process engine loads them; at the
    end pytest's own collections of the whole heap are no pause worth a warning."""
    pauses = sys.modules.get("engine_patches.pauses")
    if pauses is not None:
        pauses.stop_watching_gc()


@pytest.fixture(autouse=True)
def live_vllm_environment():
    """A test that runs the app's lifespan in this process turns vLLM's environment cache on, as a serving
    process does (app.py); the tests after it read the environment live again."""
    yield
    envs = sys.modules.get("vllm.envs")
    if envs is not None and envs._is_envs_cache_enabled():
        envs.disable_envs_cache()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from uttera_server.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny", seed=0)


@pytest.fixture(scope="session")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="session")
def server(model_dir, tmp_path_factory):
    from _server_process import start_server

    s = start_server(Path(model_dir), tmp_path_factory.mktemp("server") / "server.log")
    yield s
    s.stop_cleanly()


@pytest.fixture
def server_tmp():
    """A TMPDIR for a server of the test's own (`_server_process.server_tmpdir`), removed afterwards."""
    from _server_process import server_tmpdir

    with server_tmpdir() as path:
        yield path


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.url


@pytest.fixture(scope="session")
def ws_url(base_url) -> str:
    return base_url.replace("http://", "ws://") + "/v1/audio/speech/stream"


@pytest.fixture
async def http(base_url):
    """An httpx client of the test server."""
    import httpx

    from _server_process import timeout

    async with httpx.AsyncClient(base_url=base_url, timeout=timeout(60)) as client:
        yield client
