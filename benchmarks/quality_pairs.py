"""Two `benchmarks/quality.py` runs on the same sentences, paired per sentence: B − A for each judge.

    python -m benchmarks.quality_pairs A.records.json B.records.json [--out pairs.json]

Each argument is the git-ignored `OUT.records.json` that `quality.py` writes beside its summary (per voice,
one row per sentence, keyed by the sentence's index in the sentence file). Rows are matched on (voice,
index); a sentence in one run only is left out and counted. For each voice and judge the table gives the
mean of B − A over the shared sentences, its standard error, and how many sentences B scored higher
(lower, for WER). Judges with a spread this wide across sentences need pairing: a difference of means
between two runs of 40 sentences hides most of what pairing shows.
"""

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.stats import paired_difference

# (label, row key, higher is better)
JUDGES = (
    ("DistillMOS", "ours_distillmos", True),
    ("NISQA-TTS", "ours_nisqa_tts", True),
    ("DNSMOS OVRL", "ours_dnsmos_ovrl", True),
    ("WER spoken, points", "ours_wer_spoken", False),
    ("duration ratio", "duration_ratio", None),
    ("RTF", "rtf", False),
)
SCALE = {"ours_wer_spoken": 100.0}  # WER as percentage points


def paired(a: list[float], b: list[float], higher_is_better: bool | None) -> dict[str, Any]:
    """B − A over equal-length lists: mean, standard error, and how many of B are better (None: no side)."""
    diff = paired_difference(a, b)
    better = None if higher_is_better is None else diff["higher" if higher_is_better else "lower"]
    return {"n": diff["n"], "mean": diff["mean"], "se": diff["se"], "b_better": better}


def compare(a_rows: dict[str, list[dict]], b_rows: dict[str, list[dict]]) -> dict[str, Any]:
    """{voice: {"shared", "only_a", "only_b", judges: {label: paired(...)}}} for voices in both runs."""
    out: dict[str, Any] = {}
    for voice in sorted(set(a_rows) & set(b_rows)):
        a = {r["index"]: r for r in a_rows[voice]}
        b = {r["index"]: r for r in b_rows[voice]}
        shared = sorted(set(a) & set(b))
        judges = {}
        for label, key, higher in JUDGES:
            both = [i for i in shared if a[i].get(key) is not None and b[i].get(key) is not None]
            k = SCALE.get(key, 1.0)
            judges[label] = paired([k * a[i][key] for i in both], [k * b[i][key] for i in both], higher)
        out[voice] = {"shared": len(shared), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)),
                      "judges": judges}  # fmt: skip
    return out


def table_md(result: dict[str, Any], a_name: str, b_name: str) -> str:
    labels = [label for label, _, _ in JUDGES]
    lines = [
        f"Paired per sentence, {b_name} − {a_name} (mean ± s.e.; sentences where {b_name} is better)",
        "",
        "| voice | sentences | " + " | ".join(labels) + " |",
        "| --- | --- | " + " | ".join("---" for _ in labels) + " |",
    ]
    for voice, v in result.items():
        cells = []
        for label in labels:
            j = v["judges"][label]
            cell = f"{j['mean']:+.3f} ± {j['se']:.3f}" if j["n"] else "–"
            if j["b_better"] is not None and j["n"]:
                cell += f" ({j['b_better']})"
            cells.append(cell)
        lines.append(f"| {voice} | {v['shared']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path, help="the baseline run's OUT.records.json")
    p.add_argument("b", type=Path, help="the other run's OUT.records.json")
    p.add_argument("--out", type=Path, help="also write the result as JSON")
    a = p.parse_args()
    result = compare(json.loads(a.a.read_text()), json.loads(a.b.read_text()))
    md = table_md(result, a.a.name.removesuffix(".records.json"), a.b.name.removesuffix(".records.json"))
    print(md)
    if a.out:
        doc = {"command": f"python -m benchmarks.quality_pairs {a.a} {a.b}", "voices": result, "table_md": md}
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
