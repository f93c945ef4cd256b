"""The CPU streaming vocoder alone: seeded random utterances (1-8 at once, 1-6 pushes of 1-40 frames each,
then finish), printing RSS and glibc's heap (in use / free but kept) after each round. Separates the
vocoder's share of the serving process's RSS growth (docs/reliability.md, "Soak"). glibc only.

    python -m benchmarks.vocoder_heap MODEL_DIR/vocoder [--rounds 8] [--batches 150]
"""

import argparse
import random

import numpy as np
import torch

from benchmarks.heap import mallinfo2, rss_mb
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("vocoder_dir")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--batches", type=int, default=150)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    v = Vocoder.from_dir(args.vocoder_dir)
    sv = StreamingVocoder(v, chunk_frames=32, first_chunk_frames=8, device="cpu", initial_capacity=8)
    rng, np_rng, n = random.Random(0), np.random.default_rng(0), 0
    print(f"{'round':>5} {'utterances':>10} {'RSS MB':>8} {'in use MB':>10} {'free MB':>8}")
    for r in range(args.rounds):
        for _ in range(args.batches):
            ids = [f"s{n + i}" for i in range(rng.randint(1, 8))]
            n += len(ids)
            for uid in ids:
                sv.open(uid)
            for _ in range(rng.randint(1, 6)):
                sv.step({uid: np_rng.standard_normal((rng.randint(1, 40), v.config.n_mels), np.float32) for uid in ids})
            sv.step({}, finish=ids)
        m = mallinfo2()
        print(f"{r:5d} {n:8d} {rss_mb():8.1f} {m.uordblks / 2**20:10.1f} {m.fordblks / 2**20:8.1f}", flush=True)


if __name__ == "__main__":
    main()
