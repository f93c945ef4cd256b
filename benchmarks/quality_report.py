"""quality.py's per-voice summary, the issue's targets (issue 14, item 5) and the result table.

Input: one voice's per-sentence rows (quality.py's `row`: transcripts, per-sentence WER, durations, MOS of
ours and the teacher's clip, timings, clipping, engine ends). Rows whose teacher clip failed
(`teacher_error`) are counted and left out of every comparison.
"""

import statistics

from benchmarks.quality_judging import MOS_FIELDS, corpus_wer

SHORT_RATIO = 0.7  # truncation: ours shorter than this x the teacher's duration
OVER, TEACHER_OK = 0.5, 0.2  # a sentence fails when ours > 0.5 WER where the teacher's <= 0.2
DURATION_TOL = 0.25
TARGETS = {
    "distillmos_ge_teacher_minus_0.15": "DistillMOS ≥ teacher − 0.15",
    "dnsmos_ovrl_ge_teacher_minus_0.25": "DNSMOS OVRL ≥ teacher − 0.25",
    "wer_le_1.15x_teacher": "WER ≤ 1.15× teacher",
    "no_sentence_over_0.5_where_teacher_le_0.2": "no sentence > 0.5 WER where the teacher's ≤ 0.2",
    "durations_within_25pct": "durations within ±25 %",
    "zero_runaways": "zero runaways",
    "zero_clipped_samples": "zero clipped samples",
}


def pct(xs: list[float], q: float) -> float:
    from benchmarks.stats import pct as _pct

    v = _pct(xs, q)
    return float("nan") if v is None else v


def mean(xs: list) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else float("nan")


def summarize(rows: list[dict]) -> dict:
    """One voice's summary (see the module docstring); `rows` non-empty."""
    from training.evaluate import spoken

    ok = [r for r in rows if not r.get("teacher_error")]
    s: dict = {"sentences": len(rows), "teacher_failed": len(rows) - len(ok)}
    if not ok:
        return s
    refs = [r["text"] for r in ok]
    for v, norm in (("", lambda h: h), ("_spoken", spoken)):
        s[f"ours_wer{v}"] = corpus_wer(refs, [norm(r["ours_hyp"]) for r in ok])
        s[f"teacher_wer{v}"] = corpus_wer(refs, [norm(r["teacher_hyp"]) for r in ok])
        s[f"wer_ratio{v}"] = s[f"ours_wer{v}"] / max(s[f"teacher_wer{v}"], 1e-9)
        s[f"ours_over_0.5{v}"] = sum(r[f"ours_wer{v}"] > OVER for r in ok)
        s[f"teacher_over_0.5{v}"] = sum(r[f"teacher_wer{v}"] > OVER for r in ok)
        s[f"over_0.5_teacher_le_0.2{v}"] = sum(
            r[f"ours_wer{v}"] > OVER and r[f"teacher_wer{v}"] <= TEACHER_OK for r in ok
        )
    for m in MOS_FIELDS:
        s[f"ours_{m}"] = mean([r.get(f"ours_{m}") for r in ok])
        s[f"teacher_{m}"] = mean([r.get(f"teacher_{m}") for r in ok])
    ratios = [r["duration_ratio"] for r in ok]
    s.update(
        {
            "duration_ratio_min": min(ratios),
            "duration_ratio_mean": statistics.fmean(ratios),
            "duration_ratio_max": max(ratios),
            "duration_outside_25pct": sum(not 1 - DURATION_TOL <= x <= 1 + DURATION_TOL for x in ratios),
            "runaways": sum(r["length_ends"] for r in rows),
            "runaway_sentences": sum(r["length_ends"] > 0 for r in rows),
            "engine_stop_ends": sum(r["stop_ends"] for r in rows),
            "truncated": sum(r["duration_ratio"] < SHORT_RATIO or not r["ours_last_word"] for r in ok),
            "teacher_last_word_missing": sum(not r["teacher_last_word"] for r in ok),
            "rtf_mean": statistics.fmean(r["rtf"] for r in rows),
            "rtf_p95": pct([r["rtf"] for r in rows], 95),
            "ttfa_ms_p50": pct([r["ttfa_ms"] for r in rows], 50),
            "ttfa_ms_p95": pct([r["ttfa_ms"] for r in rows], 95),
            "audio_s_total": sum(r["ours_audio_s"] for r in rows),
            "clipped_clips": sum(r["clipped_samples"] > 0 for r in rows),
            "clipped_samples": sum(r["clipped_samples"] for r in rows),
            "peak_dbfs_max": max(r["peak_dbfs"] for r in rows),
        }
    )
    return s


