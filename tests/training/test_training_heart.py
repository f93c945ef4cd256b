"""The heart teacher (hibari-tts 0.2.1): durations match the audio, and its shards are synthesize.py's.

The teacher tests need `hibari` (`pip install hibari-tts==0.2.1`, not a project dependency: it runs only
to make training data) and `onnx`; without them they are skipped. The conversion helpers need numpy only.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from training.teachers.heart import UNIT, resample, units_to_frames

HAVE_TEACHER = importlib.util.find_spec("hibari") is not None and importlib.util.find_spec("onnx") is not None
needs_teacher = pytest.mark.skipif(
    not HAVE_TEACHER, reason="hibari-tts (and onnx) not installed: pip install hibari-tts==0.2.1 onnx"
)
SENTENCES = ("Hello there, how are you?", "The bird sat on the water tower.")


def test_units_to_frames_rounds_boundaries_without_drift():
    units = np.array([13, 1, 1, 2, 3, 1, 7, 1, 1, 1, 12])
    frames = units_to_frames(units, 22050, 256)
    exact = np.cumsum(units) * UNIT * 22050 / 24000 / 256
    assert frames.sum() == round(exact[-1])
    assert np.abs(np.cumsum(frames) - exact).max() <= 0.5
    assert set(frames[units == 1].tolist()) <= {2, 3}  # a unit is 2.15 frames
    assert (units_to_frames(units, 24000, 300) == 2 * units).all()  # exact at 24 kHz, hop 300


def test_resample_length_and_passband():
    t = np.arange(24000) / 24000
    y = resample(np.sin(2 * np.pi * 440 * t), 24000, 22050)
    assert len(y) == 22050
    ref = np.sin(2 * np.pi * 440 * np.arange(22050) / 22050)
    assert np.abs(y[100:-100] - ref[100:-100]).max() < 1e-3


@pytest.fixture(scope="module")
def teacher():
    if not HAVE_TEACHER:
        pytest.skip("hibari-tts (and onnx) not installed: pip install hibari-tts==0.2.1 onnx")
    from training.teachers.heart import HeartTeacher

    return HeartTeacher()


@needs_teacher
def test_teacher_durations_cover_the_audio(teacher):
    from hibari import Hibari

    from training import text_frontend
    from training.teachers.heart_phonemes import map_prompt, prompt_symbols

    reference = Hibari()
    for text in SENTENCES:
        (s,) = text_frontend.prepare(text)
        mapped = map_prompt(prompt_symbols(s.phoneme_ids), teacher.vocab)
        out = teacher.synthesize(list(mapped.hib_ids), np.random.default_rng(0))
        assert len(out.units) == len(mapped.hib_ids) and (out.units >= 1).all()
        assert out.units.sum() * UNIT == len(out.audio)
        # the extra graph output changes nothing: hibari's own synthesis of the same ids, same noise
        assert np.array_equal(out.audio, reference.from_ids(list(mapped.hib_ids), rng=np.random.default_rng(0)))
        assert sorted(p for g in mapped.groups for p in g) == list(range(len(s.phoneme_ids)))


@needs_teacher
def test_mapping_outputs_are_in_hibari_vocabulary(teacher):
    from training.teachers.heart_phonemes import RULES

    assert all(c in teacher.vocab for out in RULES.values() for c in out)


@needs_teacher
def test_shards_feed_features_and_targets(teacher, tmp_path):
    from hibari import Hibari

    from training import text_frontend
    from training.data import load_utterances
    from training.features import shard_features
    from training.synthesize_heart import make_item
    from training.synthesize import HOP, save_items
    from training.teachers.heart_phonemes import id_to_symbol
    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    table, own = id_to_symbol(), Hibari()
    items = []
    for n, text in enumerate(SENTENCES):
        (s,) = text_frontend.prepare(text)
        item = make_item(teacher, own, s.normalized, list(s.phoneme_ids), table, np.random.default_rng(n))
        assert len(item["dur"]) == len(s.phoneme_ids) and (item["dur"] >= 0).all()
        assert int(item["dur"].sum()) * HOP == len(item["audio"])
        assert item["audio"].dtype == np.int16 and np.abs(item["audio"]).max() == 32767  # peak-normalized
        items.append(item)
    save_items(tmp_path / "shard_00.npz", items)
    z = np.load(tmp_path / "shard_00.npz")
    expected = {"audio": "int16", "audio_off": "int64", "ids": "int16", "ids_off": "int64", "dur": "int32"}
    assert {k: str(z[k].dtype) for k in expected} == expected
    assert z["text"].tolist() == [text_frontend.prepare(t)[0].normalized for t in SENTENCES]
    assert z["piper_match"].dtype == bool and len(z["audio_off"]) == len(z["ids_off"]) == 3
    feats = shard_features(tmp_path / "shard_00.npz", MelSpectrogram(VocoderConfig()), "cpu")  # frames == sum(dur)
    (tmp_path / "feat").mkdir()
    np.savez(tmp_path / "feat" / "feat_00.npz", **feats)
    utts, stats = load_utterances(tmp_path / "feat", r=4, max_advance=3, max_phonemes=400)
    assert len(utts) == 2 and stats["rejected"] == 0
