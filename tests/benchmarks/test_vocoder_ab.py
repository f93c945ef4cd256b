"""benchmarks/vocoder_ab.py: which vocoder a source names, and the paired differences against the first."""

import json

import numpy as np
import pytest
import torch

from benchmarks.vocoder_ab import JUDGES, HighPassed, Jittered, band_shares, load_vocoder, paired
from vocoder.config import VocoderConfig
from vocoder.model import Vocoder


def test_a_streaming_vocoder_directory_loads_as_one(tmp_path):
    config = VocoderConfig(dim=32, intermediate_dim=64, num_layers=1)
    net = Vocoder(config)
    net.save(tmp_path / "voc")
    loaded = load_vocoder(str(tmp_path / "voc"))
    assert isinstance(loaded, Vocoder)
    mel = torch.full((1, 80, 5), -5.0)
    assert loaded(mel).shape == (1, 5 * config.hop_length)


def test_a_hifigan_directory_is_told_apart_by_its_config(tmp_path):
    from vocoder.hifigan import HifiGan, HifiGanConfig

    config = HifiGanConfig(upsample_initial_channel=16)
    HifiGan(config).save(tmp_path / "hg")
    assert "upsample_rates" in json.loads((tmp_path / "hg" / "config.json").read_text())
    assert isinstance(load_vocoder(str(tmp_path / "hg")), HifiGan)


def test_highpass_is_a_causal_butterworth_at_its_corner(tmp_path):
    config = VocoderConfig(dim=32, intermediate_dim=64, num_layers=1)
    Vocoder(config).save(tmp_path / "voc")
    loaded = load_vocoder(f"{tmp_path / 'voc'}:highpass=40")
    assert isinstance(loaded, HighPassed) and loaded.config.sample_rate == config.sample_rate
    assert loaded(torch.full((1, 80, 5), -5.0)).shape == (1, 5 * config.hop_length)

    class Through:  # the filter alone, on tones
        config = VocoderConfig()

        def __call__(self, x):
            return x

    hp = HighPassed(Through(), 40.0)
    sr = hp.config.sample_rate
    t = np.arange(2 * sr) / sr
    gain_db = {}
    for hz in (10, 40, 1000):
        y = hp(torch.tensor(np.sin(2 * np.pi * hz * t)[None], dtype=torch.float64))[0].numpy()[sr:]
        gain_db[hz] = 20 * np.log10(np.sqrt(2 * np.mean(y**2)))
    assert gain_db[40] == pytest.approx(-3.01, abs=0.05)  # Butterworth: -3 dB at the corner
    assert gain_db[10] == pytest.approx(-24.1, abs=0.3)  # 12 dB per octave below it
    assert abs(gain_db[1000]) < 0.01
    impulse = torch.zeros(1, 64, dtype=torch.float64)
    impulse[0, 32] = 1.0
    assert not hp(impulse)[0, :32].any()  # causal: nothing before the input


def test_jitter_is_seeded_noise_on_speech_frames_only():
    class Through:
        config = VocoderConfig()

        def __call__(self, x):
            return x

    jit = Jittered(Through(), 0.1)
    mel = torch.full((1, 80, 400), -11.0)
    mel[..., 100:300] = -4.0  # speech frames (mean log-mel > -8); the rest is silence
    a, b = jit(mel), jit(mel)
    assert torch.equal(a, b)  # seeded: every call the same
    assert torch.equal(a[..., :100], mel[..., :100]) and torch.equal(a[..., 300:], mel[..., 300:])
    assert (a[..., 100:300] - mel[..., 100:300]).std().item() == pytest.approx(0.1, rel=0.05)


def test_paired_differences_are_per_clip_against_the_reference():
    ref = {i: dict.fromkeys(JUDGES, 3.0) for i in range(4)}
    new = {i: dict.fromkeys(JUDGES, 3.0 + (0.5 if i < 3 else -0.5)) for i in range(4)}
    d = paired({"ref": ref, "new": new}, "new", "ref")
    for j in JUDGES:
        assert d[j]["mean"] == pytest.approx(0.25)
        assert d[j]["higher"] == 3 and d[j]["n"] == 4
        assert d[j]["se"] == pytest.approx(np.std([0.5, 0.5, 0.5, -0.5], ddof=1) / 2)


