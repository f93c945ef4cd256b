"""Quality and speed of a voice through the RUNNING server, against the Piper teacher, judged by Whisper.

    python -m benchmarks.quality [--model voices/default | --url http://127.0.0.1:8000] [--seed 0]
                                 [--limit N] [--out benchmarks/results/quality.json]

Phase 1, synthesis (timed): starts `python -m uttera_server serve --model DIR` on a free port (or uses
`--url`), waits for GET /health 200, sends one warm-up request, then every sentence of the held-out set
(`training/eval_sentences.txt`, raw text as written; the server normalizes it) as `POST /v1/audio/speech`
with `response_format=pcm`, one request at a time. TTFA = request sent -> first body byte of audio;
total = request sent -> last byte; RTF = total / audio duration (so it includes the vocoder and HTTP).
`/metrics` is scraped before and after each request: the delta of
`uttera_engine_requests_finished_total{reason="length"}` marks the sentences whose engine request hit
the length cap (runaways), `reason="stop"` the normal ends. The server we started is stopped before
phase 2, so Whisper does not share the CPU with it.

Phase 2, judging (not timed): Whisper tiny.en (`training.evaluate.Judge`, CPU int8, beam 1) transcribes
our audio and the teacher's audio of the same frontend text (Piper `en_US-joe-medium` on the frontend's
phoneme ids, `training.evaluate.teacher_audio`; transcripts and durations cached in
`--cache-dir/teacher.json`, git-ignored). WER as in `training/evaluate.py`: lower-case, punctuation
removed, against the frontend's normalized text; "spoken" also normalizes Whisper's digits to words.

Truncation (our definition): a sentence is truncated when our audio is shorter than 0.7 x the
teacher's, or the last word of the reference is not among the last 3 words of our (spoken-normalized)
transcript. Whisper also drops or mishears final words of good audio, so the same transcript test is
reported for the teacher, and `truncated_not_teacher` counts ours where the teacher's transcript
does have the last word.

`--seed` seeds the `--limit` sample (N sentences drawn without replacement, kept in file order) and
CTranslate2's sampling (Whisper's temperature fallback). Prints one table; writes JSON (summary, targets,
per-sentence rows, machine, load average) and our audio as WAVs under `--cache-dir/ours/`.
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

ROOT = Path(__file__).resolve().parent.parent

LENGTH = 'uttera_engine_requests_finished_total{reason="length"}'
STOP = 'uttera_engine_requests_finished_total{reason="stop"}'
SHORT_RATIO = 0.7  # truncation: ours shorter than this x the teacher's duration
LAST_WORDS = 3  # truncation: the reference's last word must be among the transcript's last 3 words
HOP = 256  # teacher frames (Piper alignment) -> samples


def select(lines: list[str], limit: int, seed: int) -> list[int]:
    """Indices of the sentences to run: all, or a seeded sample of `limit`, in file order."""
    idx = list(range(len(lines)))
    if limit and limit < len(lines):
        idx = sorted(random.Random(seed).sample(idx, limit))
    return idx


def speak(client, text: str) -> dict:
    """One chunked `POST /v1/audio/speech` (pcm): {"pcm": bytes, "sr", "ttfa_s", "total_s"}."""
    body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
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


def synthesize_all(base_url: str, texts: list[str], timeout_s: float) -> tuple[list[dict], dict]:
    """Phase 1: every text through the server, one at a time; per-request /metrics deltas and load."""
    import httpx

    from benchmarks.machine import loadavg
    from benchmarks.server import parse_metrics

    def metrics(client) -> dict:
        r = client.get("/metrics")
        r.raise_for_status()
        return parse_metrics(r.text)

    out, loads = [], []
    with httpx.Client(base_url=base_url, timeout=timeout_s) as client:
        speak(client, "Warm up, please.")
        first = before = metrics(client)
        t0 = time.monotonic()
        for n, text in enumerate(texts):
            rec = speak(client, text)
            after = metrics(client)
            rec["length_ends"] = after.get(LENGTH, 0) - before.get(LENGTH, 0)
            rec["stop_ends"] = after.get(STOP, 0) - before.get(STOP, 0)
            before = after
            loads.append(loadavg()[0])
            rec["audio_s"] = len(rec["pcm"]) / 2 / rec["sr"]
            out.append(rec)
            print(
                f"[synth {n + 1}/{len(texts)}] ttfa {1000 * rec['ttfa_s']:.0f} ms, "
                f"rtf {rec['total_s'] / max(rec['audio_s'], 1e-9):.3f}, {rec['audio_s']:.2f} s audio",
                flush=True,
            )
        wall = time.monotonic() - t0
    phase = {
        "wall_s": round(wall, 1),
        "load1_mean": round(statistics.fmean(loads), 2),
        "load1_max": max(loads),
        "length_ends": after.get(LENGTH, 0) - first.get(LENGTH, 0),
        "stop_ends": after.get(STOP, 0) - first.get(STOP, 0),
        "metrics_have_finish_counter": LENGTH in after or STOP in after,
    }
    return out, phase


class Teacher:
    """Piper teacher transcripts + durations per frontend text, cached as JSON (key as training/evaluate.py)."""

    def __init__(self, cache_path: Path, judge):
        self.path, self.judge = cache_path, judge
        self.voice = None  # a PiperVoice, loaded on first use
        self.cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}

    def get(self, line: str, sents) -> dict:
        key = f"{line}|{[s.phoneme_ids for s in sents]}"
        if key not in self.cache:
            import numpy as np

            from training import text_frontend
            from training.evaluate import teacher_audio

            voice = self._voice(text_frontend)
            sr = voice.config.sample_rate
            pieces = [teacher_audio(voice, list(s.phoneme_ids)) for s in sents]
            audio = np.concatenate([p[0] for p in pieces])
            frames = sum(p[1] for p in pieces)
            self.cache[key] = {"hyp": self.judge.transcribe(audio, sr), "frames": frames, "audio_s": frames * HOP / sr}
        return self.cache[key]

    def _voice(self, text_frontend):
        """The teacher's PiperVoice, loaded on first use."""
        if self.voice is None:
            from piper import PiperVoice

            m, c = text_frontend.teacher_paths()
            self.voice = PiperVoice.load(m, config_path=c, include_alignments=True)
        return self.voice

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.cache, indent=1))


