"""Binaries from Debian packages that the deployment tests run (the Makefile's .debian-deps installs them)."""

import shutil
from pathlib import Path

import pytest


def debian_binary(name: str, package: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if Path(p).exists()), None)
    if path is None:
        pytest.fail(f"{name} is not installed: apt-get install -y {package} (make test does it)")
    return path
