"""Offline greedy inference with the serving pointer rules (uttera_server/model/pointer_logits.py).

Rules per step: the first generated token is pointer 0; later tokens move the pointer by
0..max_advance, never past the last phoneme; after `max_steps_per_phoneme` steps on one phoneme the
pointer must move (on the last phoneme only STOP remains); STOP only on the last phoneme. The step
whose input is pointer p_t emits mel chunk t; the step that samples STOP emits the last chunk.
Hence at most `P * max_steps_per_phoneme + 1` steps (the length cap; reaching it is a runaway).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from training.model import AcousticConfig, UtteraTTS
from uttera_server.model.pointer_rules import pointer_window


@dataclass(slots=True)
class Generation:
    pointers: list[int]  # p_0 .. p_{T-1}
    mel: torch.Tensor  # (n_mels, T * r) log-mel
    stopped: bool  # False: hit the length cap (runaway)
    # with `generate(keep_states=True)`: the final hidden state of each step (T, H), then, if it stopped,
    # the state at the STOP token fed as one more input (H); for mel heads other than the model's own
    states: torch.Tensor | None = None
    stop_state: torch.Tensor | None = None


def load_model_dir(path: str | Path, device: str = "cpu") -> UtteraTTS:
    path = Path(path)
    config = AcousticConfig.from_hf(json.loads((path / "config.json").read_text()))
    config.dropout = 0.0
    model = UtteraTTS(config)
    state = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    model.load_state_dict(state)
    return model.to(device).eval()


def allowed_window(outputs: list[int], n_phonemes: int, c: AcousticConfig) -> tuple[int, int, bool]:
    """[lo, hi] allowed pointers and whether STOP is allowed: the serving rules, on pointer indices."""
    return pointer_window(outputs, n_phonemes, max_advance=c.max_advance, max_dwell=c.max_steps_per_phoneme)


@torch.no_grad()
def generate(model: UtteraTTS, phoneme_ids: list[int], keep_states: bool = False) -> Generation:
    c = model.config
    P = len(phoneme_ids)
    if not 1 <= P <= c.max_phonemes:
        raise ValueError(f"prompt must have 1..{c.max_phonemes} phonemes, got {P}")
    device = next(model.parameters()).device
    caches: list[dict] = [{} for _ in range(c.num_hidden_layers)]
    tokens = torch.tensor([phoneme_ids], device=device)
    model(tokens, kv_caches=caches)  # prefill: emits no mel, next token is forced to pointer 0
    pointers: list[int] = [0]
    chunks: list[torch.Tensor] = []
    states: list[torch.Tensor] = []
    cap = P * c.max_steps_per_phoneme + 1
    stopped = False

    def step(token: int) -> torch.Tensor:
        s = P + len(states)
        tok = torch.tensor([[token]], device=device)
        return model(tok, positions=torch.tensor([[s]], device=device), kv_caches=caches)[0, 0]

    while len(pointers) <= cap:
        h = step(c.pointer_offset + pointers[-1])
        states.append(h)
        chunks.append(model.mel_head(h))
        logits = model.lm_head(h)
        lo, hi, stop_ok = allowed_window(pointers, P, c)
        best, best_v = None, -float("inf")
        if lo <= hi:
            v, i = logits[c.pointer_offset + lo : c.pointer_offset + hi + 1].max(0)
            best, best_v = lo + int(i), float(v)
        if stop_ok and (best is None or float(logits[c.stop_token_id]) > best_v):
            stopped = True
            break
        assert best is not None, "no pointer allowed and no stop"
        pointers.append(best)
    mel = torch.cat(chunks, 0).T if chunks else torch.zeros(c.n_mels, 0)
    if not keep_states:
        return Generation(pointers[: len(chunks)], mel, stopped)
    stop_state = step(c.stop_token_id) if stopped else None
    return Generation(pointers[: len(chunks)], mel, stopped, torch.stack(states), stop_state)
