"""Fold the summaries of one experiment's runs (rounds, variants, levels run apart) into one file.

    python -m benchmarks.merge_results OUT.json RUN.json [RUN.json ...]

`OUT.json` is `{"runs": {name: summary}}`, a run's name being its file name without `.json`; runs already
in `OUT.json` are kept (a name given again replaces its run), so a later round joins its experiment's file.
benchmarks/results keeps one file per experiment this way; a run's per-request records
(`*.records.json`) are refused: they stay out of git.
"""

import argparse
import json
from pathlib import Path


def merge(out: Path, runs: list[Path]) -> dict:
    merged = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    for path in runs:
        if path.name.endswith(".records.json"):
            raise SystemExit(f"{path}: per-request records stay out of benchmarks/results")
        merged["runs"][path.name.removesuffix(".json")] = json.loads(path.read_text())
    out.write_text(json.dumps(merged, indent=1) + "\n")
    return merged


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("runs", type=Path, nargs="+")
    a = p.parse_args()
    merged = merge(a.out, a.runs)
    print(f"{a.out}: {len(merged['runs'])} runs ({', '.join(merged['runs'])})")


if __name__ == "__main__":
    main()
