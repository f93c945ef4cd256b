"""Tiny synthetic training data (no teacher, no network): random phonemes, durations, noise audio."""

import numpy as np
import pytest


HOP = 256


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """(synth_dir, feat_dir) in the formats of training/synthesize.py and training/features.py."""
    from training.features import shard_features
    from training.synthesize import save_items
    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    root = tmp_path_factory.mktemp("data")
    synth, feat = root / "synth", root / "feat"
    synth.mkdir()
    feat.mkdir()
    rng = np.random.default_rng(0)
    items = []
    for u in range(12):
        n = int(rng.integers(6, 20))
        ids = np.concatenate([[1], rng.integers(3, 150, n - 2), [2]])
        dur = rng.integers(2, 9, n).astype(np.int32)
        t = np.arange(int(dur.sum()) * HOP) / 22050
        audio = 0.3 * np.sin(2 * np.pi * (120 + 10 * u) * t) + 0.05 * rng.standard_normal(len(t))
        items.append(
            {"audio": (audio * 32767).astype(np.int16), "ids": ids, "dur": dur, "text": f"utt {u}", "match": True}
        )
    save_items(synth / "shard_00.npz", items)
    feats = shard_features(synth / "shard_00.npz", MelSpectrogram(VocoderConfig()), "cpu")
    np.savez(feat / "feat_00.npz", **feats)
    return synth, feat
