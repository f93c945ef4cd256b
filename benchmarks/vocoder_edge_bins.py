"""The vocoder's DC and Nyquist bins: how much of its output they carry, and the judges with them zeroed.

    python -m benchmarks.vocoder_edge_bins --judges-python /tmp/judges/bin/python [--voices joe,heart] \\
        [--limit 40] [--seed 0] [--model voices/default] [--out benchmarks/results/vocoder_edge_bins.json]

Sentences: the seeded held-out sample of `naturalness_stages.py` (`quality.select`, `--limit 40 --seed 0`
is that section's sample). Per voice, the served acoustic model's own mel of each sentence (the mel the
server's vocoder got, tapped as `naturalness_stages._serve` does) goes through the voice's vocoder offline
three times: neither edge bin zeroed, the Nyquist bin zeroed (`VocoderConfig.zero_nyquist_bin`), both
zeroed (`zero_dc_bin` too); the weights are the voice's, only the head's zeroing differs (per frame, so
streamed audio equals offline in each). Per clip: the share of its energy below 20 Hz and above 10.5 kHz,
RMS and peak dBFS, and the judges of `judge_audio.py` (DistillMOS, NISQA-TTS, DNSMOS) in their own
interpreter, all clips in one pass. Prints a table; writes JSON (command, means per voice and variant,
paired per-clip differences against "none").
"""

import argparse
import asyncio
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import machine
from benchmarks.naturalness_stages import _serve, judge

ROOT = Path(__file__).resolve().parent.parent
JUDGES = ("distillmos", "nisqa_tts", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak")


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


def main() -> None:
    from benchmarks.quality import select

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sentences", type=Path, default=ROOT / "training" / "eval_sentences.txt")
    p.add_argument("--limit", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--voices", default="joe,heart")
    p.add_argument("--judges-python", required=True)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vocoder_edge_bins.json")
    a = p.parse_args()

    import torch

    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    torch.manual_seed(a.seed)
    all_lines = [x for x in a.sentences.read_text().splitlines() if x.strip()]
    idx = select(all_lines, a.limit, a.seed)
    lines = [all_lines[i] for i in idx]
    t0 = time.monotonic()
    voices = a.voices.split(",")
    mels = {v: [torch.from_numpy(m.T.copy()) for m in asyncio.run(_serve(a.model, lines, voice=v))[1]] for v in voices}
    shipped = Vocoder.from_dir(a.model / "vocoder").eval()
    variants = {}
    for name, dc, nyquist in (("none", False, False), ("nyquist", False, True), ("dc+nyquist", True, True)):
        config = {**shipped.config.to_dict(), "zero_dc_bin": dc, "zero_nyquist_bin": nyquist}
        variants[name] = Vocoder(VocoderConfig.from_dict(config)).eval()
        variants[name].load_state_dict(shipped.state_dict())
    sr = shipped.config.sample_rate
    work = Path(tempfile.mkdtemp(prefix="edge_bins_"))
    manifest: list[dict] = []
    rows: list[dict] = []
    with torch.inference_mode():
        for source, source_mels in mels.items():
            for n, mel in enumerate(source_mels):
                for name, net in variants.items():
                    x = net(mel[None].float())[0].numpy().astype(np.float32)
                    key = f"{source}|{name}|{idx[n]}"
                    path = work / f"{len(manifest):04d}.npy"
                    np.save(path, x)
                    manifest.append({"key": key, "path": str(path), "sr": sr})
                    rows.append({"key": key, "source": source, "variant": name, "index": idx[n], **band_shares(x, sr)})
    print(f"synthesis: {time.monotonic() - t0:.0f} s; judging {len(manifest)} clips", flush=True)
    scores = {s["key"]: s for s in judge(a.judges_python, manifest, work)}
    for row in rows:
        row.update({j: scores[row["key"]].get(j) for j in JUDGES})

    summary: dict = {}
    figures = ("below_20hz", "above_10k5", "rms_dbfs", "peak_dbfs", *JUDGES)
    head = "| voice | zeroed | energy < 20 Hz | energy > 10.5 kHz | RMS / peak dBFS | " + " | ".join(JUDGES) + " |"
    table = [head, "|" + " --- |" * (5 + len(JUDGES))]
    for source in mels:
        by = {
            name: {r["index"]: r for r in rows if r["source"] == source and r["variant"] == name} for name in variants
        }
        for name, rs in by.items():
            s = {f: float(np.mean([r[f] for r in rs.values()])) for f in figures}
            summary[f"{source}|{name}"] = s
            table.append(
                f"| {source} | {name} | {100 * s['below_20hz']:.1f} % | {100 * s['above_10k5']:.1f} % | "
                f"{s['rms_dbfs']:.1f} / {s['peak_dbfs']:.1f} | " + " | ".join(f"{s[j]:.2f}" for j in JUDGES) + " |"
            )
        for name in list(variants)[1:]:  # paired against "none", per clip
            diffs = {}
            for j in JUDGES:
                d = [by[name][i][j] - by["none"][i][j] for i in by["none"]]
                diffs[j] = {
                    "mean": float(np.mean(d)),
                    "se": float(np.std(d, ddof=1) / np.sqrt(len(d))),
                    "higher": int(sum(x > 0 for x in d)),
                    "n": len(d),
                }
            summary[f"{source}|{name} - none"] = diffs
            cells = " | ".join(
                f"{diffs[j]['mean']:+.2f} ± {diffs[j]['se']:.2f} ({diffs[j]['higher']}/{diffs[j]['n']})" for j in JUDGES
            )
            table.append(f"| {source} | {name} − none (± s.e.; clips higher) | | | | {cells} |")
    print("\n".join(table))
    result = {
        "command": machine.command(),
        "machine": machine.describe(),
        "seed": a.seed,
        "limit": a.limit,
        "model": str(a.model),
        "vocoder_config": dataclasses.asdict(shipped.config),
        "voices": voices,
        "indices": idx,
        "wall_s": round(time.monotonic() - t0, 1),
        "summary": summary,
        "table_md": "\n".join(table),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {a.out} (clips in {work})")


if __name__ == "__main__":
    main()
