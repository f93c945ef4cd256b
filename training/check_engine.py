"""Serve a voice in the real patched vLLM engine (CPU build) and compare with offline inference.

For a few sentences in every voice of the model (each voice's prompts begin with its voice token, as the
server sends them): the engine's greedy pointers and mel chunks vs training/infer.py's on the same weights
(fp32). They must be identical: this is the check that the served model is the trained one.

    python -m training.check_engine [VOICE_DIR]
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time

import numpy as np
import torch

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Please call me at two o'clock tomorrow.",
    "It costs six dollars and fifty cents.",
)


async def check(voice_dir: str) -> bool:
    from training.infer import generate, load_model_dir
    from uttera_server.config import EngineConfig
    from uttera_server.synthesis.mel_engine import MelEngine
    from uttera_server.frontend import prepare
    from uttera_server.frontend.phoneme_table import en_us
    from uttera_server.model_dir import VoiceModelConfig
    from uttera_server.synthesis.voices import served_voices, voice_prompt

    config = VoiceModelConfig.load(voice_dir)
    _, tokens = served_voices(config, en_us().bos_ids[0])
    engine = MelEngine(
        config,
        EngineConfig(
            max_num_seqs=4, kv_cache_memory_bytes=256 << 20, enforce_eager=True, block_size=32, dtype="float32"
        ),
    )
    await asyncio.to_thread(engine.start)
    model = load_model_dir(voice_dir)
    ok = True
    try:
        for (voice, token), text in itertools.product(tokens.items(), SENTENCES):
            ids = voice_prompt(prepare(text)[0].phoneme_ids, token)
            t0 = time.time()
            steps = [s async for s in engine.generate(ids)]
            dt = time.time() - t0
            offline = generate(model, ids)
            served = [s.pointer for s in steps]
            n = min(len(served), len(offline.pointers))
            diff = float(
                (torch.from_numpy(np.concatenate([s.mel for s in steps[:n]])) - offline.mel.T[: n * 4]).abs().max()
            )
            same = served == offline.pointers and diff < 1e-3
            ok &= same
            print(
                f"{voice} {text!r}: engine {len(served)} steps in {dt:.2f} s, offline {len(offline.pointers)}; "
                f"pointers equal={served == offline.pointers}; max |mel diff|={diff:.2e}",
                flush=True,
            )
    finally:
        engine.shutdown()
    return ok


def main() -> None:
    ok = asyncio.run(check(sys.argv[1] if len(sys.argv) > 1 else "voices/default"))
    print("MATCH" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
