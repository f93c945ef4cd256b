"""`python -m uttera_server` whose vocoder raises once the file named by $UTTERA_TEST_VOCODER_FAULT exists
(test_vocoder_fault_server.py): a fault in the serving process's vocoder worker, injected into a real server."""

import os
import sys

from vocoder.streaming import StreamingVocoder

_submit = StreamingVocoder.submit


def _faulty_submit(self, *args, **kwargs):
    if os.path.exists(os.environ["UTTERA_TEST_VOCODER_FAULT"]):
        raise RuntimeError("injected vocoder fault")
    return _submit(self, *args, **kwargs)


if __name__ == "__main__":  # not in vLLM's spawned engine core, which re-imports the main module
    StreamingVocoder.submit = _faulty_submit  # type: ignore[method-assign]  # the fault injected
    from uttera_server.cli import main

    sys.exit(main(sys.argv[1:]))
