"""`TrainLog`: a trainer's `RUN/log.jsonl`, one JSON object per line, also printed (the GPU scripts tail it).

Step metrics are summed between log lines and written as their means every `every` steps, with the
step rate since the previous line; other records (validation, a run's end) go out as they are.
"""

import json
import time
from pathlib import Path
from typing import Any


class TrainLog:
    def __init__(self, path: Path, every: int):
        self.every = every
        self._file = path.open("a")
        self._sums: dict[str, float] = {}
        self._since = time.time()

    def step(self, step: int, metrics: dict[str, float], **fields: Any) -> None:
        """Add one step's `metrics`; on every `every`-th step write their means after `step` and `fields`."""
        for key, value in metrics.items():
            self._sums[key] = self._sums.get(key, 0.0) + value
        if step % self.every:
            return
        now = time.time()
        self.write(
            {
                "step": step,
                **fields,
                "steps_per_s": round(self.every / (now - self._since), 2),
                **{key: total / self.every for key, total in self._sums.items()},
            }
        )
        self._sums, self._since = {}, now

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record)
        self._file.write(line + "\n")
        self._file.flush()
        print(line, flush=True)

    def close(self) -> None:
        self._file.close()
