"""Measurements for the heart teacher (issue 14): phoneme mapping, intelligibility, sample rate.

    python -m training.teachers.heart_eval OUT [--judges-python /tmp/judges/bin/python] [--limit 0] [--mos 20]

On the held-out `training/eval_sentences.txt` (frontend-normalized text, one frontend sentence each):
1. phonemes: hibari's own G2P of the normalized text against our frontend's ids mapped by
   `heart_phonemes` (edit distance per reference symbol; all symbols, and phones only: no spaces,
   stress marks or punctuation);
2. WER: hibari speaking its own phonemes vs OUR mapped phonemes (same noise seed per sentence), Whisper
   tiny.en (`benchmarks/judge_whisper.py`, in the judges' interpreter), corpus WER as `training.evaluate`
   computes it (lower case, no punctuation; "spoken": digits normalized by the frontend);
3. MOS (`--mos N` sentences, the seeded sample of `benchmarks.quality.select`): (a) hibari 24 kHz,
   (b) (a) resampled to 22,050 Hz (`heart.resample`), (c) (b)'s log-mel through the joe vocoder
   (`voices/default/vocoder`, offline forward, as `benchmarks/naturalness_stages.py` does), and for scale
   (d) Piper joe on the same ids and (e) its copy synthesis; `benchmarks/judge_audio.py` (DistillMOS,
   NISQA-TTS, DNSMOS). Clips a, b, d are peak-normalized to 1.0 (the training targets' level).
Writes OUT/results.json and prints a summary. Audio stays under OUT/ (not for the repository).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from training.teachers import heart
from training.teachers.heart_phonemes import id_to_symbol, map_prompt, phones, prompt_symbols

ROOT = Path(__file__).resolve().parents[2]


def edit_distance(a: list[str] | str, b: list[str] | str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def peak(x: np.ndarray) -> np.ndarray:
    m = float(np.abs(x).max())
    return (x / m).astype(np.float32) if m > 1e-8 else x.astype(np.float32)


def corpus_wer(refs: list[str], hyps: list[str]) -> float:
    from training.evaluate import clean

    errors = words = 0
    for r, h in zip(refs, hyps, strict=True):
        rw, hw = clean(r).split(), clean(h).split()
        errors += edit_distance(rw, hw)
        words += len(rw)
    return errors / max(words, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--sentences", default=str(ROOT / "training" / "eval_sentences.txt"))
    parser.add_argument("--judges-python", default="/tmp/judges/bin/python")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--mos", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    from hibari import Hibari

    from benchmarks.quality import select
    from training import text_frontend
    from training.evaluate import spoken

    out = Path(a.out)
    (out / "clips").mkdir(parents=True, exist_ok=True)
    lines = Path(a.sentences).read_text().splitlines()
    lines = lines[: a.limit] if a.limit else lines
    teacher = heart.HeartTeacher()
    own_g2p = Hibari()
    table = id_to_symbol()
    rows: list[dict[str, Any]] = []
    manifest: list[dict[str, Any]] = []
    t_synth = audio_s = 0.0
    for n, line in enumerate(lines):
        sents = text_frontend.prepare(line)
        if len(sents) != 1:
            continue
        s = sents[0]
        mapped = map_prompt(prompt_symbols(s.phoneme_ids, table), teacher.vocab)
        own = " ".join(own_g2p.phonemize(s.normalized))
        own_ids = own_g2p.ids(own)
        row = {"n": n, "text": s.normalized, "ours_ph": mapped.hib_text, "own_ph": own}
        row["ph_edits"] = edit_distance(own, mapped.hib_text)
        row["ph_ref"] = len(own)
        own_phones, ours_phones = phones(own), phones(mapped.hib_text)
        row["phone_edits"], row["phone_ref"] = edit_distance(own_phones, ours_phones), len(own_phones)
        for who, ids in (("ours", list(mapped.hib_ids)), ("own", own_ids)):
            t0 = time.perf_counter()
            res = teacher.synthesize(ids, np.random.default_rng([a.seed, n]))
            t_synth += time.perf_counter() - t0
            audio_s += len(res.audio) / heart.SAMPLE_RATE
            path = out / "clips" / f"{who}_{n:03d}.npy"
            np.save(path, res.audio)
            manifest.append({"key": f"{who}_{n:03d}", "path": str(path), "sr": heart.SAMPLE_RATE})
        rows.append(row)
    print(f"synthesized {len(manifest)} clips, {audio_s:.0f} s audio, {audio_s / t_synth:.0f}x real time", flush=True)
    (out / "whisper_manifest.json").write_text(json.dumps(manifest))
    script = ROOT / "benchmarks" / "judge_whisper.py"
    subprocess.run([a.judges_python, str(script), out / "whisper_manifest.json", out / "whisper.json"], check=True)
    hyps = {r["key"]: r["hyp"] for r in json.loads((out / "whisper.json").read_text())}
    for r in rows:
        r["ours_hyp"], r["own_hyp"] = hyps[f"ours_{r['n']:03d}"], hyps[f"own_{r['n']:03d}"]
    refs = [r["text"] for r in rows]
    summary: dict[str, Any] = {
        "sentences": len(rows),
        "phoneme_edit_rate": sum(r["ph_edits"] for r in rows) / sum(r["ph_ref"] for r in rows),
        "phone_edit_rate": sum(r["phone_edits"] for r in rows) / sum(r["phone_ref"] for r in rows),
        "sentences_phones_identical": sum(r["phone_edits"] == 0 for r in rows),
    }
    for who in ("ours", "own"):
        summary[f"wer_{who}"] = corpus_wer(refs, [r[f"{who}_hyp"] for r in rows])
        summary[f"wer_{who}_spoken"] = corpus_wer(refs, [spoken(r[f"{who}_hyp"]) for r in rows])
    summary["wer_ratio_ours_own"] = summary["wer_ours"] / max(summary["wer_own"], 1e-9)
    print(json.dumps(summary, indent=1), flush=True)
    (out / "results.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    if a.mos:
        summary["mos"] = mos_table(a, out, lines, select(lines, a.mos, a.seed), teacher, table)
        print(json.dumps(summary["mos"], indent=1), flush=True)
        (out / "results.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


def mos_table(
    a: argparse.Namespace,
    out: Path,
    lines: list[str],
    idx: list[int],
    teacher: heart.HeartTeacher,
    table: dict[int, str],
) -> dict[str, dict[str, float]]:
    import torch
    from piper import PiperVoice

    from training import text_frontend
    from training.evaluate import teacher_audio
    from vocoder.mel import MelSpectrogram
    from vocoder.model import Vocoder

    voc = Vocoder.from_dir(ROOT / "voices" / "default" / "vocoder")
    mel_fn = MelSpectrogram(voc.config)
    model, cfg = text_frontend.teacher_paths()
    joe = PiperVoice.load(model, config_path=cfg, include_alignments=True)
    sr = voc.config.sample_rate
    manifest: list[dict[str, Any]] = []

    def put(key: str, x: np.ndarray, rate: int) -> None:
        path = out / "clips" / f"mos_{key}.npy"
        np.save(path, x.astype(np.float32))
        manifest.append({"key": key, "path": str(path), "sr": rate})

    for n in idx:
        s = text_frontend.prepare(lines[n])[0]
        mapped = map_prompt(prompt_symbols(s.phoneme_ids, table), teacher.vocab)
        res = teacher.synthesize(list(mapped.hib_ids), np.random.default_rng([a.seed, n]))
        put(f"a_{n:03d}", peak(res.audio), heart.SAMPLE_RATE)
        b = peak(heart.resample(res.audio, heart.SAMPLE_RATE, sr))
        put(f"b_{n:03d}", b, sr)
        d, frames = teacher_audio(joe, list(s.phoneme_ids))
        d = d[: frames * 256]
        put(f"d_{n:03d}", d, sr)
        with torch.inference_mode():
            for key, x in ((f"c_{n:03d}", b), (f"e_{n:03d}", d)):
                put(key, voc(mel_fn(torch.from_numpy(x.copy()))[None]).reshape(-1).numpy(), sr)
    (out / "mos_manifest.json").write_text(json.dumps(manifest))
    script = ROOT / "benchmarks" / "judge_audio.py"
    subprocess.run([a.judges_python, str(script), out / "mos_manifest.json", out / "mos.json"], check=True)
    scores = json.loads((out / "mos.json").read_text())
    table_out: dict[str, dict[str, float]] = {}
    for stage in "abcde":
        got = [r for r in scores if r["key"].startswith(stage + "_")]
        table_out[stage] = {
            k: float(np.mean([r[k] for r in got])) for k in ("distillmos", "nisqa_tts", "dnsmos_ovrl", "dnsmos_sig")
        }
        table_out[stage]["clips"] = len(got)
    return table_out


if __name__ == "__main__":
    main()