def last_word_kept(ref: str, hyp: str) -> bool:
    """Is the reference's last word among the last LAST_WORDS words of the (spoken-normalized) hypothesis?"""
    from training.evaluate import clean, spoken

    ref_words, hyp_words = clean(ref).split(), clean(spoken(hyp)).split()
    return not ref_words or ref_words[-1] in hyp_words[-LAST_WORDS:]


def judge_all(lines: list[str], recs: list[dict], a, audio_dir: Path) -> list[dict]:
    """Phase 2: Whisper on ours and the teacher's audio; one row per sentence."""
    import ctranslate2
    import numpy as np

    from training import text_frontend
    from training.evaluate import Judge, spoken, wav_bytes, wer

    ctranslate2.set_random_seed(a.seed)
    judge = Judge(a.threads)
    teacher = Teacher(Path(a.cache_dir) / "teacher.json", judge)
    audio_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n, (line, rec) in enumerate(zip(lines, recs)):
        sents = text_frontend.prepare(line)
        ref = " ".join(s.normalized for s in sents)
        t = teacher.get(line, sents)
        pcm = np.frombuffer(rec["pcm"], np.int16)
        peak = int(np.abs(pcm.astype(np.int32)).max(initial=0))
        clipped = int(np.count_nonzero((pcm >= 32767) | (pcm <= -32767)))  # at full scale: clipped
        ours = pcm.astype(np.float32) / 32767.0
        (audio_dir / f"{rec['index']:03d}.wav").write_bytes(wav_bytes(ours, rec["sr"]))
        ours = ours / max(float(np.abs(ours).max()), 1e-8) * 0.95  # as training/evaluate.py
        hyp = judge.transcribe(ours, rec["sr"])
        ratio = rec["audio_s"] / max(t["audio_s"], 1e-9)
        row = {
            "index": rec["index"],
            "input": line,
            "text": ref,
            "ours_hyp": hyp,
            "teacher_hyp": t["hyp"],
            "ours_wer": wer(ref, hyp),
            "teacher_wer": wer(ref, t["hyp"]),
            "ours_wer_spoken": wer(ref, spoken(hyp)),
            "teacher_wer_spoken": wer(ref, spoken(t["hyp"])),
            "ours_audio_s": round(rec["audio_s"], 3),
            "teacher_audio_s": round(t["audio_s"], 3),
            "duration_ratio": ratio,
            "ttfa_ms": 1000 * rec["ttfa_s"],
            "total_s": rec["total_s"],
            "rtf": rec["total_s"] / max(rec["audio_s"], 1e-9),
            "clipped_samples": clipped,
            "peak_dbfs": 20 * float(np.log10(max(peak, 1) / 32767.0)),
            "length_ends": rec["length_ends"],
            "stop_ends": rec["stop_ends"],
            "ours_last_word": last_word_kept(ref, hyp),
            "teacher_last_word": last_word_kept(ref, t["hyp"]),
        }
        row["truncated"] = ratio < SHORT_RATIO or not row["ours_last_word"]
        rows.append(row)
        print(
            f"[judge {n + 1}/{len(lines)}] wer ours={row['ours_wer']:.2f} teacher={row['teacher_wer']:.2f} "
            f"dur={ratio:.2f} | {hyp}",
            flush=True,
        )
        if n % 20 == 19:
            teacher.save()
    teacher.save()
    return rows


