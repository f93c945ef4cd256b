"""The tree is lint-clean: `ruff check` with the rules in pyproject.toml ([tool.ruff]) reports nothing, and
`ruff format --check` finds every file formatted (run `ruff format .` to fix)."""

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