def targets(s: dict) -> dict[str, bool]:
    """The issue's targets (`TARGETS`), each met or not, from one voice's summary."""
    if "ours_wer" not in s:  # no sentence had a teacher clip
        return {k: False for k in TARGETS}
    return {
        "distillmos_ge_teacher_minus_0.15": s["ours_distillmos"] >= s["teacher_distillmos"] - 0.15,
        "dnsmos_ovrl_ge_teacher_minus_0.25": s["ours_dnsmos_ovrl"] >= s["teacher_dnsmos_ovrl"] - 0.25,
        "wer_le_1.15x_teacher": s["ours_wer"] <= 1.15 * s["teacher_wer"],
        "no_sentence_over_0.5_where_teacher_le_0.2": s["over_0.5_teacher_le_0.2"] == 0,
        "durations_within_25pct": s["duration_outside_25pct"] == 0,
        "zero_runaways": s["runaways"] == 0,
        "zero_clipped_samples": s["clipped_samples"] == 0,
    }


def table(voice: str, teacher: str, s: dict, met: dict[str, bool]) -> str:
    """One voice's markdown table: metric | ours | teacher | target (met / NOT met)."""
    head = (
        f"### voice `{voice}` (teacher: {teacher}; {s['sentences']} sentences, {s['teacher_failed']} without teacher)"
    )
    if "ours_wer" not in s:
        return f"{head}\n\nno sentence has a teacher clip: nothing to compare"
    f1 = lambda x: f"{100 * x:.1f} %"  # noqa: E731
    ok = lambda k: f"{TARGETS[k]}: {'met' if met[k] else 'NOT met'}"  # noqa: E731
    rows = [
        ("corpus WER", f1(s["ours_wer"]), f1(s["teacher_wer"]), f"ratio {s['wer_ratio']:.2f}; {ok('wer_le_1.15x_teacher')}"),
        ("corpus WER, spoken", f1(s["ours_wer_spoken"]), f1(s["teacher_wer_spoken"]), f"ratio {s['wer_ratio_spoken']:.2f}"),
        ("sentences WER > 0.5 (spoken)", f"{s['ours_over_0.5']} ({s['ours_over_0.5_spoken']})",
         f"{s['teacher_over_0.5']} ({s['teacher_over_0.5_spoken']})", ""),
        ("… ours > 0.5 where teacher ≤ 0.2 (spoken)",
         f"{s['over_0.5_teacher_le_0.2']} ({s['over_0.5_teacher_le_0.2_spoken']})", "–",
         ok("no_sentence_over_0.5_where_teacher_le_0.2")),
        ("DistillMOS", f"{s['ours_distillmos']:.2f}", f"{s['teacher_distillmos']:.2f}", ok("distillmos_ge_teacher_minus_0.15")),
        ("NISQA-TTS", f"{s['ours_nisqa_tts']:.2f}", f"{s['teacher_nisqa_tts']:.2f}", ""),
        ("DNSMOS OVRL / SIG / BAK",
         f"{s['ours_dnsmos_ovrl']:.2f} / {s['ours_dnsmos_sig']:.2f} / {s['ours_dnsmos_bak']:.2f}",
         f"{s['teacher_dnsmos_ovrl']:.2f} / {s['teacher_dnsmos_sig']:.2f} / {s['teacher_dnsmos_bak']:.2f}",
         ok("dnsmos_ovrl_ge_teacher_minus_0.25")),
        ("duration ratio ours/teacher min / mean / max",
         f"{s['duration_ratio_min']:.2f} / {s['duration_ratio_mean']:.2f} / {s['duration_ratio_max']:.2f}", "–",
         f"{s['duration_outside_25pct']} outside; {ok('durations_within_25pct')}"),
        ("runaways (engine ends by length / by stop)", f"{s['runaways']} / {s['engine_stop_ends']}", "–", ok("zero_runaways")),
        ("truncated (short < 0.7× or last word missing)", str(s["truncated"]),
         f"– (last word missing {s['teacher_last_word_missing']})", ""),
        ("clipped clips / samples (full scale); peak",
         f"{s['clipped_clips']} / {s['clipped_samples']}; {s['peak_dbfs_max']:.1f} dBFS", "–", ok("zero_clipped_samples")),
        ("single-stream RTF mean / p95 (HTTP, incl. vocoder)", f"{s['rtf_mean']:.3f} / {s['rtf_p95']:.3f}", "–", ""),
        ("TTFA p50 / p95", f"{s['ttfa_ms_p50']:.0f} / {s['ttfa_ms_p95']:.0f} ms", "–", ""),
    ]  # fmt: skip
    lines = [head, "", "| metric | ours | teacher | target |", "| --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines)
