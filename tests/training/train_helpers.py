"""Tiny configs for the training tests."""

import dataclasses
from typing import Any

from training.model import AcousticConfig


def tiny_acoustic_config(**kw: Any) -> AcousticConfig:
    base = AcousticConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=64,
        max_phonemes=64,
        max_position_embeddings=512,
    )
    return dataclasses.replace(base, **kw)
