"""plain_vllm.py's pure parts: the stock Llama it writes has the voice's dimensions, prompts are seeded."""

import json

from transformers import LlamaConfig

from benchmarks.plain_vllm import LLAMA_KEYS, kv_bytes_per_token, prompts, write_plain_llama


def test_the_plain_llama_has_the_voices_dimensions_and_no_mel_head(tiny_model_dir, tmp_path):
    voice = json.loads((tiny_model_dir / "config.json").read_text())
    out = write_plain_llama(voice, tmp_path / "plain", seed=0)
    cfg = LlamaConfig.from_pretrained(out)
    assert cfg.architectures == ["LlamaForCausalLM"]
    assert all(getattr(cfg, k) == voice[k] for k in LLAMA_KEYS if k != "rope_theta")
    assert cfg.rope_parameters["rope_theta"] == voice["rope_theta"]  # where transformers 5 keeps it
    assert kv_bytes_per_token(voice, 2) == 2 * 2 * 2 * 32 * 2  # layers x (k, v) x kv heads x head dim x fp16


def test_prompts_are_seeded_phoneme_ids_between_bos_and_eos(tiny_model_dir):
    a, b = prompts(tiny_model_dir, 3, 20, seed=1), prompts(tiny_model_dir, 3, 20, seed=1)
    assert a == b != prompts(tiny_model_dir, 3, 20, seed=2)
    assert all(len(p) == 20 and p[0] == 1 and p[-1] == 2 and all(3 <= i < 256 for i in p[1:-1]) for p in a)
