"""Fixtures of the deployment tests: three replicas of the real server, shared by the JSON-log, load
balancer and Prometheus tests. The Debian binaries they run against (nginx, prometheus, promtool) come
from `make test` (the Makefile's .debian-deps); see _debian.py."""

from pathlib import Path

import pytest

from _replicas import Replica, start_replicas, stop_all
from _server_process import server_tmpdir

REPLICAS = 3
HERE = Path(__file__).resolve().parent
_started: list[Replica] = []


@pytest.fixture(scope="session")
def replicas(model_dir, tmp_path_factory):
    """Three replicas with JSON logs, started in parallel. The load-balancer test kills one: tests that
    run after it use `_replicas.live(replicas)`."""
    with server_tmpdir() as tmpdir:  # the killed replica's IPC directory is removed with it
        rs = start_replicas(Path(model_dir), tmp_path_factory.mktemp("replicas"), REPLICAS, tmpdir=tmpdir)
        _started.extend(rs)
        yield rs
        stop_all(rs)


def pytest_runtest_teardown(item, nextitem):
    """Stop the replicas after the last test of this folder rather than at the end of the session: the
    tests of other folders should not share the machine with three idle engines."""
    if _started and (nextitem is None or HERE not in Path(nextitem.path).resolve().parents):
        stop_all(_started)
        _started.clear()
