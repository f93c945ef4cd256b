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


def log_steps(run_dir):
    return [json.loads(ln)["step"] for ln in (run_dir / "log.jsonl").read_text().splitlines()]


def test_acoustic_trainer_steps_and_resumes(synthetic_data, tmp_path, monkeypatch):
    from training import train_acoustic

    _, feat = synthetic_data
    run = tmp_path / "ac"
    args = argv(
        feat, run, device="cpu", workers=0, log_every=1, val_every=2, max_tokens=400, hidden_size=32,
        num_attention_heads=2, head_dim=16, intermediate_size=64, num_hidden_layers=2, warmup=2,
    )  # fmt: skip
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
