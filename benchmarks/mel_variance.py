"""Is the served acoustic model's mel over-smoothed? Its spread against the teacher's, per voice and mel band.

    python -m benchmarks.mel_variance [--limit 60] [--heart-python /tmp/hibari/bin/python] [--out mel_variance.json]

Sentences: the first `--limit` lines of `training/data/train_sentences.tsv` (`python -m training.corpus`;
never the held-out set). Per voice: the served model's mel of each sentence (the mel the server's vocoder
gets, tapped as `naturalness_stages._serve` does) and the log-mel of its teacher's audio of the same phoneme
ids (`quality_teachers`: Piper for joe, hibari for heart), analysed as the vocoder's training targets are.
Over speech frames (mean log-mel > -8) of each clip: the per-band standard deviation (global variance, what
a GV postfilter would restore) and that of the frame-to-frame difference (temporal detail), averaged over
clips; printed as teacher / ours ratios for 8 bands of 10 mel bins, written to JSON with the command
(committed as run `mel_variance` of benchmarks/results/vocoders.json: `python -m benchmarks.merge_results`).
"""

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent
SPEECH = -8.0  # mean log-mel above which a frame is speech


def spreads(mels: list[np.ndarray]) -> dict:
    """Mean over clips of the per-bin std of speech frames and of their frame-to-frame differences; `mels` (T, 80)."""
    speech = [m[m.mean(1) > SPEECH] for m in mels]
    speech = [m for m in speech if len(m) > 5]
    return {
        "level": np.mean([m.std(0) for m in speech], 0),
        "delta": np.mean([np.diff(m, axis=0).std(0) for m in speech], 0),
        "mean": np.mean([m.mean(0) for m in speech], 0),
        "clips": len(speech),
    }


def teacher_mels(lines: list[str], voice: str, heart_python: str, model: Path) -> list[np.ndarray]:
    import torch

    from benchmarks.quality_teachers import TeacherCache, heart_clips, piper_clips, teacher_key
    from training import text_frontend
    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    kind = "piper" if voice == "joe" else "heart"
    cache = TeacherCache(ROOT / ".work" / "mel_variance")  # git-ignored
    ids = {line: [list(s.phoneme_ids) for s in text_frontend.prepare(line)] for line in lines}
    keys = {line: teacher_key(kind, line, ids[line], 0) for line in lines}
    todo = {k: ids[line] for line, k in keys.items() if not cache.has_clip(k)}
    if kind == "piper":
        piper_clips(cache, todo)
    else:
        heart_clips(cache, todo, heart_python, 0, cache.dir / "work")
    cache.save()
    mel_fn = MelSpectrogram(VocoderConfig.load(model / "vocoder" / "config.json"))
    with torch.inference_mode():
        return [
            mel_fn(torch.from_numpy(np.load(cache.clip_path(k)))).numpy().T for k in keys.values() if cache.has_clip(k)
        ]


def main() -> None:
    from benchmarks.naturalness_stages import _serve

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--voices", default="joe,heart")
    p.add_argument("--heart-python", default="/tmp/hibari/bin/python")
    p.add_argument("--out", type=Path, default=Path("mel_variance.json"))  # run `mel_variance` of vocoders.json
    a = p.parse_args()
    tsv = ROOT / "training" / "data" / "train_sentences.tsv"
    if not tsv.exists():
        raise SystemExit(f"{tsv} is missing: python -m training.corpus --n-train 400")
    lines = [x.split("\t")[0] for x in tsv.read_text().splitlines()[: a.limit]]
    result: dict = {"command": machine.command(), **machine.describe()}
    bands = [slice(i, i + 10) for i in range(0, 80, 10)]
    print("| voice | spread, teacher / ours | " + " | ".join(f"bins {s.start}-{s.stop - 1}" for s in bands) + " |")
    print("|" + " --- |" * (2 + len(bands)))
    for voice in a.voices.split(","):
        ours = spreads(asyncio.run(_serve(a.model, lines, voice=voice))[1])
        teacher = spreads(teacher_mels(lines, voice, a.heart_python, a.model))
        ratios = {k: (teacher[k] / ours[k]).tolist() for k in ("level", "delta")}
        result[voice] = {
            "clips": [teacher["clips"], ours["clips"]],
            "ratio": ratios,
            "mean_difference": (teacher["mean"] - ours["mean"]).tolist(),
        }
        for k, label in (("level", "std (GV)"), ("delta", "std of frame differences")):
            r = np.asarray(ratios[k])
            print(f"| {voice} | {label} | " + " | ".join(f"{r[s].mean():.2f}" for s in bands) + " |")
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
