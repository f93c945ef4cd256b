"""The one contract between the model and the patched runner: a step's mel chunks, handed over once.

`UtteraTTSForCausalLM.compute_logits` computes, from the same hidden states as the logits, one log-mel
chunk per logits row and `put`s it here; after sampling, the runner patch (engine_patches/gpu_model_runner.py)
takes it and gives row i to the request of logits row i (vLLM 0.32 orders the logits rows as
`input_batch.req_ids`, one row per request that samples).

That only holds while vLLM calls `compute_logits` exactly once per step, for the sampled rows. Features
that call it again inside a step (prompt logprobs: once more over the prompt positions; speculative
decoding's rejection sampling) would hand the runner the wrong rows and mix audio between requests with no
error. So a second `put` before the runner's `take` raises `StepMelContractError` and the step fails.

vLLM's warm-up (profile run, sampler warm-up) calls `compute_logits` with no step after it, so nothing is
taken; until the runner's first `take`, a `put` replaces what warm-up left. The first served step is
therefore not checked; every later one is.
"""

import torch


class StepMelContractError(RuntimeError):
    """vLLM called `compute_logits` twice in one step: the mel rows would not match the sampled requests."""


class StepMel:
    """One step's mel chunks `(rows, frames_per_step, n_mels)` log-mel (rows: logits rows, batch order),
    from `put` (the model's `compute_logits`) to `take` (the runner after sampling)."""

    __slots__ = ("_mel", "_serving")

    def __init__(self) -> None:
        self._mel: torch.Tensor | None = None
        self._serving = False  # True from the runner's first take: warm-up is over

    def put(self, mel: torch.Tensor) -> None:
        if self._mel is not None and self._serving:
            raise StepMelContractError(
                f"compute_logits ran twice in one engine step (a {tuple(self._mel.shape)} mel chunk was not "
                f"taken yet, now {tuple(mel.shape)}): uttera's runner patch needs exactly one compute_logits "
                "per step, for the sampled rows. Prompt logprobs and speculative decoding are not supported."
            )
        self._mel = mel

    def peek(self) -> torch.Tensor | None:
        """The chunks `put` this step, without taking them (None if nothing was put)."""
        return self._mel

    def take(self) -> torch.Tensor | None:
        """The chunks `put` this step (None if the step computed no logits); the next `put` starts a step."""
        mel, self._mel = self._mel, None
        self._serving = True
        return mel
