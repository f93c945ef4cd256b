"""Where and when a benchmark ran: CPU model and cores (lscpu), GPU, load average, date, command."""

import datetime
import os
import platform
import shlex
import subprocess
import sys


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        return None


def command() -> str:
    """This run's command line as typed at the repository root: `python -m benchmarks.load ...` for a benchmark
    run as a module (how they all run), `python SCRIPT ...` otherwise."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    head = ["-m", spec.name] if spec is not None else sys.argv[:1]
    return "python " + shlex.join([*head, *sys.argv[1:]])


def describe() -> dict:
    """Hardware and conditions of this run, for the result JSON."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpu": gpu_name(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "command": command(),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
