"""Fixtures of the deployment tests: three replicas of the real server (shared by the JSON-log, load
balancer and Prometheus tests), and the Debian binaries they run against (`make test` installs nginx
and prometheus; see the Makefile's .debian-deps)."""

from pathlib import Path

import pytest

from _replicas import start_replicas, stop_all

REPLICAS = 3


@pytest.fixture(scope="session")
def replicas(model_dir, tmp_path_factory):
    """Three replicas with JSON logs, started in parallel. The load-balancer test kills one: tests that
    run after it use `_replicas.live(replicas)`."""
    rs = start_replicas(Path(model_dir), tmp_path_factory.mktemp("replicas"), REPLICAS)
    yield rs
    stop_all(rs)
