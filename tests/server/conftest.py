"""`exposed`: one server with the exposure limits set (tests/_exposed_server.py), shared by test_security.py
and test_admission.py; started once, when a test asks for it, since a server start costs 30-130 s on the
2-core CI machine."""

import pytest

from _exposed_server import start_exposed


@pytest.fixture(scope="session")
def exposed(model_dir, tmp_path_factory):
    server = start_exposed(model_dir, tmp_path_factory.mktemp("exposed") / "server.log")
    yield server
    server.stop_cleanly()
