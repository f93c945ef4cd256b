"""UtteraTTS acoustic model as a vLLM model (see docs/model-format.md).

A Llama decoder from vLLM's own layers (paged attention, fused qkv/gate-up) whose generated tokens are
*pointers* into the phoneme prompt. Besides the logits, every sampled row yields one mel chunk of
`frames_per_step` frames: `compute_logits` runs the mel head on the same hidden states and hands the
result over in `step_mel` (step_mel.py: the contract with the runner patch, engine_patches/gpu_model_runner.py,
which routes it per request).
"""

import torch
from torch import nn
from vllm.config import VllmConfig
from vllm.sequence import IntermediateTensors
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm.model_executor.models.llama import LlamaForCausalLM

from .step_mel import StepMel


class MelHead(nn.Module):
    """Hidden state `(N, hidden)` -> log-mel chunk `(N, frames_per_step, n_mels)`."""

    def __init__(self, hidden: int, frames_per_step: int, n_mels: int):
        super().__init__()
        self.frames_per_step = frames_per_step
        self.n_mels = n_mels
        self.fc1 = nn.Linear(hidden, hidden)
        self.fc2 = nn.Linear(hidden, frames_per_step * n_mels)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(nn.functional.silu(self.fc1(h)))
        return out.view(-1, self.frames_per_step, self.n_mels)


class UtteraTTSForCausalLM(LlamaForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        config = vllm_config.model_config.hf_config
        self.pointer_offset = int(config.pointer_offset)
        self.max_phonemes = int(config.max_phonemes)
        self.stop_token_id = int(config.stop_token_id)
        # Lives under `model.` so checkpoints name it `model.pos_embed.weight`; LlamaModel's
        # compiled forward never touches it (embeddings are built here, passed as inputs_embeds).
        self.model.pos_embed = VocabParallelEmbedding(self.max_phonemes, config.hidden_size)
        self.mel_head = MelHead(config.hidden_size, int(config.frames_per_step), int(config.n_mels))
        self.step_mel = StepMel()

    def embed_input_ids(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token embedding plus the absolute phoneme-index embedding (docs/model-format.md).

        Phoneme tokens use their sequence position, pointer tokens the phoneme they point at, so one
        attention head can find "the phoneme under the pointer" by matching these vectors.
        """
        x: torch.Tensor = self.model.embed_tokens(input_ids)
        if positions is None:
            return x
        is_pointer = (input_ids >= self.pointer_offset) & (input_ids < self.stop_token_id)
        index = torch.where(is_pointer, input_ids - self.pointer_offset, positions)
        index = index.clamp(0, self.max_phonemes - 1)
        pos: torch.Tensor = self.model.pos_embed(index)
        keep = (input_ids != self.stop_token_id).unsqueeze(-1).to(x.dtype)
        return x + pos * keep

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors: IntermediateTensors | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor | IntermediateTensors:
        if inputs_embeds is None:
            assert input_ids is not None  # vLLM passes one of the two
            inputs_embeds = self.embed_input_ids(input_ids, positions)
        hidden: torch.Tensor | IntermediateTensors = self.model(None, positions, intermediate_tensors, inputs_embeds)
        return hidden

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        """Logits `(N, vocab)` of the sampled rows `(N, hidden)`; their mel chunks go to `step_mel`."""
        self.step_mel.put(self.mel_head(hidden_states))
        return super().compute_logits(hidden_states)
