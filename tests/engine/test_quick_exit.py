"""engine_patches.process_tree.quick_exit: the heap is frozen when the interpreter's last collections start."""

import subprocess
import sys

from _server_process import REPO

SCRIPT = """
import atexit, gc
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))  # runs after quick_exit's handler
from engine_patches.process_tree import quick_exit
quick_exit(); quick_exit()
junk = [[i] for i in range(1000)]
print("frozen before exit:", gc.get_freeze_count() > 0)
"""


def test_the_heap_is_frozen_at_exit_and_not_before():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["frozen before exit: False", "frozen at exit: True"], out.stdout
