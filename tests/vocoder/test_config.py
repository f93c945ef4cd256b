import json

import pytest

from vocoder.config import MAX_LOOKAHEAD, VocoderConfig
from vocoder.errors import VocoderConfigError


def test_defaults_are_the_acoustic_analysis():
    c = VocoderConfig()
    assert (c.sample_rate, c.hop_length, c.n_fft, c.win_length, c.n_mels) == (22050, 256, 1024, 1024, 80)
    assert (c.f_min, c.f_max, c.log_clamp) == (0.0, 8000.0, 1e-5)
    assert c.pad == 384 and c.n_freq == 513
    assert c.frame_ms == pytest.approx(11.61, abs=0.01)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"lookahead": MAX_LOOKAHEAD + 1}, "lookahead"),
        ({"lookahead": -1}, "lookahead"),
        ({"kernel_size": 2, "lookahead": 2}, "smaller than kernel_size"),
        ({"win_length": 2048}, "win_length"),
        ({"win_length": 256}, "exceed hop_length"),
        ({"hop_length": 255}, "even"),
        ({"f_max": 12000.0}, "f_max"),
        ({"f_min": 9000.0}, "f_min"),
        ({"n_mels": 0}, "n_mels"),
        ({"dim": 1.5}, "dim"),
        ({"num_layers": True}, "num_layers"),
        ({"f_max": "8000"}, "f_max"),
        ({"mel_scale": "mel"}, "mel_scale"),
        ({"mel_norm": "l2"}, "mel_norm"),
        ({"log_clamp": 0.0}, "log_clamp"),
        ({"mag_clip": float("inf")}, "mag_clip"),
    ],
)
def test_invalid_configs_raise_typed_errors(overrides, match):
    with pytest.raises(VocoderConfigError, match=match):
        VocoderConfig(**overrides)
    assert issubclass(VocoderConfigError, ValueError)


def test_save_load_roundtrip(tmp_path):
    c = VocoderConfig(dim=48, lookahead=1, mel_norm=None, mel_scale="htk")
    path = c.save(tmp_path / "voc")
    assert path.name == "config.json"
    assert VocoderConfig.load(tmp_path / "voc") == c
    assert VocoderConfig.load(path) == c


def test_load_errors(tmp_path):
    with pytest.raises(VocoderConfigError, match="no vocoder config"):
        VocoderConfig.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"dim": 8, "depth": 3}))
    with pytest.raises(VocoderConfigError, match="unknown vocoder config keys.*depth"):
        VocoderConfig.load(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(VocoderConfigError, match="JSON object"):
        VocoderConfig.load(tmp_path)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(VocoderConfigError, match="not valid JSON"):
        VocoderConfig.load(tmp_path)


def test_check_matches_acoustic_config():
    c = VocoderConfig()
    c.check_matches({"sample_rate": 22050, "hop_length": 256, "f_max": 8000, "model_type": "llama"})
    with pytest.raises(VocoderConfigError, match="hop_length: acoustic model 200 != vocoder 256"):
        c.check_matches({"hop_length": 200})
