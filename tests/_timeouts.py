"""Test timeouts scaled for slow machines: set UTTERA_TESTS_TIMEOUT_FACTOR (e.g. 3 on a loaded host).

Importable by name from any test (pyproject's pytest `pythonpath` puts tests/ on sys.path)."""

import os

TIMEOUT_FACTOR = float(os.environ.get("UTTERA_TESTS_TIMEOUT_FACTOR", "1"))


def scaled(seconds: float) -> float:
    """`seconds` scaled by UTTERA_TESTS_TIMEOUT_FACTOR."""
    return seconds * TIMEOUT_FACTOR
