"""engine_patches.process_tree.clean_exit: at exit, once the other handlers have run, the heap is frozen
and the interpreter's teardown prints nothing to stderr."""

import subprocess
import sys

from _server_process import REPO

SCRIPT = """
import atexit, gc, sys
# registered before clean_exit, so it runs after it: where the interpreter's teardown stands
atexit.register(lambda: (print("frozen at exit:", gc.get_freeze_count() > 0), print("teardown noise", file=sys.stderr)))
from engine_patches.process_tree import clean_exit
clean_exit(); clean_exit()
atexit.register(lambda: print("a later handler still speaks", file=sys.stderr))
junk = [[i] for i in range(1000)]
print("frozen before exit:", gc.get_freeze_count() > 0)
print("stderr before exit", file=sys.stderr)
"""


def test_the_heap_is_frozen_and_stderr_silenced_only_at_the_end_of_exit():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["frozen before exit: False", "frozen at exit: True"], out.stdout
    assert out.stderr.splitlines() == ["stderr before exit", "a later handler still speaks"], out.stderr