def test_band_shares_of_a_pure_tone():
    sr = 22050
    t = np.arange(sr) / sr
    high = band_shares(0.5 * np.sin(2 * np.pi * 11000 * t), sr)
    assert high["above_10k5"] > 0.99 and high["below_20hz"] < 1e-6
    assert high["peak_dbfs"] == pytest.approx(20 * np.log10(0.5), abs=0.01)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vocoder", "a=x"], "at least two"),
        (["--vocoder", "a=x", "--vocoder", "b=y", "--pair", "a,c"], "--pair takes NAME,REFERENCE"),
        (["--vocoder", "a=x", "--vocoder", "b=y", "--mel", "teacher"], "--voices joe"),
        (["--vocoder", "x", "--vocoder", "b=y"], "NAME=SOURCE, with distinct names"),
        (["--vocoder", "a=x", "--model", "d1", "--model", "d2"], "give each as NAME=DIR"),
        (["--vocoder", "a=x", "--model", "m=d1", "--model", "m=d2"], "give each as NAME=DIR"),
        # with two models the clips are MODEL/VOCODER, and --pair names those
        (["--vocoder", "a=x", "--model", "r4=d1", "--model", "r8=d2", "--pair", "a,b"], "both of r4/a, r8/a"),
        (
            ["--vocoder", "a=x", "--model", "r4=d1", "--model", "r8=d2", "--mel", "teacher", "--voices", "joe"],
            "one --model",
        ),
    ],
)
def test_the_command_line_refuses_what_it_cannot_compare(args, message):
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.vocoder_ab", "--judges-python", "python3", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and message in r.stderr


def test_dc_and_gain_options_scale_the_streaming_vocoder(tmp_path):
    torch.manual_seed(0)
    config = VocoderConfig(dim=32, intermediate_dim=64, num_layers=1)
    Vocoder(config).save(tmp_path / "voc")
    zeroed = Vocoder(VocoderConfig.from_dict({**config.to_dict(), "zero_dc_bin": True})).eval()
    zeroed.load_state_dict(Vocoder.from_dir(tmp_path / "voc").state_dict())
    mel = torch.randn(1, 80, 12) - 4
    with torch.inference_mode():
        plain = load_vocoder(str(tmp_path / "voc"))(mel)
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:dc=0")(mel), zeroed(mel), atol=1e-6)
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:dc=1")(mel), plain, atol=1e-6)
        half = load_vocoder(f"{tmp_path / 'voc'}:dc=0.5")(mel)
        assert not torch.allclose(half, plain) and not torch.allclose(half, zeroed(mel))
        unmasked = Vocoder(VocoderConfig.from_dict({**config.to_dict(), "zero_nyquist_bin": False})).eval()
        unmasked.load_state_dict(zeroed.state_dict())
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:nyquist=1")(mel), unmasked(mel), atol=1e-6)
        louder = load_vocoder(f"{tmp_path / 'voc'}:gain_db=6")(mel)
        assert torch.allclose(louder, plain * 10 ** (6 / 20), atol=1e-6)
        # :sharpen=K: the vocoder gets mel + K * (mel - its [1/4, 1/2, 1/4] smoothing in time), speech frames only.
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:sharpen=0")(mel), plain, atol=1e-6)
        padded = torch.cat([mel[..., :1], mel, mel[..., -1:]], -1)
        smooth = 0.25 * padded[..., :-2] + 0.5 * padded[..., 1:-1] + 0.25 * padded[..., 2:]
        net = load_vocoder(str(tmp_path / "voc"))
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:sharpen=1")(mel), net(2 * mel - smooth), atol=1e-5)
        silent = torch.full((1, 80, 12), -11.0)
        assert torch.allclose(load_vocoder(f"{tmp_path / 'voc'}:sharpen=1")(silent), net(silent), atol=1e-6)
    with pytest.raises(ValueError, match="options are"):
        load_vocoder(f"{tmp_path / 'voc'}:bass=1")


def test_seam_pulls_each_step_start_toward_the_previous_end_causally():
    from benchmarks.vocoder_ab import Seamed

    class Identity:
        config = None

        def __call__(self, mel):
            return mel

    torch.manual_seed(0)
    r, a = 4, 0.5
    steps = torch.randn(1, 80, 6, 1) * 3 + torch.randn(1, 80, 6, r) * 0.1  # a level per step, small moves
    mel = steps.reshape(1, 80, 6 * r)
    seamed = Seamed(Identity(), a, r)
    y = seamed(mel)
    assert torch.equal(y[..., :r], mel[..., :r])  # the first step has nothing before it
    # each step's first frame takes A of its jump away; its fade reaches 1/R of that at the step's end
    jump = mel[..., r] - mel[..., r - 1]
    assert torch.allclose(y[..., r] - y[..., r - 1], (1 - a) * jump, atol=1e-5)
    assert torch.allclose(y[..., 2 * r - 1] - mel[..., 2 * r - 1], -a * jump / r, atol=1e-5)
    across = (y[..., r::r] - y[..., r - 1 : -1 : r]).abs().mean()
    assert across < (mel[..., r::r] - mel[..., r - 1 : -1 : r]).abs().mean() * 0.75
    # causal: a prefix of the mel gives the same prefix of the result (a server can do it as frames stream)
    for t in (3, r, r + 1, 3 * r + 2):
        assert torch.allclose(seamed.correct(mel[..., :t]), y[..., :t])
    with pytest.raises(ValueError, match=":step"):
        load_vocoder("no-such-dir:seam=0.3")
