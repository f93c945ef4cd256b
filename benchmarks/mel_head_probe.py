"""Does the mel head gain from knowing where the pointer goes next? A probe on a trained model's frozen states.

    python -m benchmarks.mel_head_probe MODEL_DIR TRAIN_FEAT EVAL_FEAT [--voice-token T] [--epochs 40]
        [--lr 3e-4] [--seed 0] [--out OUT.json]

The model (an exported voice) runs teacher-forced once over both feature sets (`training.features`): at
every pointer position it keeps the final hidden state, the token the step moves to (the next pointer, or
STOP: `training.data.next_tokens`) and the teacher's chunk. Heads start from the model's own mel head and
train on TRAIN_FEAT's rows for the same steps with the same seed (Adam, L1):
- `plain`: the head as it is;
- `next`: the head plus the next token's embedding (the model's own, frozen) through a projection that
  starts at zero (`AcousticConfig.mel_next_pointer`).
Judged on EVAL_FEAT (held out), with the model's head untrained (`as is`) for reference: mean |log-mel -
teacher's| over all frames, by place in the step, and by place split into frames that voice the step's
own phoneme and frames past a phoneme change inside the step (`benchmarks.mel_step_position`).

The backbone is frozen, so `next - plain` is a lower bound on what the next pointer gives a model trained
with it end to end; `plain - as is` shows what the extra head training alone does. Prints a table; writes
JSON with the command.
"""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from benchmarks import machine
from benchmarks.mel_step_position import by_position, by_position_and_phoneme
from training.aligned_mels import load_model
from training.data import Utterance, collate, next_tokens, read_shard, training_utterance
from training.model import MelHead, UtteraTTS
from training.targets import TargetError


@dataclasses.dataclass
class Rows:
    """Every pointer position of a feature set: hidden (N, H), next-token embedding (N, H), teacher chunk
    (N, r, n_mels); per utterance its rows' count, its frames (F, n_mels) and phoneme durations."""

    hidden: torch.Tensor
    next_embedding: torch.Tensor
    target: torch.Tensor
    counts: list[int]
    frames: list[np.ndarray]
    durations: list[np.ndarray]


@torch.no_grad()
def collect(model: UtteraTTS, feat_dir: Path, voice_token: int | None, batch: int = 16) -> Rows:
    c = model.config
    utts: list[Utterance] = []
    frames: list[np.ndarray] = []
    durations: list[np.ndarray] = []
    for path in sorted(feat_dir.glob("feat_*.npz")):
        for f in read_shard(path, voice_token):
            if len(f.ids) > c.max_phonemes:
                continue
            try:
                utts.append(training_utterance(f, c.frames_per_step, c.max_advance))
            except TargetError:
                continue
            frames.append(f.mel.astype(np.float32))
            durations.append(f.dur)
    hidden, embedding, target, counts = [], [], [], []
    for i in range(0, len(utts), batch):
        b = collate(utts[i : i + batch], c.pointer_offset)
        h = model(b["tokens"])
        mask = b["mel_mask"]
        nxt = next_tokens(b, c.max_advance, c.stop_token_id)[mask]
        hidden.append(h[mask].float())
        embedding.append(model.embed(nxt, torch.zeros_like(nxt)).float())
        target.append(b["mel"][mask].float())
        counts += mask.sum(1).tolist()
    return Rows(torch.cat(hidden), torch.cat(embedding), torch.cat(target), counts, frames, durations)


def new_head(model: UtteraTTS, with_next: bool) -> MelHead:
    head = MelHead(dataclasses.replace(model.config, mel_next_pointer=with_next))
    state = {k: v.clone() for k, v in model.mel_head.state_dict().items()}
    if with_next:
        state["next_proj.weight"] = torch.zeros(model.config.hidden_size, model.config.hidden_size)
    head.load_state_dict(state)
    return head


def predict(head: MelHead, rows: Rows) -> torch.Tensor:
    with torch.no_grad():
        return head(rows.hidden, rows.next_embedding if head.next_proj is not None else None)


def train(head: MelHead, rows: Rows, epochs: int, seed: int, lr: float = 3e-4, batch: int = 512) -> list[float]:
    torch.manual_seed(seed)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    n = rows.hidden.shape[0]
    losses = []
    for _ in range(epochs):
        order = torch.randperm(n)
        total = 0.0
        for i in range(0, n, batch):
            idx = order[i : i + batch]
            nxt = rows.next_embedding[idx] if head.next_proj is not None else None
            loss = (head(rows.hidden[idx], nxt) - rows.target[idx]).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / n)
    return losses


def judge(chunks: torch.Tensor, rows: Rows, r: int) -> dict:
    """Chunks (N, r, n_mels) of `rows` -> the utterances' frames against the teacher's, by place in the step."""
    predicted, start = [], 0
    for count, teacher in zip(rows.counts, rows.frames, strict=True):
        predicted.append(chunks[start : start + count].reshape(-1, chunks.shape[-1])[: len(teacher)].numpy())
        start += count
    mean, positions = by_position(rows.frames, predicted, r)
    return {
        "l1": mean,
        "l1_by_position": positions,
        "by_phoneme": by_position_and_phoneme(rows.frames, predicted, rows.durations, r),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("train_feat", type=Path)
    parser.add_argument("eval_feat", type=Path)
    parser.add_argument("--voice-token", type=int, default=None, help="the voice's token (multi-voice models)")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("mel_head_probe.json"))
    a = parser.parse_args()
    torch.manual_seed(a.seed)
    model = load_model(str(a.model_dir), "cpu")
    r = model.config.frames_per_step
    train_rows = collect(model, a.train_feat, a.voice_token)
    eval_rows = collect(model, a.eval_feat, a.voice_token)
    print(f"rows: train {train_rows.hidden.shape[0]} ({len(train_rows.counts)} utterances), eval "
          f"{eval_rows.hidden.shape[0]} ({len(eval_rows.counts)} utterances); {r} frames a step", flush=True)  # fmt: skip
    results = {"as is": {"train_l1": None, **judge(predict(new_head(model, False), eval_rows), eval_rows, r)}}
    for name, with_next in (("plain", False), ("next", True)):
        head = new_head(model, with_next)
        losses = train(head, train_rows, a.epochs, a.seed, a.lr)
        results[name] = {"train_l1": losses, **judge(predict(head, eval_rows), eval_rows, r)}
    for name, res in results.items():
        split = res["by_phoneme"]
        print(f"{name:>6}  eval l1 {res['l1']:.3f}  by place " + " ".join(f"{x:.3f}" for x in res["l1_by_position"]))
        print(f"{'':>6}  same phoneme      " + " ".join(f"{x:.3f}" for x in split["same"]))
        print(f"{'':>6}  past a change     " + " ".join(f"{x:.3f}" for x in split["changed"]), flush=True)
    a.out.write_text(
        json.dumps(
            {"command": machine.command(), "machine": machine.describe(), "frames_per_step": r, "results": results},
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