def summarize(rows: list[dict], phase: dict) -> dict:
    import jiwer

    from benchmarks.stats import pct
    from training.evaluate import clean, spoken

    def corpus(field: str, norm=lambda h: h) -> float:
        return float(jiwer.wer([clean(r["text"]) for r in rows], [clean(norm(r[field])) or "-" for r in rows]))

    ratios = [r["duration_ratio"] for r in rows]
    s: dict = {"sentences": len(rows)}
    for v, norm in (("", lambda h: h), ("_spoken", spoken)):
        s[f"ours_wer{v}"] = corpus("ours_hyp", norm)
        s[f"teacher_wer{v}"] = corpus("teacher_hyp", norm)
        s[f"wer_ratio{v}"] = s[f"ours_wer{v}"] / max(s[f"teacher_wer{v}"], 1e-9)
        s[f"ours_worst_wer{v}"] = max(r[f"ours_wer{v}"] for r in rows)
        s[f"teacher_worst_wer{v}"] = max(r[f"teacher_wer{v}"] for r in rows)
        s[f"ours_over_0.5{v}"] = sum(r[f"ours_wer{v}"] > 0.5 for r in rows)
        s[f"teacher_over_0.5{v}"] = sum(r[f"teacher_wer{v}"] > 0.5 for r in rows)
        s[f"ours_over_0.5_teacher_not{v}"] = sum(r[f"ours_wer{v}"] > 0.5 >= r[f"teacher_wer{v}"] for r in rows)
    s.update(
        {
            "duration_ratio_min": min(ratios),
            "duration_ratio_mean": statistics.fmean(ratios),
            "duration_ratio_max": max(ratios),
            "duration_outside_30pct": sum(not 0.7 <= x <= 1.3 for x in ratios),
            "runaways": int(phase["length_ends"]),
            "engine_stop_ends": int(phase["stop_ends"]),
            "runaway_sentences": sum(r["length_ends"] > 0 for r in rows),
            "truncated": sum(r["truncated"] for r in rows),
            "truncated_short": sum(r["duration_ratio"] < SHORT_RATIO for r in rows),
            "ours_last_word_missing": sum(not r["ours_last_word"] for r in rows),
            "teacher_last_word_missing": sum(not r["teacher_last_word"] for r in rows),
            "truncated_not_teacher": sum(
                r["truncated"] and (r["duration_ratio"] < SHORT_RATIO or r["teacher_last_word"]) for r in rows
            ),
            "rtf_mean": statistics.fmean(r["rtf"] for r in rows),
            "rtf_p95": pct([r["rtf"] for r in rows], 95),
            "ttfa_ms_p50": pct([r["ttfa_ms"] for r in rows], 50),
            "ttfa_ms_p95": pct([r["ttfa_ms"] for r in rows], 95),
            "audio_s_total": sum(r["ours_audio_s"] for r in rows),
            "clipped_clips": sum(r.get("clipped_samples", 0) > 0 for r in rows),
            "clipped_samples": sum(r.get("clipped_samples", 0) for r in rows),
            "peak_dbfs_max": max(r.get("peak_dbfs", float("-inf")) for r in rows),
        }
    )
    return s


