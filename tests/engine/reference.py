"""A plain-PyTorch forward of the UtteraTTS acoustic model (docs/model-format.md), written from the spec
independently of vLLM: the engine tests compare every mel chunk the engine streams against it."""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, positions, theta):
    # x: (T, heads, head_dim); neox style: rotate halves.
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions[:, None].double() * inv[None]
    cos, sin = ang.cos().float()[:, None], ang.sin().float()[:, None]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class ReferenceModel:
    def __init__(self, model_dir: Path):
        self.cfg = json.loads((Path(model_dir) / "config.json").read_text())
        self.w = {k: v.float() for k, v in load_file(str(Path(model_dir) / "model.safetensors")).items()}

    @torch.no_grad()
    def mel(self, tokens: list[int]) -> torch.Tensor:
        """Mel chunks `(len(tokens), frames_per_step, n_mels)` for every position of `tokens`."""
        c, w = self.cfg, self.w
        ids = torch.tensor(tokens)
        pos = torch.arange(len(tokens))
        off, stop, maxp = c["pointer_offset"], c["stop_token_id"], c["max_phonemes"]
        is_ptr = (ids >= off) & (ids < stop)
        index = torch.where(is_ptr, ids - off, pos).clamp(0, maxp - 1)
        x = w["model.embed_tokens.weight"][ids] + w["model.pos_embed.weight"][index] * (ids != stop)[:, None]
        h, hd = c["num_attention_heads"], c["head_dim"]
        kvh = c["num_key_value_heads"]
        eps = c["rms_norm_eps"]
        mask = torch.ones(len(tokens), len(tokens), dtype=torch.bool).tril()
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            y = rms_norm(x, w[p + "input_layernorm.weight"], eps)
            q = (y @ w[p + "self_attn.q_proj.weight"].T).view(-1, h, hd)
            k = (y @ w[p + "self_attn.k_proj.weight"].T).view(-1, kvh, hd)
            v = (y @ w[p + "self_attn.v_proj.weight"].T).view(-1, kvh, hd)
            q, k = rope(q, pos, c["rope_theta"]), rope(k, pos, c["rope_theta"])
            k = k.repeat_interleave(h // kvh, 1)
            v = v.repeat_interleave(h // kvh, 1)
            att = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
            )
            x = x + att.transpose(0, 1).reshape(len(tokens), -1) @ w[p + "self_attn.o_proj.weight"].T
            y = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
            gate = torch.nn.functional.silu(y @ w[p + "mlp.gate_proj.weight"].T)
            x = x + (gate * (y @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = rms_norm(x, w["model.norm.weight"], eps)
        m = torch.nn.functional.silu(x @ w["mel_head.fc1.weight"].T + w["mel_head.fc1.bias"])
        m = m @ w["mel_head.fc2.weight"].T + w["mel_head.fc2.bias"]
        return m.view(len(tokens), c["frames_per_step"], c["n_mels"])
