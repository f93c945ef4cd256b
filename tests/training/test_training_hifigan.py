"""`train_vocoder.py --arch hifigan` for real on CPU: UNIVERSAL fine-tuned a few steps on tiny synthetic
data (the discriminators alone first), resumed, then exported into a voice and served from there."""

import json

import pytest
import torch

from tests.training.test_training_trainers import argv, log_steps, run_main
from vocoder import hifigan
from vocoder.config import ANALYSIS_KEYS, VocoderConfig


def test_hifigan_fine_tune_warms_the_critic_resumes_and_exports(synthetic_data, tmp_path, monkeypatch):
    from training import export_hifigan, train_vocoder

    synth, _ = synthetic_data
    run = tmp_path / "hifigan"
    args = argv(
        synth, run, device="cpu", log_every=1, batch=1, segment_frames=8, arch="hifigan",
        init="hifigan-universal", gan_after=0, d_warmup=1, mpd_channels="4,4,4,4,4", mrd_channels=4,
    )  # fmt: skip
    universal = hifigan.HifiGan.from_package("hifigan-universal").state_dict()

    run_main(train_vocoder, [*args, "--max-steps", "1"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["arch"] == "hifigan" and state["step"] == 1 and state["config"]["output_gain"] == 1.0
    # the critic-only step left the pretrained generator as it was
    assert all(torch.equal(state["model"][k], v) for k, v in universal.items())

    run_main(train_vocoder, [*args, "--max-steps", "2", "--resume"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["step"] == 2 and log_steps(run) == [1, 2]
    records = [json.loads(ln) for ln in (run / "log.jsonl").read_text().splitlines()]
    assert "d_loss" in records[0] and "adv" not in records[0] and {"adv", "fm", "d_loss", "mel_l1"} <= set(records[1])
    assert any(not torch.equal(state["model"][k], v) for k, v in universal.items())  # the generator moved

    voice = tmp_path / "voice"
    voice.mkdir()
    analysis = VocoderConfig()
    (voice / "config.json").write_text(json.dumps({k: getattr(analysis, k) for k in ANALYSIS_KEYS}))
    out = export_hifigan.export(run / "ckpt.pt", voice, output_gain=0.7)
    served = hifigan.load("voice-hifigan", voice)
    assert out == voice / hifigan.VOICE_DIR and served.config.output_gain == 0.7
    trained = hifigan.HifiGan(hifigan.HifiGanConfig.from_dict({**state["config"], "output_gain": 0.7}))
    trained.load_state_dict({k: v.half().float() for k, v in state["model"].items()})
    mel = torch.full((1, 80, 12), -4.0)
    with torch.inference_mode():
        assert torch.equal(served(mel), trained(mel))


def test_export_refuses_a_voice_vocoder_run(tmp_path):
    from training import export_hifigan

    torch.save({"arch": "voice", "config": {}, "model": {}}, tmp_path / "ckpt.pt")
    with pytest.raises(SystemExit, match="not a HiFi-GAN run"):
        export_hifigan.export(tmp_path / "ckpt.pt", tmp_path, 0.7)
