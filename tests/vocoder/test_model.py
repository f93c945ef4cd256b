import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.vocoder.voc_helpers import offline, random_mel, tiny_config

from vocoder.config import VocoderConfig
from vocoder.errors import VocoderCheckpointError, VocoderConfigError
from vocoder.model import Vocoder


def test_forward_shape_and_dtype(tiny_vocoder):
    with torch.inference_mode():
        wav = tiny_vocoder(torch.randn(2, 80, 13) - 5)
        assert wav.shape == (2, 13 * 256) and wav.dtype == torch.float32
        assert torch.isfinite(wav).all()
        assert tiny_vocoder(torch.zeros(3, 80, 0)).shape == (3, 0)
    with pytest.raises(ValueError, match=r"\(B, 80, T\)"):
        tiny_vocoder(torch.zeros(2, 40, 5))


def test_default_size_is_small():
    assert 1e6 < Vocoder.random(VocoderConfig()).num_params() < 4e6


def test_random_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(7)
    before = torch.rand(1)
    torch.manual_seed(7)
    a = Vocoder.random(tiny_config(), seed=3)
    assert torch.rand(1) == before
    b = Vocoder.random(tiny_config(), seed=3)
    c = Vocoder.random(tiny_config(), seed=4)
    for (name, pa), pb, pc in zip(a.state_dict().items(), b.state_dict().values(), c.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.embed.weight, c.embed.weight)


@pytest.mark.parametrize("lookahead", [0, 1, 2])
def test_output_before_a_frame_does_not_depend_on_it(lookahead, rng):
    """Causality: mel frame t only moves samples >= (t - lookahead) * hop - (n_fft - hop) / 2."""
    model = Vocoder.random(tiny_config(lookahead=lookahead), seed=1)
    mel = random_mel(rng, 30)
    t = 20
    changed = mel.copy()
    changed[t] += 3.0
    a, b = offline(model, mel), offline(model, changed)
    first = (t - lookahead) * 256 - 384
    assert np.array_equal(a[:first], b[:first])
    assert not np.allclose(a[first : first + 256], b[first : first + 256])


def test_save_load_roundtrip(tmp_path, rng):
    model = Vocoder.random(tiny_config(lookahead=1), seed=5)
    model.save(tmp_path / "voc")
    assert sorted(p.name for p in (tmp_path / "voc").iterdir()) == ["config.json", "model.safetensors"]
    loaded = Vocoder.from_dir(tmp_path / "voc")
    assert loaded.config == model.config and not loaded.training
    mel = random_mel(rng, 17)
    assert np.array_equal(offline(model, mel), offline(loaded, mel))


def test_load_errors(tmp_path):
    Vocoder.random(tiny_config(), seed=0).save(tmp_path)
    weights = tmp_path / "model.safetensors"
    state = load_file(str(weights))
    state["embed.weight"] = state["embed.weight"][:, :, :3].contiguous()
    state["extra"] = torch.zeros(1)
    del state["final_norm.bias"]
    save_file(state, str(weights))
    with pytest.raises(
        VocoderCheckpointError, match=r"missing \['final_norm.bias'\].*unexpected \['extra'\].*embed.weight"
    ):
        Vocoder.from_dir(tmp_path)
    weights.unlink()
    with pytest.raises(VocoderCheckpointError, match="no vocoder weights"):
        Vocoder.from_dir(tmp_path)
    with pytest.raises(VocoderConfigError, match="no vocoder config"):
        Vocoder.from_dir(tmp_path / "nowhere")


@pytest.mark.parametrize("bin_name, band", [("zero_dc_bin", (0, 20)), ("zero_nyquist_bin", (10500, 12000))])
def test_a_zeroed_edge_bin_leaves_nothing_in_its_band(bin_name, band, rng):
    """A head that pushes both edge bins to `mag_clip` (as voices/default's vocoder does) fills the bands
    below 20 Hz and above 10.5 kHz; zeroing one bin empties its band but for the other bins' share there."""
    mel = random_mel(rng, 40)
    energy = {}
    for zero in (False, True):
        model = Vocoder.random(tiny_config(**{bin_name: zero}), seed=0)
        half = model.config.n_fft // 2 + 1
        with torch.no_grad():
            model.head.out.bias[[0, half - 1]] = 10.0  # log-magnitudes of DC and Nyquist: clipped at mag_clip
        wav = offline(model, mel).astype(np.float64)
        power = np.abs(np.fft.rfft(wav)) ** 2
        freqs = np.fft.rfftfreq(len(wav), 1 / model.config.sample_rate)
        energy[zero] = power[(freqs >= band[0]) & (freqs < band[1])].sum()
    assert energy[True] < 1e-3 * energy[False]


def test_zeroed_bins_must_be_bools():
    for name in ("zero_dc_bin", "zero_nyquist_bin"):
        with pytest.raises(VocoderConfigError, match=name):
            VocoderConfig(**{name: "yes"})
