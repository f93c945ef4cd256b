"""Training for several voices and for the served mel: voice tokens, warm starts, aligned mels, export."""

import json
import shutil
import sys

import numpy as np
import pytest
import torch

from train_helpers import tiny_acoustic_config

TINY = ["--hidden-size", "32", "--num-attention-heads", "2", "--head-dim", "16", "--intermediate-size", "64"]
TINY += ["--num-hidden-layers", "2", "--device", "cpu", "--workers", "0", "--max-tokens", "400", "--warmup", "2"]


def random_vocoder_checkpoint(path):
    """A vocoder trainer's checkpoint (config + weights) of a random default-size vocoder, for export."""
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    torch.save({"config": VocoderConfig().to_dict(), "model": Vocoder(VocoderConfig()).state_dict()}, path)
    return path


def run_main(module, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()


def test_parse_voices():
    from training.train_acoustic import parse_voices

    assert parse_voices("/d/feat") == {"default": ("/d/feat", None)}
    assert parse_voices("/a:joe:1,/b:heart:255") == {"joe": ("/a", 1), "heart": ("/b", 255)}
    for bad in ("/a:joe:1,/b:joe:255", "/a:joe:1,/b:heart:1"):
        with pytest.raises(SystemExit, match="twice"):
            parse_voices(bad)


def test_voice_token_replaces_the_first_prompt_id(synthetic_data):
    from training.data import load_utterances

    _, feat = synthetic_data
    plain, _ = load_utterances(feat, 4, 3, 64)
    voiced, _ = load_utterances(feat, 4, 3, 64, voice_token=255)
    assert len(plain) == len(voiced) > 0
    for p, v in zip(plain, voiced):
        assert p.ids[0] == 1 and v.ids[0] == 255
        assert np.array_equal(p.ids[1:], v.ids[1:]) and np.array_equal(p.pointers, v.pointers)


@pytest.fixture(scope="module")
def two_voice_run(synthetic_data, tmp_path_factory):
    """A few steps of one tiny acoustic model on two 'voices' (the same data under tokens 1 and 255)."""
    from training import train_acoustic

    _, feat = synthetic_data
    run = tmp_path_factory.mktemp("two") / "ac"
    mp = pytest.MonkeyPatch()
    try:
        run_main(train_acoustic, [f"{feat}:joe:1,{feat}:heart:255", str(run), *TINY, "--max-steps", "2"], mp)
    finally:
        mp.undo()
    return run


def test_two_voice_checkpoint_and_export(two_voice_run, tmp_path):
    from training.export import main as export_main

    state = torch.load(two_voice_run / "ckpt.pt", weights_only=False)
    assert state["voice_tokens"] == {"joe": 1, "heart": 255}
    voc = random_vocoder_checkpoint(tmp_path / "voc.pt")
    out = tmp_path / "voice"
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(sys, "argv", ["export", str(two_voice_run / "ckpt.pt"), str(voc), str(out)])
        export_main()
    finally:
        mp.undo()
    cfg = json.loads((out / "config.json").read_text())
    assert [(v["id"], v["voice_token"], v["gender"]) for v in cfg["voices"]] == [
        ("joe", 1, "male"),
        ("heart", 255, "female"),
    ]
    assert json.loads((out / "vocoder" / "config.json").read_text())["output_gain"] == 0.5  # served headroom


def test_init_from_an_exported_directory(tmp_path):
    from training.export import export_acoustic
    from training.model import UtteraTTS
    from training.train_acoustic import init_from

    torch.manual_seed(0)
    src = UtteraTTS(tiny_acoustic_config())
    export_acoustic(src, tmp_path / "voice", {"name": "x"})
    dst = UtteraTTS(tiny_acoustic_config())
    init_from(dst, tmp_path / "voice", [1, 255])
    emb = dst.model.embed_tokens.weight
    assert torch.equal(emb[255], emb[1])  # a new voice starts as the ^ it replaces
    src_state = {k: v.half().float() for k, v in src.state_dict().items()}  # exported as fp16
    for k, v in dst.state_dict().items():
        if k != "model.embed_tokens.weight":
            assert torch.equal(v, src_state[k]), k
    # a token the directory was trained with keeps its own embedding
    cfg = json.loads((tmp_path / "voice" / "config.json").read_text())
    cfg["voices"] = [{"id": "joe", "voice_token": 1}, {"id": "heart", "voice_token": 255}]
    (tmp_path / "voice" / "config.json").write_text(json.dumps(cfg))
    again = UtteraTTS(tiny_acoustic_config())
    init_from(again, tmp_path / "voice", [1, 255])
    assert torch.equal(again.model.embed_tokens.weight[255], src_state["model.embed_tokens.weight"][255])


def test_init_from_a_directory_at_other_frames_per_step(tmp_path):
    from training.export import export_acoustic
    from training.model import UtteraTTS
    from training.train_acoustic import init_from

    torch.manual_seed(0)
    src = UtteraTTS(tiny_acoustic_config())  # 4 frames a step
    export_acoustic(src, tmp_path / "voice", {"name": "x"})
    dst = UtteraTTS(tiny_acoustic_config(frames_per_step=8, max_advance=4))
    init_from(dst, tmp_path / "voice", [1])
    src_state = {k: v.half().float() for k, v in src.state_dict().items()}
    n_mels = dst.config.n_mels
    for key in ("mel_head.fc2.weight", "mel_head.fc2.bias"):
        old = src_state[key].unflatten(0, (4, n_mels))
        new = dst.state_dict()[key].unflatten(0, (8, n_mels))
        for j in range(8):  # stretched in time: frames 0, 0, 1, 1, 2, 2, 3, 3
            assert torch.equal(new[j], old[j // 2]), (key, j)
    for k, v in dst.state_dict().items():
        if not k.startswith("mel_head.fc2."):
            assert torch.equal(v, src_state[k]), k


def test_a_warm_start_at_8_frames_per_step_trains_and_exports(two_voice_run, synthetic_data, tmp_path, monkeypatch):
    from training import export, train_acoustic

    _, feat = synthetic_data
    voc = random_vocoder_checkpoint(tmp_path / "voc.pt")
    run_main(export, [str(two_voice_run / "ckpt.pt"), str(voc), str(tmp_path / "voice4")], monkeypatch)
    voices = f"{feat}:joe:1,{feat}:heart:255"
    init = ["--init", str(tmp_path / "voice4"), "--device", "cpu", "--workers", "0", "--max-tokens", "400"]
    with pytest.raises(SystemExit, match="keeps the directory's network"):
        run_main(train_acoustic, [voices, str(tmp_path / "bad"), *init, "--hidden-size", "64"], monkeypatch)
    run8 = tmp_path / "ac8"
    args = [voices, str(run8), *init, "--frames-per-step", "8", "--max-advance", "4", "--max-steps", "2"]
    run_main(train_acoustic, args, monkeypatch)
    state = torch.load(run8 / "ckpt.pt", weights_only=False)
    assert (state["config"]["frames_per_step"], state["config"]["max_advance"], state["step"]) == (8, 4, 2)
    # an exported vocoder directory goes into the new voice as it is
    run_main(
        export, [str(run8 / "ckpt.pt"), str(tmp_path / "voice4" / "vocoder"), str(tmp_path / "voice8")], monkeypatch
    )
    cfg = json.loads((tmp_path / "voice8" / "config.json").read_text())
    assert (cfg["frames_per_step"], cfg["max_advance"]) == (8, 4)
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / "voice8" / "vocoder" / name).read_bytes() == (
            tmp_path / "voice4" / "vocoder" / name
        ).read_bytes()


def test_next_tokens_are_the_pointer_each_step_moves_to_then_stop(synthetic_data):
    from training.data import collate, load_utterances, next_tokens

    c = tiny_acoustic_config()
    utts, _ = load_utterances(synthetic_data[1], c.frames_per_step, c.max_advance, c.max_phonemes)
    batch = collate(utts[:3], c.pointer_offset)
    nxt = next_tokens(batch, c.max_advance, c.stop_token_id)
    for i, u in enumerate(utts[:3]):
        P = len(u.ids)
        got = nxt[i, P : P + len(u.pointers)].tolist()
        assert got == [c.pointer_offset + p for p in u.pointers[1:].tolist()] + [c.stop_token_id]


def test_a_mel_next_pointer_head_starts_as_its_parent_and_learns_from_the_next_token(synthetic_data, tmp_path):
    from training.data import collate, load_utterances
    from training.export import export_acoustic
    from training.model import UtteraTTS
    from training.train_acoustic import acoustic_loss, init_from

    torch.manual_seed(0)
    parent = UtteraTTS(tiny_acoustic_config())
    export_acoustic(parent, tmp_path / "voice", {"name": "x"})
    child = UtteraTTS(tiny_acoustic_config(mel_next_pointer=True))
    init_from(child, tmp_path / "voice", [])
    c = child.config
    h = torch.randn(5, c.hidden_size)
    nxt = torch.tensor([c.pointer_offset, c.pointer_offset + 3, c.pointer_offset + 1, c.stop_token_id, 7])
    half = UtteraTTS(tiny_acoustic_config())
    half.load_state_dict({k: v.half().float() for k, v in parent.state_dict().items()})
    assert torch.allclose(child.mel(h, nxt), half.mel_head(h), atol=1e-6)  # the added input starts at zero
    with pytest.raises(ValueError, match="next token"):
        child.mel_head(h)
    utts, _ = load_utterances(synthetic_data[1], c.frames_per_step, c.max_advance, c.max_phonemes)
    loss, _ = acoustic_loss(child, collate(utts[:4], c.pointer_offset))
    loss.backward()
    assert child.mel_head.next_proj.weight.grad.abs().sum() > 0  # the next token's embedding reaches the loss
    with pytest.raises(SystemExit, match="does not serve"):
        export_acoustic(child, tmp_path / "child", {"name": "x"})


def test_aligned_mels_read_an_exported_voice_as_its_checkpoint(two_voice_run, tmp_path):
    from training import aligned_mels
    from training.export import export_acoustic

    trained = aligned_mels.load_model(str(two_voice_run / "ckpt.pt"), "cpu")
    export_acoustic(trained, tmp_path / "voice", {"name": "x"})
    exported = aligned_mels.load_model(str(tmp_path / "voice"), "cpu")
    assert not exported.training and exported.config == trained.config
    for k, v in exported.state_dict().items():
        assert torch.equal(v, trained.state_dict()[k].half().float()), k


def test_aligned_mels_keep_every_utterance_and_frame(two_voice_run, synthetic_data, tmp_path):
    from training import aligned_mels

    _, feat = synthetic_data
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(
            sys, "argv", ["x", str(two_voice_run / "ckpt.pt"), str(feat), str(tmp_path / "pred"), "--device", "cpu"]
        )
        aligned_mels.main()
    finally:
        mp.undo()
    pred, ref = np.load(tmp_path / "pred" / "pred_00.npz"), np.load(feat / "feat_00.npz")
    assert np.array_equal(pred["mel_off"], ref["mel_off"])
    assert pred["mel"].shape == ref["mel"].shape and pred["mel"].dtype == np.float16
    assert not np.allclose(pred["mel"], ref["mel"])  # the model's, not a copy of the teacher's


def test_sampler_pairs_audio_with_the_same_frames_of_mel(synthetic_data, tmp_path):
    """With the teacher's own mel as 'predicted' mel, a segment's mel must equal the mel of its audio."""
    from training.train_vocoder import SegmentSampler
    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    synth, feat = synthetic_data
    (tmp_path / "pred").mkdir()
    shutil.copy(feat / "feat_00.npz", tmp_path / "pred" / "pred_00.npz")
    sampler = SegmentSampler([str(synth)], 256, "cpu", pred_dirs=[str(tmp_path / "pred")])
    g = torch.Generator().manual_seed(0)
    wav, pred = sampler.sample(8, 16, g)
    assert pred is not None and pred.shape == (8, 80, 16)
    mel = MelSpectrogram(VocoderConfig())(wav)
    assert (mel - pred)[..., 3:-3].abs().max() < 0.05  # fp16 storage; segment edges are padded differently
    wav2, _ = sampler.sample(8, 16, g)
    assert (MelSpectrogram(VocoderConfig())(wav2) - pred).abs().mean() > 0.1  # and other audio does not


def test_vocoder_learns_from_predicted_mels_from_an_init(synthetic_data, tmp_path, monkeypatch):
    from training import train_vocoder
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    synth, feat = synthetic_data
    (tmp_path / "pred").mkdir()
    shutil.copy(feat / "feat_00.npz", tmp_path / "pred" / "pred_00.npz")
    init = Vocoder(VocoderConfig(dim=16, intermediate_dim=32, num_layers=1, output_gain=0.5)).save(tmp_path / "init")
    run = tmp_path / "voc"
    argv = [str(synth), str(run), "--device", "cpu", "--batch", "2", "--segment-frames", "16", "--log-every", "1"]
    run_main(
        train_vocoder,
        [*argv, "--init", str(init), "--pred-mels", str(tmp_path / "pred"), "--max-steps", "2", "--gan-after", "0"],
        monkeypatch,
    )
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["step"] == 2 and "disc" in state
    assert state["config"]["dim"] == 16 and state["config"]["output_gain"] == 1.0  # trained at unit gain


def test_vocoder_zero_dc_bin_over_an_init_then_export_beside_a_voice(synthetic_data, tmp_path, monkeypatch):
    """`--zero-dc-bin` changes the --init vocoder's config, not its weights; `export VOICE_DIR CKPT OUT` puts
    the trained vocoder beside the voice's acoustic model, byte for byte."""
    from training import export, train_vocoder
    from training.export import DEFAULT_VOICE, export_acoustic, export_vocoder
    from training.model import UtteraTTS
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    synth, _ = synthetic_data
    torch.manual_seed(0)
    voice = tmp_path / "voice"
    export_acoustic(UtteraTTS(tiny_acoustic_config()).eval(), voice, DEFAULT_VOICE)
    export_vocoder(Vocoder.random(VocoderConfig(dim=16, intermediate_dim=32, num_layers=1)), voice)
    assert VocoderConfig.load(voice / "vocoder").zero_dc_bin is False
    run = tmp_path / "voc"
    args = [str(synth), str(run), "--device", "cpu", "--batch", "2", "--segment-frames", "16", "--max-steps", "1"]
    run_main(train_vocoder, [*args, "--init", str(voice / "vocoder"), "--zero-dc-bin", "--gan-after", "2"], monkeypatch)
    state = torch.load(run / "ckpt.pt", weights_only=False)
    assert state["config"]["zero_dc_bin"] is True and state["config"]["dim"] == 16

    out = tmp_path / "out"
    run_main(export, [str(voice), str(run / "ckpt.pt"), str(out)], monkeypatch)
    for name in ("config.json", "model.safetensors"):
        assert (out / name).read_bytes() == (voice / name).read_bytes()
    exported = VocoderConfig.load(out / "vocoder")
    assert exported.zero_dc_bin is True and exported.output_gain == export.OUTPUT_GAIN
    reloaded = Vocoder.from_dir(out / "vocoder", dtype=torch.float32)
    served = reloaded.state_dict()
    assert state["model"].keys() == served.keys()
    for name, weight in state["model"].items():
        assert torch.equal(served[name], weight.half().float()), name  # fp16 on disk


def test_mel_head_probe_rows_carry_the_next_steps_state(synthetic_data):
    """Each row's next hidden state is the following row's hidden state in its utterance; the last row's is
    the state at STOP, as a model run on the utterance with STOP appended gives it."""
    from benchmarks.mel_head_probe import collect
    from training.data import collate, read_shard, training_utterance
    from training.model import UtteraTTS

    _, feat = synthetic_data
    torch.manual_seed(0)
    model = UtteraTTS(tiny_acoustic_config()).eval()
    rows = collect(model, feat, None, batch=5)  # batches of unequal lengths: padding between utterances
    assert len(rows.counts) == 12 and rows.hidden.shape == rows.next_hidden.shape
    start = 0
    for count in rows.counts:
        assert torch.equal(rows.next_hidden[start : start + count - 1], rows.hidden[start + 1 : start + count])
        start += count
    c = model.config
    f = read_shard(feat / "feat_00.npz", None)[-1]
    b = collate([training_utterance(f, c.frames_per_step, c.max_advance)], c.pointer_offset)
    with torch.no_grad():
        h = model(torch.cat([b["tokens"], torch.tensor([[c.stop_token_id]])], dim=1))
    assert torch.allclose(rows.next_hidden[-1], h[0, -1], atol=1e-5)
    assert torch.allclose(rows.hidden[-1], h[0, -2], atol=1e-5)


def test_mel_head_probe_free_running_rows_give_the_models_own_mel():
    """Free-running rows through the model's own head are the mel `generate` gives; each row's next state is
    the following step's, the last one the state at STOP."""
    from benchmarks.mel_head_probe import free_running, new_head, predict
    from training import text_frontend
    from training.infer import generate
    from training.model import UtteraTTS

    torch.manual_seed(0)
    model = UtteraTTS(tiny_acoustic_config(max_steps_per_phoneme=3)).eval()
    lines = ["Hello there. How are you?", "A short one."]
    rows, per_line = free_running(model, lines, voice_token=None)
    assert per_line == [2, 1] and len(rows.counts) == 3
    chunks = predict(new_head(model, False), rows, "plain").split(rows.counts)
    first = generate(model, list(text_frontend.prepare(lines[0])[0].phoneme_ids), keep_states=True)
    assert torch.allclose(chunks[0].flatten(0, 1).T, first.mel, atol=1e-5)
    assert torch.equal(rows.next_hidden[: rows.counts[0] - 1], rows.hidden[1 : rows.counts[0]])
    expected_last = first.stop_state if first.stopped else first.states[-1]
    assert torch.allclose(rows.next_hidden[rows.counts[0] - 1], expected_last, atol=1e-6)
