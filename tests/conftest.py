"""Shared fixtures: a tiny random-weight model directory, generated once per session (no network)."""

import os

import pytest

TIMEOUT_FACTOR = float(os.environ.get("UTTERA_TESTS_TIMEOUT_FACTOR", "1"))


def scaled(seconds: float) -> float:
    """A timeout scaled for slow machines (set UTTERA_TESTS_TIMEOUT_FACTOR)."""
    return seconds * TIMEOUT_FACTOR


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from uttera_server.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny", seed=0)
