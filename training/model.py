"""Plain-PyTorch twin of the served acoustic model (docs/model-format.md, uttera_server/model/tts_model.py).

The math is vLLM's Llama exactly: pre-norm RMSNorm (`rms_norm_eps`), neox-style RoPE on sequence
positions (`rope_theta`), causal attention without biases, SiLU-gated MLP, a final RMSNorm whose
output feeds both `lm_head` (pointer/STOP logits) and `mel_head` (`frames_per_step` log-mel frames).
Parameter names are the Hugging Face Llama names the vLLM loader expects, so `state_dict()` is the
checkpoint to export.

Shapes: B batch, S sequence (prompt phonemes then pointer tokens), H hidden.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(slots=True)
class AcousticConfig:
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 6
    num_key_value_heads: int = 6
    head_dim: int = 64
    intermediate_size: int = 1536
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    n_phoneme_tokens: int = 256
    max_phonemes: int = 512
    frames_per_step: int = 4
    max_advance: int = 3
    max_steps_per_phoneme: int = 24
    n_mels: int = 80
    sample_rate: int = 22050
    hop_length: int = 256
    n_fft: int = 1024
    win_length: int = 1024
    f_min: float = 0.0
    f_max: float = 8000.0
    dropout: float = 0.0
    """Residual dropout, training only (identity in eval mode; not a serving parameter)."""
    mel_next_pointer: bool = False
    """The mel head also sees the embedding of the token the step moves to (its next pointer, or STOP), as
    drawn by the served sampler: what the step's later frames otherwise have to guess (benchmarks/RESULTS.md,
    "Which frames lose, by phoneme"). Training only for now: `export.py` refuses such a model."""

    def __post_init__(self) -> None:
        if self.num_attention_heads * self.head_dim != self.hidden_size:
            raise ValueError("num_attention_heads * head_dim must equal hidden_size")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.max_advance < 1 or self.frames_per_step < 1:
            raise ValueError("max_advance and frames_per_step must be >= 1")

    @property
    def pointer_offset(self) -> int:
        return self.n_phoneme_tokens

    @property
    def stop_token_id(self) -> int:
        return self.pointer_offset + self.max_phonemes

    @property
    def vocab_size(self) -> int:
        return self.stop_token_id + 1

    def to_hf(self, voice: dict) -> dict:
        """config.json content: a Llama config plus the keys of docs/model-format.md."""
        d = dataclasses.asdict(self)
        d.pop("dropout")
        d.update(
            model_type="llama",
            architectures=["UtteraTTSForCausalLM"],
            vocab_size=self.vocab_size,
            pointer_offset=self.pointer_offset,
            stop_token_id=self.stop_token_id,
            hidden_act="silu",
            attention_bias=False,
            mlp_bias=False,
            tie_word_embeddings=False,
            torch_dtype="float16",
            bos_token_id=None,
            eos_token_id=self.stop_token_id,
            pad_token_id=None,
            voice=voice,
        )
        return d

    @classmethod
    def from_hf(cls, d: dict) -> "AcousticConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """positions (B, S) int -> cos, sin (B, 1, S, head_dim) float32, neox layout (halves)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim))
    freqs = positions.float().unsqueeze(-1) * inv_freq  # (B, S, head_dim/2)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, kv_cache=None):
        B, S, _ = x.shape
        c = self.c
        q = self.q_proj(x).view(B, S, c.num_attention_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, S, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, S, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if kv_cache is not None:
            if kv_cache.get("k") is not None:
                k = torch.cat([kv_cache["k"], k], dim=2)
                v = torch.cat([kv_cache["v"], v], dim=2)
            kv_cache["k"], kv_cache["v"] = k, v
        rep = c.num_attention_heads // c.num_key_value_heads
        if rep > 1:
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        # Causal over the whole (cached + new) sequence: new queries sit at its end.
        causal = S > 1
        if causal and k.shape[2] != S:
            raise ValueError("chunked prefill with a cache is not supported")
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1))


class MLP(nn.Module):
    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x, cos, sin, kv_cache=None):
        x = x + self.dropout(self.self_attn(self.input_layernorm(x), cos, sin, kv_cache))
        return x + self.dropout(self.mlp(self.post_attention_layernorm(x)))


class Backbone(nn.Module):
    """Named `model` in the parent so parameters read `model.layers.{i}...`."""

    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.pos_embed = nn.Embedding(c.max_phonemes, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class MelHead(nn.Module):
    """Hidden (..., H) [+ the next token's embedding (..., H)] -> log-mel chunk (..., frames_per_step,
    n_mels), frame-major."""

    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.r, self.n_mels = c.frames_per_step, c.n_mels
        self.fc1 = nn.Linear(c.hidden_size, c.hidden_size)
        self.fc2 = nn.Linear(c.hidden_size, c.frames_per_step * c.n_mels)
        self.next_proj = nn.Linear(c.hidden_size, c.hidden_size, bias=False) if c.mel_next_pointer else None

    def forward(self, h, next_embedding=None):
        x = self.fc1(h)
        if self.next_proj is not None:
            if next_embedding is None:
                raise ValueError("this mel head (mel_next_pointer) needs the next token's embedding")
            x = x + self.next_proj(next_embedding)
        return self.fc2(F.silu(x)).unflatten(-1, (self.r, self.n_mels))


class UtteraTTS(nn.Module):
    def __init__(self, c: AcousticConfig):
        super().__init__()
        self.config = c
        self.model = Backbone(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.mel_head = MelHead(c)
        self.apply(self._init)
        if self.mel_head.next_proj is not None:  # starts as a head without it (a warm start keeps its parent)
            nn.init.zeros_(self.mel_head.next_proj.weight)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The embedding rule of docs/model-format.md. tokens, positions (B, S) -> (B, S, H)."""
        c = self.config
        x = self.model.embed_tokens(tokens)
        is_ptr = (tokens >= c.pointer_offset) & (tokens < c.stop_token_id)
        index = torch.where(is_ptr, tokens - c.pointer_offset, positions).clamp(0, c.max_phonemes - 1)
        keep = (tokens != c.stop_token_id).unsqueeze(-1).to(x.dtype)
        return x + self.model.pos_embed(index) * keep

    def mel(self, h: torch.Tensor, next_tokens: torch.Tensor) -> torch.Tensor:
        """Mel chunks (..., r, n_mels) of final hidden states h (..., H) whose steps moved to `next_tokens` (...):
        pointer tokens or STOP (read only by a `mel_next_pointer` head)."""
        if self.mel_head.next_proj is None:
            return self.mel_head(h)
        return self.mel_head(h, self.embed(next_tokens, torch.zeros_like(next_tokens)))

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None, kv_caches=None):
        """tokens (B, S) -> final-norm hidden states (B, S, H). Right padding needs no mask (causal)."""
        if positions is None:
            positions = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
        x = self.embed(tokens, positions)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, None if kv_caches is None else kv_caches[i])
        return self.model.norm(x)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def n_chunks(n_frames: int, r: int) -> int:
    return math.ceil(n_frames / r)
