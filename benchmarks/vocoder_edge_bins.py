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
import dataclasses
import json
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.vocoder_ab import compare, served_mels

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
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
    t0 = time.monotonic()
    voices = a.voices.split(",")
    idx, mels = served_mels(a.model, a.sentences, a.limit, a.seed, voices)
    shipped = Vocoder.from_dir(a.model / "vocoder").eval()
    variants = {}
    for name, dc, nyquist in (("none", False, False), ("nyquist", False, True), ("dc+nyquist", True, True)):
        config = {**shipped.config.to_dict(), "zero_dc_bin": dc, "zero_nyquist_bin": nyquist}
        variants[name] = Vocoder(VocoderConfig.from_dict(config)).eval()
        variants[name].load_state_dict(shipped.state_dict())
    print(f"served mels: {time.monotonic() - t0:.0f} s", flush=True)
    summary, table = compare(mels, idx, variants, shipped.config.sample_rate, a.judges_python, label="zeroed")
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
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
