"""hibari heart teacher clips for quality.py, run in the interpreter that has hibari-tts (not a project dependency).

That interpreter needs `pip install hibari-tts==0.2.1 onnx piper-tts==1.8.0` (piper-tts: our frontend's espeak).

    PYTHONPATH=. HEART_PYTHON -m benchmarks.heart_clips ITEMS.json CLIPS.json [--seed 0]

ITEMS: [{"key", "sentences" (the frontend's phoneme ids, one list per frontend sentence), "path" (.npy to
write)}]. Each sentence goes through `training.synthesize_heart.make_item` (22,050 Hz, peak-normalized to 1.0,
cropped to sum(durations) x 256 samples; hibari's noise seeded by `--seed` and the key), the sentences of a
line are concatenated and saved as float32 in [-1, 1]. CLIPS: [{"key", "frames", "audio_s"}], or
[{"key", "error"}] for a line hibari cannot speak (make_item's ValueError).
"""

import argparse
import json
import zlib
from pathlib import Path

import numpy as np

HOP = 256
SAMPLE_RATE = 22_050


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("items", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    from training.synthesize_heart import make_item
    from training.teachers.heart import HeartTeacher
    from training.teachers.heart_phonemes import id_to_symbol

    teacher, table = HeartTeacher(threads=1), id_to_symbol()
    out = []
    items = json.loads(a.items.read_text())
    for n, item in enumerate(items):
        rng = np.random.default_rng([a.seed, zlib.crc32(item["key"].encode())])
        try:
            made = [make_item(teacher, None, "", list(ids), table, rng) for ids in item["sentences"]]
        except ValueError as e:
            out.append({"key": item["key"], "error": str(e)})
            print(f"[heart {n + 1}/{len(items)}] skipped: {e}", flush=True)
            continue
        frames = int(sum(int(m["dur"].sum()) for m in made))
        audio = np.concatenate([m["audio"] for m in made]).astype(np.float32) / 32767.0
        Path(item["path"]).parent.mkdir(parents=True, exist_ok=True)
        np.save(item["path"], audio)
        out.append({"key": item["key"], "frames": frames, "audio_s": frames * HOP / SAMPLE_RATE})
        print(f"[heart {n + 1}/{len(items)}] {frames * HOP / SAMPLE_RATE:.2f} s", flush=True)
    a.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
