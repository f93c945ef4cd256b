"""benchmarks/profile_summary.py: shares of a collapsed py-spy profile."""

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.profile_summary import frame_key, summarize

RAW = [
    "main (/a/run.py:3);step (/a/core.py:10);forward (/a/model.py:5) 6",
    "main (/a/run.py:3);step (/a/core.py:10);vocode (/a/voc.py:7) 3",
    "main (/a/run.py:3);step (/a/core.py:11);step (/a/core.py:20) 1",  # recursion counts once
    "garbage line",
    "",
]


def test_frame_key_drops_directories_and_lines():
    assert frame_key("forward (/usr/lib/x/model.py:12)") == "forward model.py"
    assert frame_key("<native>") == "<native>"


def test_shares_are_inclusive_and_self_fractions():
    total, shares = summarize(RAW)
    assert total == 10
    by = {s.function: s for s in shares}
    assert by["main run.py"].inclusive == 1.0 and by["main run.py"].self == 0.0
    assert by["step core.py"].inclusive == 1.0 and by["step core.py"].self == 0.1
    assert by["forward model.py"].inclusive == 0.6 == by["forward model.py"].self
    assert by["vocode voc.py"].inclusive == 0.3
    assert [s.function for s in shares][2] == "forward model.py"  # highest inclusive first


def test_process_frame_stays_whole():
    total, shares = summarize(['process 7:"python -c a; b";main (/a/run.py:3) 4'])
    assert total == 4
    assert {s.function for s in shares} == {'process 7:"python -c a; b"', "main run.py"}


def test_empty_profile():
    assert summarize(["", "no count here"]) == (0, [])


def test_cli_writes_json(tmp_path: Path):
    raw = tmp_path / "p.raw"
    raw.write_text("\n".join(RAW))
    out = tmp_path / "p.json"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.profile_summary", str(raw), "--top", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "10 samples" in run.stdout
    data = json.loads(out.read_text())
    assert data["samples"] == 10 and len(data["functions"]) == 2
