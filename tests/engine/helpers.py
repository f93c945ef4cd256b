"""Helpers of the engine tests: prompts, collecting a request's steps, checking it against the reference."""

import asyncio
import random

import numpy as np
import torch

from tests.engine.reference import ReferenceModel
from uttera_server.synthesis.mel_engine import MelEngine
from uttera_server.model_dir import VoiceModelConfig


def prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [1] + [rng.randrange(3, 200) for _ in range(n - 2)] + [2]


async def collect(engine: MelEngine, ids: list[int], delay: float = 0.0):
    steps = []
    async for step in engine.generate(ids):
        steps.append(step)
        if delay:
            await asyncio.sleep(delay)
    return steps


def check_against_reference(reference: ReferenceModel, model: VoiceModelConfig, ids, steps) -> None:
    pointers = [s.pointer for s in steps]
    assert pointers[0] == 0, "the first chunk voices phoneme 0"
    assert pointers[-1] == len(ids) - 1, "the last chunk voices the last phoneme"
    assert all(0 <= b - a <= 3 for a, b in zip(pointers, pointers[1:])), pointers
    # Teacher-forced reference over prompt + the generated pointers: chunk t comes from the position
    # whose input is pointer t.
    tokens = ids + [model.pointer_offset + p for p in pointers]
    want = reference.mel(tokens)[len(ids) :]
    got = torch.from_numpy(np.stack([s.mel for s in steps]))
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=2e-3, rtol=2e-3)
