"""Killing an engine core's process tree at shutdown when one of its descendants exits meanwhile
(engine_patches/process_tree.py; CI 2026-12-05: `psutil.NoSuchProcess` out of `AsyncLLM.shutdown`)."""

import subprocess

import psutil
import pytest

import engine_patches
from engine_patches import process_tree


@pytest.fixture
def tree():
    """A parent with two live children, and a third child that exits after it was listed (the race)."""
    parent = subprocess.Popen(["sleep", "60"])
    live = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    gone = subprocess.Popen(["sleep", "60"])
    listed = [psutil.Process(gone.pid), *(psutil.Process(p.pid) for p in live)]
    gone.kill()
    gone.wait()
    yield parent, live, listed
    for p in (parent, *live):
        p.kill()
        p.wait()


def test_a_descendant_gone_between_listing_and_killing_is_skipped_and_the_rest_is_killed(tree, monkeypatch):
    parent, live, listed = tree
    monkeypatch.setattr(psutil.Process, "children", lambda self, recursive=False: listed)
    with pytest.raises(psutil.NoSuchProcess):
        listed[0].name()  # what vLLM 0.32's own version asks first, and fails on
    process_tree.kill_process_tree(parent.pid)
    for p in (*live, parent):
        assert p.wait(timeout=5) == -9


def test_a_parent_already_gone_is_a_no_op():
    p = subprocess.Popen(["true"])
    p.wait()
    process_tree.kill_process_tree(p.pid)


def test_engine_shutdown_uses_the_patched_version():
    import vllm.utils.system_utils
    import vllm.v1.utils

    engine_patches.apply()
    assert vllm.v1.utils.kill_process_tree is process_tree.kill_process_tree
    assert vllm.utils.system_utils.kill_process_tree is process_tree.kill_process_tree
