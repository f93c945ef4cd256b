"""Vocoders side by side on the served acoustic model's mel: paired judges per clip against the first one.

    python -m benchmarks.vocoder_ab --judges-python /tmp/judges/bin/python \\
        --vocoder shipped=voices/default/vocoder --vocoder new=PATH [--vocoder universal=hifigan-universal] \\
        [--voices joe,heart] [--limit 40] [--seed 0] [--model [NAME=]voices/default ...] [--mel served|teacher] \\
        [--pair NAME,REFERENCE ...] [--out benchmarks/results/X.json]

A vocoder is `NAME=SOURCE[:dc=K][:nyquist=K][:gain_db=G][:highpass=HZ][:sharpen=K][:jitter=S]`: SOURCE is a
directory with `config.json` + `model.safetensors` (the voice's streaming vocoder, `vocoder.model.Vocoder`, or
a HiFi-GAN saved by `HifiGan.save`, told apart by the config's keys) or the name of a packaged HiFi-GAN
(`hifigan-universal`); `:dc=K` / `:nyquist=K` multiply the streaming vocoder's DC / Nyquist bin by K in every
frame (0 is `zero_dc_bin` / `zero_nyquist_bin`, 1 keeps the bin whatever the config says), `:gain_db=G` scales
the output by G dB, `:sharpen=K` adds K times the mel's temporal high-pass (itself minus its [1/4, 1/2, 1/4]
smoothing along time) on speech frames (mean log-mel > -8) before the vocoder (an offline test of the
frame-to-frame detail the acoustic model loses, RESULTS.md "Is the acoustic model's mel over-smoothed?"),
`:jitter=S` adds Gaussian noise of standard deviation S (log units, seeded) to speech frames' mel,
`:highpass=HZ` runs the output through a causal 2nd-order Butterworth high-pass (the sub-audible wander the DC
bin carries, without touching the bin), `:seam=A:step=R` pulls each decode step's first frames toward the
previous step's last (`Seamed`: the model's mel moves less than its teacher's inside a step and more across
steps). The edge bins' section of benchmarks/RESULTS.md is `--vocoder none=voices/default/vocoder:nyquist=1
--vocoder nyquist=voices/default/vocoder --vocoder dc+nyquist=voices/default/vocoder:dc=0`. The first one is
the reference of the paired differences; `--pair NAME,REFERENCE` adds others.

Several acoustic models: `--model NAME=DIR` more than once. Every model's mel goes through every vocoder,
each clip named `MODEL/VOCODER` (`r4/shipped`, `r8/universal`), the first such pair the reference; `--pair`
takes these names, so one run tells whether two models' gap depends on the vocoder (paired per sentence).

Sentences: the seeded held-out sample of `naturalness_stages.py` (`quality.select`). Per voice, the served
model's own mel of each sentence (the mel the server's vocoder got, tapped as `naturalness_stages._serve`
does) goes through every vocoder offline (offline equals streamed for each: tests/vocoder). `--mel teacher`:
copy synthesis instead, the log-mel of the teacher's own audio (stage a of `naturalness_stages.py`; joe only,
its teacher is Piper at the vocoders' rate), which tells a vocoder's own loss from what it makes of the
acoustic model's mel. Per clip: the
energy shares and levels of `band_shares` and the judges of `judge_audio.py` (DistillMOS, NISQA-TTS, DNSMOS)
in their own interpreter, all clips in one pass. Prints a table; writes JSON (command, means per voice and
vocoder, paired per-clip differences against the first vocoder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import machine
from benchmarks.stats import paired_difference
from benchmarks.mel_variance import SPEECH
from benchmarks.naturalness_stages import _serve, judge

ROOT = Path(__file__).resolve().parent.parent
JUDGES = ("distillmos", "nisqa_tts", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak")
FIGURES = ("below_20hz", "above_10k5", "rms_dbfs", "peak_dbfs", *JUDGES)


def band_shares(x: np.ndarray, sr: int) -> dict:
    """Share of the clip's energy below 20 Hz and above 10.5 kHz; RMS and peak in dBFS."""
    power = np.abs(np.fft.rfft(x.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / sr)
    total = max(float(power.sum()), 1e-30)
    return {
        "below_20hz": float(power[freqs < 20].sum() / total),
        "above_10k5": float(power[freqs > 10500].sum() / total),
        "rms_dbfs": float(10 * np.log10(max(float(np.mean(x.astype(np.float64) ** 2)), 1e-20))),
        "peak_dbfs": float(20 * np.log10(max(float(np.abs(x).max()), 1e-10))),
    }


def speech_mask(mel):
    """1 on the speech frames of `mel` (B, 80, T) (mean log-mel above `mel_variance.SPEECH`), else 0; (B, 1, T)."""
    return (mel.mean(1, keepdim=True) > SPEECH).to(mel.dtype)


class Sharpened:
    """A vocoder fed the mel plus `k` times its temporal high-pass on speech frames (`:sharpen=K`)."""

    def __init__(self, net, k: float):
        self.net, self.k, self.config = net, k, net.config

    def __call__(self, mel):
        import torch
        import torch.nn.functional as F

        x = mel.transpose(0, 1).reshape(-1, 1, mel.shape[-1])  # (80 * B, 1, T)
        smooth = F.conv1d(F.pad(x, (1, 1), mode="replicate"), x.new_tensor([[[0.25, 0.5, 0.25]]]))
        y = (x + self.k * (x - smooth)).reshape(mel.shape[1], mel.shape[0], -1).transpose(0, 1)
        return self.net(torch.lerp(mel, y, speech_mask(mel)))


class Jittered:
    """A vocoder fed the mel plus Gaussian noise of standard deviation `std` on speech frames (`:jitter=S`,
    seeded per call): whether texture the acoustic model does not make, added blindly, moves the judges."""

    def __init__(self, net, std: float):
        self.net, self.std, self.config = net, std, net.config

    def __call__(self, mel):
        import torch

        noise = torch.randn(mel.shape, generator=torch.Generator().manual_seed(0), dtype=mel.dtype)
        return self.net(mel + self.std * noise * speech_mask(mel))


class Seamed:
    """A vocoder fed the mel with each decode step's start pulled toward the previous step's end
    (`:seam=A:step=R`): for the step starting at frame s, the jump d = y[s] - y[s - 1] is taken off its frames
    j = 0..R-1 times A * (1 - j / R), y being the already corrected mel. Causal (a step's frames depend on
    earlier frames only), so a server could do the same as frames stream, without waiting for the next step."""

    def __init__(self, net, amount: float, step: int):
        if step < 2 or amount < 0:
            raise ValueError(f":seam needs :step=R >= 2 (frames per decode step) and A >= 0, got {step}, {amount}")
        self.net, self.amount, self.step, self.config = net, amount, step, net.config

    def correct(self, mel):
        """`(B, 80, T)` mel -> the same with its step seams pulled together."""
        import torch

        y, r = mel.clone(), self.step
        fade = self.amount * (1 - torch.arange(r, dtype=mel.dtype) / r)
        for s in range(r, y.shape[-1], r):
            n = min(r, y.shape[-1] - s)
            y[..., s : s + n] -= (y[..., s] - y[..., s - 1]).unsqueeze(-1) * fade[:n]
        return y

    def __call__(self, mel):
        return self.net(self.correct(mel))


class HighPassed:
    """A vocoder's output through a causal 2nd-order Butterworth high-pass at `hz` (`:highpass=HZ`; RBJ's
    biquad, as a stream would run it with its state carried from chunk to chunk)."""

    def __init__(self, net, hz: float):
        import math

        self.net, self.config = net, net.config
        w = 2 * math.pi * hz / net.config.sample_rate
        cos, alpha = math.cos(w), math.sin(w) / math.sqrt(2)  # Q = 1/sqrt(2)
        a0 = 1 + alpha
        self.b = ((1 + cos) / 2 / a0, -(1 + cos) / a0, (1 + cos) / 2 / a0)
        self.a = (-2 * cos / a0, (1 - alpha) / a0)

    def __call__(self, mel):
        import torch

        x = self.net(mel)
        rows = []
        (b0, b1, b2), (a1, a2) = self.b, self.a
        for row in x.reshape(-1, x.shape[-1]).double().tolist():
            x1 = x2 = y1 = y2 = 0.0
            out = []
            for v in row:
                y = b0 * v + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2
                x2, x1, y2, y1 = x1, v, y1, y
                out.append(y)
            rows.append(out)
        return torch.tensor(rows, dtype=x.dtype).reshape(x.shape)


class Scaled:
    """A vocoder's output times a fixed gain (`:gain_db=G`), keeping its `config`."""

    def __init__(self, net, gain_db: float):
        self.net, self.gain, self.config = net, 10 ** (gain_db / 20), net.config

    def __call__(self, mel):
        return self.gain * self.net(mel)


def load_vocoder(spec: str):
    """`spec` (see the module docstring) as an eval-mode CPU callable mapping `(B, 80, T)` log-mel to audio."""
    from vocoder import hifigan
    from vocoder.model import Vocoder

    source, *options = spec.split(":")
    opts = {}
    for o in options:
        key, _, value = o.partition("=")
        if key not in ("dc", "nyquist", "gain_db", "sharpen", "jitter", "seam", "step", "highpass") or not value:
            raise ValueError(
                f"{spec}: options are :dc=K, :nyquist=K, :gain_db=G, :sharpen=K, :jitter=S, :highpass=HZ "
                f"and :seam=A:step=R, got {o!r}"
            )
        opts[key] = float(value)
    if ("seam" in opts) != ("step" in opts):
        raise ValueError(
            f"{spec}: :seam=A needs :step=R (the model's frames per decode step), and :step only goes with it"
        )
    net: Vocoder | hifigan.HifiGan
    if source in hifigan.CHECKPOINTS:
        net = hifigan.HifiGan.from_package(source)
    elif "upsample_rates" in json.loads((Path(source) / "config.json").read_text()):
        net = hifigan.HifiGan.from_dir(source)
    else:
        net = Vocoder.from_dir(source).eval()
    bins = {0: opts.get("dc"), -1: opts.get("nyquist")}
    if any(k is not None for k in bins.values()):
        if not isinstance(net, Vocoder):
            raise ValueError(
                f"{spec}: :dc and :nyquist scale the streaming vocoder's edge bins; {source} is a HiFi-GAN"
            )
        keep = net.head.keep if net.head.keep is not None else net.head.window.new_ones(net.head.n_fft // 2 + 1, 1)
        for b, k in bins.items():
            if k is not None:
                keep[b] = k
        net.head.keep = keep
    out: Any = Scaled(net, opts["gain_db"]) if "gain_db" in opts else net
    out = HighPassed(out, opts["highpass"]) if "highpass" in opts else out
    out = Sharpened(out, opts["sharpen"]) if "sharpen" in opts else out
    out = Jittered(out, opts["jitter"]) if "jitter" in opts else out
    return Seamed(out, opts["seam"], int(opts["step"])) if "seam" in opts else out


def paired(rows_by_name: Mapping[str, Mapping[int, dict]], name: str, reference: str) -> dict:
    """Per judge: mean and standard error of `name − reference` over the clips both have, and how many are higher."""
    out = {}
    for j in JUDGES:
        clips = list(rows_by_name[reference])
        diff = paired_difference(
            [rows_by_name[reference][i][j] for i in clips], [rows_by_name[name][i][j] for i in clips]
        )
        out[j] = {k: diff[k] for k in ("mean", "se", "higher", "n")}
    return out


def clip_name(model: str, vocoder: str) -> str:
    """A clip's name: the vocoder's, or `MODEL/VOCODER` when several models are compared (model named)."""
    return f"{model}/{vocoder}" if model else vocoder


def compare(
    mels: Mapping[str, Mapping[str, list]],
    indices: list[int],
    vocoders: Mapping[str, Callable],
    sr: int,
    judges_python: str,
    pairs: list[tuple[str, str]] | None = None,
) -> tuple[dict, list[str]]:
    """Every voice's mels (per model: `{voice: {model: [mel, ...]}}`, model "" when there is one) through
    every vocoder, judged in one pass; returns (summary, markdown table lines)."""
    import torch

    work = Path(tempfile.mkdtemp(prefix="vocoder_ab_"))
    manifest: list[dict] = []
    rows: list[dict] = []
    names = [clip_name(model, vocoder) for model in next(iter(mels.values()), {}) for vocoder in vocoders]
    with torch.inference_mode():
        for voice, by_model in mels.items():
            for model, voice_mels in by_model.items():
                for n, mel in enumerate(voice_mels):
                    for vocoder, net in vocoders.items():
                        name = clip_name(model, vocoder)
                        x = net(mel[None].float())[0].numpy().astype(np.float32)
                        key = f"{voice}|{name}|{indices[n]}"
                        path = work / f"{len(manifest):04d}.npy"
                        np.save(path, x)
                        manifest.append({"key": key, "path": str(path), "sr": sr})
                        rows.append(
                            {"key": key, "voice": voice, "name": name, "index": indices[n], **band_shares(x, sr)}
                        )
    print(f"judging {len(manifest)} clips (in {work})", flush=True)
    scores = {s["key"]: s for s in judge(judges_python, manifest, work)}
    for row in rows:
        row.update({j: scores[row["key"]].get(j) for j in JUDGES})

    summary: dict = {}
    head = "| voice | vocoder | energy < 20 Hz | energy > 10.5 kHz | RMS / peak dBFS | " + " | ".join(JUDGES) + " |"
    table = [head, "|" + " --- |" * (5 + len(JUDGES))]
    for voice in mels:
        by = {name: {r["index"]: r for r in rows if r["voice"] == voice and r["name"] == name} for name in names}
        for name, rs in by.items():
            s = {f: float(np.mean([r[f] for r in rs.values()])) for f in FIGURES}
            summary[f"{voice}|{name}"] = s
            table.append(
                f"| {voice} | {name} | {100 * s['below_20hz']:.1f} % | {100 * s['above_10k5']:.1f} % | "
                f"{s['rms_dbfs']:.1f} / {s['peak_dbfs']:.1f} | " + " | ".join(f"{s[j]:.2f}" for j in JUDGES) + " |"
            )
        for name, reference in [(n, names[0]) for n in names[1:]] + (pairs or []):
            diffs = paired(by, name, reference)
            summary[f"{voice}|{name} - {reference}"] = diffs
            cells = " | ".join(
                f"{diffs[j]['mean']:+.2f} ± {diffs[j]['se']:.2f} ({diffs[j]['higher']}/{diffs[j]['n']})" for j in JUDGES
            )
            table.append(f"| {voice} | {name} − {reference} (± s.e.; clips higher) | | | | {cells} |")
    return summary, table


def sample(sentences: Path, limit: int, seed: int) -> tuple[list[int], list[str]]:
    """The seeded held-out sample (`quality.select`): its line indices and lines."""
    from benchmarks.quality import select

    all_lines = [x for x in sentences.read_text().splitlines() if x.strip()]
    idx = select(all_lines, limit, seed)
    return idx, [all_lines[i] for i in idx]


def served_mels(
    models: Mapping[str, Path], sentences: Path, limit: int, seed: int, voices: list[str]
) -> tuple[list[int], dict]:
    """The seeded held-out sample's indices and, per voice and model, the served model's mel `(80, T)` of
    each sentence."""
    import torch

    idx, lines = sample(sentences, limit, seed)
    mels = {
        v: {name: [torch.from_numpy(m.T.copy()) for m in asyncio.run(_serve(model, lines, voice=v))[1]]
            for name, model in models.items()}
        for v in voices
    }  # fmt: skip
    return idx, mels


def teacher_mels(model: Path, sentences: Path, limit: int, seed: int) -> tuple[list[int], dict]:
    """Copy synthesis: the same sample's indices and joe's teacher audio of each sentence analysed to log-mel
    `(80, T)` with the voice's vocoder's analysis (`naturalness_stages.teacher_clips`, stage a)."""
    import torch

    from benchmarks.naturalness_stages import teacher_clips
    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    idx, lines = sample(sentences, limit, seed)
    mel_fn = MelSpectrogram(VocoderConfig.load(model / "vocoder" / "config.json"))
    with torch.inference_mode():
        mels = [mel_fn(torch.from_numpy(x)) for x in teacher_clips(lines)]
    return idx, {"joe": {"": mels}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocoder", action="append", required=True, help="NAME=SOURCE; the first is the reference")
    p.add_argument("--sentences", type=Path, default=ROOT / "training" / "eval_sentences.txt")
    p.add_argument("--limit", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--model", action="append", default=[], help="[NAME=]DIR; named, and more than once, to compare models"
    )
    p.add_argument("--voices", default="joe,heart")
    p.add_argument("--mel", choices=("served", "teacher"), default="served")
    p.add_argument("--pair", action="append", default=[], help="NAME,REFERENCE: one more paired difference")
    p.add_argument("--judges-python", required=True)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vocoder_ab.json")
    a = p.parse_args()
    specs = dict(v.split("=", 1) if "=" in v else ("", v) for v in a.vocoder)
    models = dict(m.split("=", 1) if "=" in m else ("", m) for m in a.model or [str(ROOT / "voices" / "default")])
    if len(a.model) > 1 and ("" in models or len(models) != len(a.model)):
        p.error("several --model: give each as NAME=DIR, with distinct names")
    if len(specs) != len(a.vocoder) or any(not k or not s for k, s in specs.items()):
        p.error("give each --vocoder as NAME=SOURCE, with distinct names")
    if len(specs) * len(models) < 2:
        p.error("give at least two --vocoder NAME=SOURCE (or two --model NAME=DIR) to compare")
    if len(models) == 1:
        models = {"": next(iter(models.values()))}  # one model: clips are named by vocoder alone
    names = {clip_name(m, v) for m in models for v in specs}
    pairs = [tuple(x.split(",", 1)) for x in a.pair]
    if any(len(x) != 2 or not set(x) <= names for x in pairs):
        p.error(f"--pair takes NAME,REFERENCE, both of {', '.join(sorted(names))}")
    if a.mel == "teacher" and a.voices != "joe":
        p.error("--mel teacher is joe's copy synthesis: pass --voices joe")
    if a.mel == "teacher" and len(models) > 1:
        p.error("--mel teacher is the teacher's mel: one --model")

    import torch

    torch.manual_seed(a.seed)
    t0 = time.monotonic()
    vocoders = {name: load_vocoder(source) for name, source in specs.items()}
    rates = {net.config.sample_rate for net in vocoders.values()}
    if len(rates) != 1:
        p.error(f"the vocoders' sample rates differ: {sorted(rates)}")
    voices = a.voices.split(",")
    dirs = {name: Path(d) for name, d in models.items()}
    if a.mel == "teacher":
        idx, mels = teacher_mels(next(iter(dirs.values())), a.sentences, a.limit, a.seed)
    else:
        idx, mels = served_mels(dirs, a.sentences, a.limit, a.seed, voices)
    print(f"{a.mel} mels: {time.monotonic() - t0:.0f} s", flush=True)
    summary, table = compare(mels, idx, vocoders, rates.pop(), a.judges_python, pairs=pairs)
    print("\n".join(table))
    result = {
        "command": machine.command(),
        "machine": machine.describe(),
        "seed": a.seed,
        "limit": a.limit,
        "model": models[""] if "" in models else models,
        "vocoders": specs,
        "vocoder_configs": {name: net.config.to_dict() for name, net in vocoders.items()},
        "voices": voices,
        "mel": a.mel,
        "indices": idx,
        "wall_s": round(time.monotonic() - t0, 1),
        "summary": summary,
        "table_md": "\n".join(table),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
