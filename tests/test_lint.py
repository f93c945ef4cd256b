"""The tree is lint- and type-clean: `ruff check` with the rules in pyproject.toml ([tool.ruff]) reports
nothing, `ruff format --check` finds every file formatted (run `ruff format .` to fix), and `mypy` with
[tool.mypy] reports nothing."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, (
        f"ruff check found problems (fix them, or `# noqa: CODE` with a reason):\n{result.stdout}{result.stderr}"
    )


def test_ruff_format_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, (
        f"files not formatted (run `.venv/bin/ruff format .`):\n{result.stdout}{result.stderr}"
    )


def test_mypy_is_clean():
    """mypy with pyproject.toml's [tool.mypy]: uttera_server, engine_patches and vocoder strictly; tests/,
    training/ and benchmarks/ loosely. Its cache (.mypy_cache) makes a rerun take seconds; a cold run
    takes about a minute on two cores."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        "mypy found problems (fix the types; `# type: ignore[code]` with a reason only where a third-party "
        f"library's types are wrong or missing):\n{result.stdout}{result.stderr}"
    )
