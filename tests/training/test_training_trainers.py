"""A few real steps of both trainers on tiny synthetic data, on CPU, then resume."""

import json
import sys

import pytest
import torch


def run_main(module, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()


def argv(*positional, **flags) -> list[str]:
    """A trainer's command line: `argv(data, run, log_every=1)` -> `[data, run, "--log-every", "1"]`."""
    out = [str(p) for p in positional]
    for name, value in flags.items():
        out += [f"--{name.replace('_', '-')}", str(value)]
    return out


def tiny_acoustic_argv(feat, run, **flags) -> list[str]:
    """The acoustic trainer's command line for a tiny model on CPU, one log line a step, plus `flags`."""
    return argv(
        feat, run, device="cpu", workers=0, log_every=1, max_tokens=400, hidden_size=32, num_attention_heads=2,
        head_dim=16, intermediate_size=64, num_hidden_layers=2, warmup=2, **flags,
    )  # fmt: skip


def log_steps(run_dir):
    return [json.loads(ln)["step"] for ln in (run_dir / "log.jsonl").read_text().splitlines()]


def test_acoustic_trainer_steps_and_resumes(synthetic_data, tmp_path, monkeypatch):
    from training import train_acoustic

    _, feat = synthetic_data
    run = tmp_path / "ac"
    args = tiny_acoustic_argv(feat, run, val_every=2)
    run_main(train_acoustic, [*args, "--max-steps", "3"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["step"] == 3
    run_main(train_acoustic, [*args, "--max-steps", "5", "--resume"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["step"] == 5
    assert state["config"]["hidden_size"] == 32
    assert state["config"]["max_steps_per_phoneme"] >= 3  # longest dwell in the data + 2
    assert max(log_steps(run)) == 5


def test_acoustic_loss_decreases(synthetic_data):
    from training.data import collate, load_utterances
    from training.model import UtteraTTS
    from training.train_acoustic import acoustic_loss

    from train_helpers import tiny_acoustic_config

    torch.manual_seed(0)
    c = tiny_acoustic_config()
    utts, _ = load_utterances(synthetic_data[1], c.frames_per_step, c.max_advance, c.max_phonemes)
    batch = collate(utts[:4], c.pointer_offset)
    model = UtteraTTS(c)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(12):
        loss, m = acoustic_loss(model, batch)
        first = first if first is not None else m
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert m["ce"] < first["ce"] and m["l1"] < first["l1"]


def test_vocoder_trainer_steps_and_resumes(synthetic_data, tmp_path, monkeypatch):
    from training import train_vocoder

    synth, _ = synthetic_data
    run = tmp_path / "voc"
    args = argv(
        synth, run, device="cpu", log_every=1, batch=2, segment_frames=16, dim=16, intermediate_dim=32,
        num_layers=1, gan_after=2,
    )  # fmt: skip
    run_main(train_vocoder, [*args, "--max-steps", "2"], monkeypatch)
    assert torch.load(run / "ckpt.pt", weights_only=False)["step"] == 2
    run_main(train_vocoder, [*args, "--max-steps", "3", "--resume"], monkeypatch)
    assert torch.load(run / "ckpt.pt", weights_only=False)["step"] == 3
    assert log_steps(run) == [1, 2, 3]


@pytest.mark.parametrize("gan_after", ["0"])
def test_vocoder_gan_step(synthetic_data, tmp_path, monkeypatch, gan_after):
    from training import train_vocoder

    synth, _ = synthetic_data
    run = tmp_path / "gan"
    args = argv(
        synth, run, device="cpu", log_every=1, batch=1, segment_frames=8, dim=16, intermediate_dim=32,
        num_layers=1, gan_after=gan_after, max_steps=1, mpd_channels="4,4,4,4,4", mrd_channels=4,
    )  # fmt: skip
    run_main(train_vocoder, args, monkeypatch)
    rec = json.loads((run / "log.jsonl").read_text().splitlines()[0])
    assert {"adv", "fm", "d_loss", "mel_l1", "stft"} <= set(rec)


def test_mel_windows_cut_the_pointer_frames_in_time_order():
    import random

    from training.train_acoustic import mel_windows

    r, n_mels = 2, 3
    # Row 0: prompt of 2, then 5 chunks; row 1: prompt of 3, then 2 chunks (4 frames < window: left out).
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[0, 2:7] = True
    mask[1, 3:5] = True
    # Every frame holds its own time index (position * r + frame) in every bin; the prompt's positions -1.
    frames = torch.arange(8 * r, dtype=torch.float32).view(1, 8, r, 1).expand(2, 8, r, n_mels).clone()
    frames[~mask] = -1
    for seed in range(20):
        fake, real = mel_windows(frames * 2, frames.half(), mask, 6, random.Random(seed))
        assert fake.shape == real.shape == (1, 6, n_mels)
        t = real[0, :, 0]
        assert t[0] >= 2 * r and t[-1] <= 7 * r - 1  # inside row 0's pointer frames
        assert torch.equal(t, t[0] + torch.arange(6.0))  # consecutive frames across chunk borders
        assert torch.equal(fake, real * 2)  # the same frames of prediction and target
    assert mel_windows(frames, frames, mask, 11, random.Random(0)) is None


def test_acoustic_trainer_with_mel_gan_steps_and_resumes(synthetic_data, tmp_path, monkeypatch):
    from training import train_acoustic

    _, feat = synthetic_data
    run = tmp_path / "gan"
    args = tiny_acoustic_argv(feat, run, val_every=100, adv_weight=1, adv_window=8, d_warmup=2)
    run_main(train_acoustic, [*args, "--max-steps", "3"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    disc_before = {k: v.clone() for k, v in state["disc"].items()}
    run_main(train_acoustic, [*args, "--max-steps", "4", "--resume"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["step"] == 4
    assert any(not torch.equal(disc_before[k], v) for k, v in state["disc"].items())  # resumed and stepped
    recs = [json.loads(ln) for ln in (run / "log.jsonl").read_text().splitlines() if '"final"' not in ln]
    steps = {r["step"]: r for r in recs}
    assert "d_loss" in steps[1] and "adv" not in steps[1]  # discriminator alone during d_warmup
    assert {"d_loss", "adv", "fm", "l1", "ce"} <= set(steps[3]) and {"adv", "fm"} <= set(steps[4])
