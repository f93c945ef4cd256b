"""A few real steps of both trainers on tiny synthetic data, on CPU, then resume."""

import json
import sys

import pytest
import torch


def run_main(module, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()


def log_steps(run_dir):
    return [json.loads(ln)["step"] for ln in (run_dir / "log.jsonl").read_text().splitlines()]


def test_acoustic_trainer_steps_and_resumes(synthetic_data, tmp_path, monkeypatch):
    from training import train_acoustic

    _, feat = synthetic_data
    run = tmp_path / "ac"
    args = [
        str(feat),
        str(run),
        "--device",
        "cpu",
        "--workers",
        "0",
        "--log-every",
        "1",
        "--val-every",
        "2",
        "--max-tokens",
        "400",
        "--hidden-size",
        "32",
        "--num-attention-heads",
        "2",
        "--head-dim",
        "16",
        "--intermediate-size",
        "64",
        "--num-hidden-layers",
        "2",
        "--warmup",
        "2",
    ]
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
    args = [
        str(synth),
        str(run),
        "--device",
        "cpu",
        "--log-every",
        "1",
        "--batch",
        "2",
        "--segment-frames",
        "16",
        "--dim",
        "16",
        "--intermediate-dim",
        "32",
        "--num-layers",
        "1",
        "--gan-after",
        "2",
    ]
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
    run_main(
        train_vocoder,
        [
            str(synth),
            str(run),
            "--device",
            "cpu",
            "--log-every",
            "1",
            "--batch",
            "1",
            "--segment-frames",
            "8",
            "--dim",
            "16",
            "--intermediate-dim",
            "32",
            "--num-layers",
            "1",
            "--gan-after",
            gan_after,
            "--max-steps",
            "1",
            "--mpd-channels",
            "4,4,4,4,4",
            "--mrd-channels",
            "4",
        ],
        monkeypatch,
    )
    rec = json.loads((run / "log.jsonl").read_text().splitlines()[0])
    assert {"adv", "fm", "d_loss", "mel_l1", "stft"} <= set(rec)
