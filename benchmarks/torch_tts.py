"""The acoustic model without vLLM: a plain PyTorch greedy loop with a KV cache (baseline (a)).

Same weights and the same spec as tests/engine/reference.py (docs/model-format.md): Llama decoder,
pointer tokens with phoneme-index embeddings, mel head on every decode step. The pointer rules are those
of uttera_server/pointer_logits.py (first token pointer 0; then advance 0..max_advance, never past the
last phoneme; at most `max_steps_per_phoneme` steps on one phoneme; STOP only on the last phoneme), and
`max_tokens` is MelEngine's, so both produce the same number of chunks for the same pointer path.

    tts = TorchTTS(model_dir, device="cpu", dtype=torch.bfloat16)
    mel = tts.generate(phoneme_ids)   # (T, n_mels) float32 log-mel, T = chunks * frames_per_step
"""

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from uttera_server.model.pointer_rules import pointer_window


def rms_norm(x, w, eps):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class TorchTTS:
    def __init__(self, model_dir, device="cpu", dtype=torch.float32, max_len: int | None = None):
        self.cfg = c = json.loads((Path(model_dir) / "config.json").read_text())
        self.device, self.dtype = torch.device(device), dtype
        w = load_file(str(Path(model_dir) / "model.safetensors"))
        self.w = {k: v.to(self.device, dtype) for k, v in w.items()}
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.layers, self.eps = c["num_hidden_layers"], c["rms_norm_eps"]
        self.offset, self.stop, self.max_phonemes = c["pointer_offset"], c["stop_token_id"], c["max_phonemes"]
        self.max_advance = int(c.get("max_advance", 3))
        self.max_dwell = int(c.get("max_steps_per_phoneme", 10))
        self.fps, self.n_mels = c["frames_per_step"], c["n_mels"]
        self.max_len = max_len = max_len or c["max_position_embeddings"]  # vLLM's max_model_len default
        # Fused projections: one matmul for q/k/v and one for gate/up per layer (as vLLM does).
        self.qkv = [
            torch.cat([self.w[f"model.layers.{i}.self_attn.{n}_proj.weight"] for n in "qkv"]).T.contiguous()
            for i in range(self.layers)
        ]
        self.gate_up = [
            torch.cat([self.w[f"model.layers.{i}.mlp.{n}_proj.weight"] for n in ("gate", "up")]).T.contiguous()
            for i in range(self.layers)
        ]
        self.o = [self.w[f"model.layers.{i}.self_attn.o_proj.weight"].T.contiguous() for i in range(self.layers)]
        self.down = [self.w[f"model.layers.{i}.mlp.down_proj.weight"].T.contiguous() for i in range(self.layers)]
        d = self.head_dim
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None]
        self.cos = ang.cos().to(self.device, dtype)[:, None]  # (max_len, 1, d/2)
        self.sin = ang.sin().to(self.device, dtype)[:, None]

    # --- one forward over new tokens, appending to the cache ---
    def _rope(self, x, pos):
        d = x.shape[-1] // 2
        cos, sin = self.cos[pos], self.sin[pos]
        x1, x2 = x[..., :d], x[..., d:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def _embed(self, ids, pos):
        is_ptr = (ids >= self.offset) & (ids < self.stop)
        index = torch.where(is_ptr, ids - self.offset, pos).clamp(0, self.max_phonemes - 1)
        keep = (ids != self.stop).to(self.dtype)[:, None]
        return self.w["model.embed_tokens.weight"][ids] + self.w["model.pos_embed.weight"][index] * keep

    def _forward(self, ids, start: int, cache):
        """ids (n,) at positions start..start+n-1; cache: per layer (k, v) of (max_len, kv_heads, d).
        Returns the final normed hidden state of the last position, (hidden,)."""
        n = ids.shape[0]
        pos = torch.arange(start, start + n, device=self.device)
        x = self._embed(ids, pos)
        h, kvh, d = self.heads, self.kv_heads, self.head_dim
        for i in range(self.layers):
            p = f"model.layers.{i}."
            y = rms_norm(x, self.w[p + "input_layernorm.weight"], self.eps)
            q, k, v = (y @ self.qkv[i]).split([h * d, kvh * d, kvh * d], -1)
            q = self._rope(q.view(n, h, d), pos)
            k = self._rope(k.view(n, kvh, d), pos)
            kc, vc = cache[i]
            kc[start : start + n], vc[start : start + n] = k, v.view(n, kvh, d)
            keys, values = kc[: start + n], vc[: start + n]
            if kvh != h:
                keys, values = keys.repeat_interleave(h // kvh, 1), values.repeat_interleave(h // kvh, 1)
            att = F.scaled_dot_product_attention(
                q.transpose(0, 1), keys.transpose(0, 1), values.transpose(0, 1), is_causal=n > 1
            )
            x = x + att.transpose(0, 1).reshape(n, h * d) @ self.o[i]
            y = rms_norm(x, self.w[p + "post_attention_layernorm.weight"], self.eps)
            gate, up = (y @ self.gate_up[i]).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ self.down[i]
        return rms_norm(x[-1], self.w["model.norm.weight"], self.eps)

    def _mel(self, hidden):
        w = self.w
        m = F.silu(hidden @ w["mel_head.fc1.weight"].T + w["mel_head.fc1.bias"])
        return (m @ w["mel_head.fc2.weight"].T + w["mel_head.fc2.bias"]).float().view(self.fps, self.n_mels)

    # --- pointer rules (uttera_server/pointer_logits.py) ---
    def _next(self, logits, outputs: list[int], n_phonemes: int) -> int:
        lo, hi, stop = pointer_window(
            outputs, n_phonemes, max_advance=self.max_advance, max_dwell=self.max_dwell, offset=self.offset
        )
        best, token = float("-inf"), self.stop
        if lo <= hi:
            window = logits[self.offset + lo : self.offset + hi + 1]
            j = int(torch.argmax(window))
            best, token = float(window[j]), self.offset + lo + j
        if stop and float(logits[self.stop]) > best:
            token = self.stop
        return token

    @torch.inference_mode()
    def generate(self, phoneme_ids: list[int]) -> torch.Tensor:
        """Greedy decoding of one sentence -> (T, n_mels) float32 log-mel on the CPU."""
        n = len(phoneme_ids)
        if n >= self.max_len:
            raise ValueError(f"prompt of {n} phonemes does not fit max_len {self.max_len}")
        # MelEngine asks for max_steps(n) + 1 tokens; like vLLM, stop at the model length.
        max_tokens = min(n * self.max_dwell + 2, self.max_len - n)
        size = n + max_tokens
        cache = [
            (
                torch.empty(size, self.kv_heads, self.head_dim, device=self.device, dtype=self.dtype),
                torch.empty(size, self.kv_heads, self.head_dim, device=self.device, dtype=self.dtype),
            )
            for _ in range(self.layers)
        ]
        lm_head = self.w["lm_head.weight"]
        hidden = self._forward(torch.tensor(phoneme_ids, device=self.device), 0, cache)
        outputs = [self._next(hidden @ lm_head.T, [], n)]
        chunks = []
        while outputs[-1] != self.stop and len(outputs) < max_tokens:
            hidden = self._forward(torch.tensor(outputs[-1:], device=self.device), n + len(outputs) - 1, cache)
            chunks.append(self._mel(hidden))
            outputs.append(self._next(hidden @ lm_head.T, outputs, n))
        self.last_pointers = [t - self.offset for t in outputs if t != self.stop]
        return torch.cat(chunks).cpu() if chunks else torch.zeros(0, self.n_mels)
