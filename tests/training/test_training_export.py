"""Export -> reload: documented names and shapes, the serving reader accepts it, same outputs."""

import importlib.util
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from training.export import DEFAULT_VOICE, export_acoustic, export_vocoder
from training.infer import allowed_window, generate, load_model_dir
from training.model import UtteraTTS

from train_helpers import tiny_acoustic_config

REPO = Path(__file__).resolve().parents[2]


def expected_shapes(c) -> dict[str, tuple[int, ...]]:
    """The table of docs/model-format.md."""
    h, v = c.hidden_size, c.vocab_size
    shapes = {
        "model.embed_tokens.weight": (v, h),
        "model.pos_embed.weight": (c.max_phonemes, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (v, h),
        "mel_head.fc1.weight": (h, h),
        "mel_head.fc1.bias": (h,),
        "mel_head.fc2.weight": (c.frames_per_step * c.n_mels, h),
        "mel_head.fc2.bias": (c.frames_per_step * c.n_mels,),
    }
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q, h),
            p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (c.intermediate_size, h),
            p + "mlp.up_proj.weight": (c.intermediate_size, h),
            p + "mlp.down_proj.weight": (h, c.intermediate_size),
        }
    return shapes


def make_voice(tmp_path):
    from vocoder.config import VocoderConfig
    from vocoder.model import Vocoder

    torch.manual_seed(0)
    c = tiny_acoustic_config(max_phonemes=512, max_position_embeddings=4096)
    model = UtteraTTS(c).eval()
    out = tmp_path / "voice"
    export_acoustic(model, out, DEFAULT_VOICE)
    export_vocoder(Vocoder.random(VocoderConfig(dim=16, intermediate_dim=32, num_layers=1)), out)
    return model, out


def test_export_names_shapes_and_dtype(tmp_path):
    model, out = make_voice(tmp_path)
    weights = load_file(str(out / "model.safetensors"))
    assert {k: tuple(v.shape) for k, v in weights.items()} == expected_shapes(model.config)
    assert all(v.dtype == torch.float16 for v in weights.values())
    assert all(v.dtype == torch.float16 for v in load_file(str(out / "vocoder/model.safetensors")).values())
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["UtteraTTSForCausalLM"] and cfg["model_type"] == "llama"
    assert cfg["stop_token_id"] == cfg["pointer_offset"] + cfg["max_phonemes"] == cfg["vocab_size"] - 1
    assert cfg["voice"]["random_weights"] is False

    from uttera_server.model_dir import VoiceModelConfig
    from vocoder.config import VocoderConfig

    served = VoiceModelConfig.load(out)
    assert served.frames_per_step == 4 and served.max_steps_per_phoneme == model.config.max_steps_per_phoneme
    VocoderConfig.load(out / "vocoder").check_matches(cfg)


def test_reload_matches_and_equals_reference_forward(tmp_path):
    model, out = make_voice(tmp_path)
    reloaded = load_model_dir(out)
    tokens = [1, 20, 59, 24, 2, model.config.pointer_offset, model.config.pointer_offset + 1]
    x = torch.tensor([tokens])
    with torch.no_grad():
        ours = reloaded.mel_head(reloaded(x))[0]
    # The spec-only reference forward (tests/engine/reference.py), which the engine is tested against.
    spec = importlib.util.spec_from_file_location("reference", REPO / "tests/engine/reference.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    expected = ref.ReferenceModel(out).mel(tokens)
    torch.testing.assert_close(ours, expected, atol=1e-4, rtol=1e-4)


def test_generate_obeys_pointer_rules(tmp_path):
    model, out = make_voice(tmp_path)
    m = load_model_dir(out)
    ids = [1, 20, 59, 24, 120, 27, 2]
    g = generate(m, ids)
    assert g.pointers[0] == 0 and g.stopped
    assert g.pointers[-1] == len(ids) - 1
    assert all(0 <= b - a <= m.config.max_advance for a, b in zip(g.pointers, g.pointers[1:]))
    assert g.mel.shape == (m.config.n_mels, len(g.pointers) * m.config.frames_per_step)
    assert len(g.pointers) <= len(ids) * m.config.max_steps_per_phoneme + 1
    # The dwell limit forces a move; on the last phoneme only STOP remains.
    c = m.config
    assert allowed_window([0] * c.max_steps_per_phoneme, 7, c) == (1, 3, False)
    assert allowed_window([6] * c.max_steps_per_phoneme, 7, c) == (1, 0, True)
