"""Server test fixtures: the real `uttera serve` as a subprocess on a free port.

`server` (session scope) runs `python -m uttera_server serve --model <tiny_model_dir> ...`, where
`tiny_model_dir` comes from tests/conftest.py, waits until GET /health answers 200, and stops it with
SIGTERM at the end (asserting a clean exit).
"""

from pathlib import Path

import httpx
import pytest

from _server_process import start_server, timeout


@pytest.fixture(scope="session")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="session")
def server(model_dir, tmp_path_factory):
    s = start_server(Path(model_dir), tmp_path_factory.mktemp("server") / "server.log")
    yield s
    s.stop_cleanly()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.url


@pytest.fixture(scope="session")
def ws_url(base_url) -> str:
    return base_url.replace("http://", "ws://") + "/v1/audio/speech/stream"


@pytest.fixture
async def http(base_url):
    """An httpx client of the test server."""
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout(60)) as client:
        yield client