def table(s: dict) -> tuple[str, dict]:
    """The result table (markdown) and the issue's targets, each with met/not met."""
    f1 = lambda x: f"{100 * x:.1f} %"  # noqa: E731
    met = {
        "wer_ratio_le_1.5": s["wer_ratio"] <= 1.5,
        "wer_ratio_le_1.2_aim": s["wer_ratio"] <= 1.2,
        "wer_ratio_spoken_le_1.5": s["wer_ratio_spoken"] <= 1.5,
        "wer_ratio_spoken_le_1.2_aim": s["wer_ratio_spoken"] <= 1.2,
        "no_sentence_over_0.5": s["ours_over_0.5"] == 0,
        "durations_within_30pct": s["duration_outside_30pct"] == 0,
        "zero_runaways": s["runaways"] == 0,
        "rtf_le_0.5": s["rtf_mean"] <= 0.5 and s["rtf_p95"] <= 0.5,
        "zero_clipped_samples": s["clipped_samples"] == 0,
    }
    ok = lambda k: "met" if met[k] else "NOT met"  # noqa: E731
    rows = [
        (
            "corpus WER",
            f1(s["ours_wer"]),
            f1(s["teacher_wer"]),
            f"ratio {s['wer_ratio']:.2f}: ≤ 1.5× {ok('wer_ratio_le_1.5')}; aim 1.2× {ok('wer_ratio_le_1.2_aim')}",
        ),
        (
            "corpus WER, spoken",
            f1(s["ours_wer_spoken"]),
            f1(s["teacher_wer_spoken"]),
            f"ratio {s['wer_ratio_spoken']:.2f}: ≤ 1.5× {ok('wer_ratio_spoken_le_1.5')}; "
            f"aim 1.2× {ok('wer_ratio_spoken_le_1.2_aim')}",
        ),
        (
            "worst sentence WER (spoken)",
            f"{s['ours_worst_wer']:.2f} ({s['ours_worst_wer_spoken']:.2f})",
            f"{s['teacher_worst_wer']:.2f} ({s['teacher_worst_wer_spoken']:.2f})",
            "",
        ),
        (
            "sentences WER > 0.5 (spoken)",
            f"{s['ours_over_0.5']} ({s['ours_over_0.5_spoken']})",
            f"{s['teacher_over_0.5']} ({s['teacher_over_0.5_spoken']})",
            f"0: {ok('no_sentence_over_0.5')}",
        ),
        (
            "… ours > 0.5 where teacher ≤ 0.5 (spoken)",
            f"{s['ours_over_0.5_teacher_not']} ({s['ours_over_0.5_teacher_not_spoken']})",
            "–",
            "",
        ),
        (
            "duration ratio ours/teacher min / mean / max",
            f"{s['duration_ratio_min']:.2f} / {s['duration_ratio_mean']:.2f} / {s['duration_ratio_max']:.2f}",
            "–",
            "",
        ),
        ("… outside ±30 %", str(s["duration_outside_30pct"]), "–", f"0: {ok('durations_within_30pct')}"),
        (
            "runaways (engine ends by length / by stop)",
            f"{s['runaways']} / {s['engine_stop_ends']}",
            "–",
            f"0: {ok('zero_runaways')}",
        ),
        (
            "truncated (short < 0.7× / last word missing)",
            f"{s['truncated']} ({s['truncated_short']} / {s['ours_last_word_missing']})",
            f"– (– / {s['teacher_last_word_missing']})",
            "",
        ),
        ("… truncated where the teacher's transcript has the last word", str(s["truncated_not_teacher"]), "–", ""),
        (
            "single-stream RTF mean / p95 (HTTP, incl. vocoder)",
            f"{s['rtf_mean']:.3f} / {s['rtf_p95']:.3f}",
            "–",
            f"≤ 0.5: {ok('rtf_le_0.5')}",
        ),
        ("TTFA p50 / p95", f"{s['ttfa_ms_p50']:.0f} / {s['ttfa_ms_p95']:.0f} ms", "–", ""),
        (
            "clipped clips / samples (at full scale); peak",
            f"{s['clipped_clips']} / {s['clipped_samples']}; {s['peak_dbfs_max']:.1f} dBFS",
            "–",
            f"0: {ok('zero_clipped_samples')}",
        ),
    ]
    lines = ["| metric | ours | teacher | target |", "| --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines), met


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default", help="voice directory to serve")
    p.add_argument("--url", help="use a running server at this base URL instead of starting one")
    p.add_argument("--server-args", default="", help="extra `uttera serve` flags, one string")
    p.add_argument("--sentences", type=Path, default=ROOT / "training" / "eval_sentences.txt")
    p.add_argument("--limit", type=int, default=0, help="a seeded sample of N sentences (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="Whisper CPU threads")
    p.add_argument("--timeout-s", type=float, default=300.0, help="per request")
    p.add_argument(
        "--cache-dir", type=Path, default=ROOT / ".work" / "quality", help="teacher cache + our WAVs (git-ignored)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality.json")
    a = p.parse_args()
    # SIGTERM (kill PID) unwinds like Ctrl-C, so the server we started is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from benchmarks import machine
    from benchmarks.server import started_server, wait_healthy

    import importlib.util

    missing = [m for m in ("ctranslate2", "faster_whisper", "jiwer", "piper") if importlib.util.find_spec(m) is None]
    if missing:  # before the synthesis phase, not after it
        raise SystemExit(
            f"quality.py judges with Whisper and the teacher; this interpreter lacks {missing} "
            "(see training/README.md for the judging environment)"
        )
    info = machine.describe()
    all_lines = [ln.strip() for ln in a.sentences.read_text().splitlines() if ln.strip()]
    idx = select(all_lines, a.limit, a.seed)
    lines = [all_lines[i] for i in idx]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if a.url:
        wait_healthy(a.url.rstrip("/"))
        recs, phase = synthesize_all(a.url.rstrip("/"), lines, a.timeout_s)
    else:
        with started_server(a.model, a.server_args, log_path=a.out.with_suffix(".server.log")) as base:
            recs, phase = synthesize_all(base, lines, a.timeout_s)
    phase["loadavg_end"] = machine.loadavg()
    for i, rec in zip(idx, recs):
        rec["index"] = i
    rows = judge_all(lines, recs, a, a.cache_dir / "ours")
    summary = summarize(rows, phase)
    text, met = table(summary)
    print(text)
    print(
        f"\n{len(rows)} sentences; synthesis phase {phase['wall_s']} s, load1 mean {phase['load1_mean']} "
        f"max {phase['load1_max']}; {info['cpu']}, {info['cores']} cores"
    )
    a.out.write_text(
        json.dumps(
            {
                "machine": info,
                "model": str(a.url or a.model),
                "seed": a.seed,
                "limit": a.limit,
                "synthesis_phase": phase,
                "summary": summary,
                "targets_met": met,
                "table_md": text,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {os.path.relpath(a.out)}")


if __name__ == "__main__":
    main()
