"""Does the mel head gain from knowing where the step goes next? A probe on a trained model's frozen states.

    python -m benchmarks.mel_head_probe MODEL_DIR TRAIN_FEAT EVAL_FEAT [--voice-token T] [--epochs 40]
        [--lr 3e-4] [--seed 0] [--variants plain,next,shift,late] [--out OUT.json]

The model (an exported voice) runs teacher-forced once over both feature sets (`training.features`): at
every pointer position it keeps the final hidden state, the token the step moves to (the next pointer, or
STOP: `training.data.next_tokens`) and the teacher's chunk. Heads start from the model's own mel head and
train on TRAIN_FEAT's rows for the same steps with the same seed (Adam, L1):
- `plain`: the head as it is;
- `next`: the head plus the next token's embedding (the model's own, frozen) through a projection that
  starts at zero (`AcousticConfig.mel_next_pointer`). That embedding is a pointer (a position), not the
  phoneme there: only the backbone's attention reads which phoneme it points at;
- `shift`: the head plus the next step's final hidden state (the backbone run on the token the step moves
  to: the new phoneme read, the whole context seen), through the same zero-started projection. A head built
  so would emit each step's frames one step late (the half-step shift of `benchmarks/RESULTS.md`), and
  an engine serving it would keep each row's previous state;
- `late`: the head on the next step's state alone (no state kept between steps: the mel of a step's
  position is the previous step's frames);
- `delta`: the head as it is (as `plain`), its loss plus `DELTA_WEIGHT` x L1 between the predicted and the
  teacher's frame-to-frame differences inside the step: a loss on the movement the served mel lacks
  (`benchmarks/RESULTS.md`, "Is the acoustic model's mel over-smoothed?"), which L1 on frames alone
  averages away. An L1 on differences is won by their median, so this head moves less than `plain`;
- `movement`: as `plain`, its loss plus `DELTA_WEIGHT` x the gap, per mel bin, between the batch's mean
  |frame-to-frame difference| inside the step, predicted and the teacher's (a match of the movement's
  amount, not of each difference);
- `adv`: as `plain`, trained on windows of consecutive steps of one utterance (`ADV_WINDOW` frames) with
  `training.train_acoustic.MelGan` beside the L1: the adversarial loss (LSGAN + feature matching scaled to
  the L1) of `train_acoustic.py --adv-weight`, on the head alone, `ADV_D_WARMUP` discriminator-only steps
  first, weights `--adv-weights`. Judged against `plain` at the same epochs (as many steps, as many rows a step).
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
import random
from pathlib import Path

import numpy as np
import torch

from benchmarks import machine
from benchmarks.mel_step_position import by_position, by_position_and_phoneme
from training.aligned_mels import load_model
from training.data import Utterance, collate, next_tokens, read_shard, training_utterance, voice_prompt
from training.model import MelHead, UtteraTTS
from training.targets import TargetError

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Rows:
    """Every pointer position of a feature set: hidden (N, H), next-token embedding (N, H), the next step's
    hidden (N, H: the state at the token the step moves to, STOP for the last), teacher chunk (N, r, n_mels);
    per utterance its rows' count, its frames (F, n_mels) and phoneme durations."""

    hidden: torch.Tensor
    next_embedding: torch.Tensor
    next_hidden: torch.Tensor
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
    hidden, embedding, following, target, counts = [], [], [], [], []
    for i in range(0, len(utts), batch):
        b = collate(utts[i : i + batch], c.pointer_offset)
        mask = b["mel_mask"]
        ends = mask.sum(1) + mask.int().argmax(1)  # the position after each utterance's last pointer
        tokens = torch.cat([b["tokens"], torch.zeros_like(b["tokens"][:, :1])], dim=1)
        tokens[torch.arange(len(ends)), ends] = c.stop_token_id  # causal: earlier states are unchanged
        h = model(tokens)
        nxt = next_tokens(b, c.max_advance, c.stop_token_id)[mask]
        hidden.append(h[:, :-1][mask].float())
        following.append(h[:, 1:][mask].float())
        embedding.append(model.embed(nxt, torch.zeros_like(nxt)).float())
        target.append(b["mel"][mask].float())
        counts += mask.sum(1).tolist()
    return Rows(
        torch.cat(hidden), torch.cat(embedding), torch.cat(following), torch.cat(target), counts, frames, durations
    )


VARIANTS = ("plain", "next", "shift", "late", "delta", "movement", "adv")
DELTA_WEIGHT = 1.0
ADV_WINDOW = 64  # frames, as train_acoustic.py --adv-window
ADV_D_WARMUP = 50
ADV_WEIGHTS = (1.0, 1.0)  # LSGAN, feature matching (x L1 / FM): train_acoustic.py's defaults (--adv-weights)


def inputs(rows: Rows, variant: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A variant's head inputs: the state it reads, and what it gets beside it through `next_proj`."""
    return {
        "plain": (rows.hidden, None),
        "next": (rows.hidden, rows.next_embedding),
        "shift": (rows.hidden, rows.next_hidden),
        "late": (rows.next_hidden, None),
        "delta": (rows.hidden, None),
        "movement": (rows.hidden, None),
        "adv": (rows.hidden, None),
    }[variant]


def new_head(model: UtteraTTS, with_next: bool) -> MelHead:
    head = MelHead(dataclasses.replace(model.config, mel_next_pointer=with_next))
    state = {k: v.clone() for k, v in model.mel_head.state_dict().items()}
    if with_next:
        state["next_proj.weight"] = torch.zeros(model.config.hidden_size, model.config.hidden_size)
    head.load_state_dict(state)
    return head


def predict(head: MelHead, rows: Rows, variant: str) -> torch.Tensor:
    with torch.no_grad():
        return head(*inputs(rows, variant))


def train(
    head: MelHead,
    rows: Rows,
    variant: str,
    epochs: int,
    seed: int,
    lr: float = 3e-4,
    batch: int = 512,
    adv_weights: tuple[float, float] = ADV_WEIGHTS,
) -> list[float]:
    """`adv_weights`: the `adv` head's (LSGAN, feature matching) weights."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    n = rows.hidden.shape[0]
    if variant == "adv":
        return train_adv(head, opt, rows, epochs, seed, batch, adv_weights)
    state, beside = inputs(rows, variant)
    losses = []
    for _ in range(epochs):
        order = torch.randperm(n)
        total = 0.0
        for i in range(0, n, batch):
            idx = order[i : i + batch]
            pred, target = head(state[idx], None if beside is None else beside[idx]), rows.target[idx]
            l1 = (pred - target).abs().mean()
            loss = l1
            if variant == "delta":
                loss = l1 + DELTA_WEIGHT * (pred.diff(dim=1) - target.diff(dim=1)).abs().mean()
            elif variant == "movement":
                moved, teacher_moved = (x.diff(dim=1).abs().mean(dim=(0, 1)) for x in (pred, target))
                loss = l1 + DELTA_WEIGHT * (moved - teacher_moved).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += l1.item() * len(idx)
        losses.append(total / n)
    return losses


def train_adv(
    head: MelHead,
    opt: torch.optim.Optimizer,
    rows: Rows,
    epochs: int,
    seed: int,
    batch: int,
    weights: tuple[float, float],
) -> list[float]:
    """The `adv` head: each step `batch // k` windows of k = ADV_WINDOW / r consecutive rows of one utterance
    (about `batch` rows, as many steps an epoch as the other variants), L1 + MelGan with `weights`."""
    from training.discriminators import MelDiscriminator
    from training.train_acoustic import MelGan

    r = rows.target.shape[1]
    k = max(1, ADV_WINDOW // r)
    starts = np.concatenate([[0], np.cumsum(rows.counts)[:-1]])
    usable = [(int(s), c) for s, c in zip(starts, rows.counts, strict=True) if c >= k]
    disc = MelDiscriminator()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.9))
    gan = MelGan(disc, opt_d, k * r, *weights, ADV_D_WARMUP, seed)
    rng = random.Random(seed)
    n_windows = max(1, batch // k)
    steps_per_epoch = max(1, rows.hidden.shape[0] // batch)
    losses, step = [], 0
    for _ in range(epochs):
        total = 0.0
        for _ in range(steps_per_epoch):
            picks = [usable[rng.randrange(len(usable))] for _ in range(n_windows)]
            first = torch.tensor([s + rng.randrange(c - k + 1) for s, c in picks])
            idx = first.unsqueeze(1) + torch.arange(k)  # (windows, k) rows
            pred, target = head(rows.hidden[idx]), rows.target[idx]
            l1 = (pred - target).abs().mean()
            loss = l1 + gan(pred.flatten(1, 2), target.flatten(1, 2), l1, step, {})
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            total += l1.item()
        losses.append(total / steps_per_epoch)
    return losses


def movement(chunks: torch.Tensor) -> float:
    """Mean |frame-to-frame difference| inside the steps of `chunks` (N, r, n_mels)."""
    return chunks.float().diff(dim=1).abs().mean().item()


def judge(chunks: torch.Tensor, rows: Rows, r: int) -> dict:
    """Chunks (N, r, n_mels) of `rows` -> the utterances' frames against the teacher's, by place in the step."""
    predicted, start = [], 0
    for count, teacher in zip(rows.counts, rows.frames, strict=True):
        predicted.append(chunks[start : start + count].reshape(-1, chunks.shape[-1])[: len(teacher)].numpy())
        start += count
    mean, positions = by_position(rows.frames, predicted, r)
    return {
        "l1": mean,
        "movement": movement(chunks),
        "l1_by_position": positions,
        "by_phoneme": by_position_and_phoneme(rows.frames, predicted, rows.durations, r),
    }


@torch.no_grad()
def free_running(model: UtteraTTS, lines: list[str], voice_token: int | None) -> tuple[Rows, list[int]]:
    """The lines spoken by the model alone (`training.infer.generate`: its own pointers, no teacher), as rows
    for any head (no target), and how many sentences of the frontend each line has (its rows come in that
    many runs of `counts`). A runaway's last step gets its own state as the next one."""
    from training import text_frontend
    from training.infer import generate

    c = model.config
    hidden, following, embedding, counts, per_line = [], [], [], [], []
    for line in lines:
        sentences = text_frontend.prepare(line)
        per_line.append(len(sentences))
        for sentence in sentences:
            g = generate(model, voice_prompt(sentence.phoneme_ids, voice_token).tolist(), keep_states=True)
            assert g.states is not None
            last = g.stop_state if g.stop_state is not None else g.states[-1]
            moved_to = torch.tensor([c.pointer_offset + p for p in g.pointers[1:]] + [c.stop_token_id])
            hidden.append(g.states)
            following.append(torch.cat([g.states[1:], last[None]]))
            embedding.append(model.embed(moved_to, torch.zeros_like(moved_to)))
            counts.append(len(g.states))
    n = sum(counts)
    rows = Rows(torch.cat(hidden), torch.cat(embedding), torch.cat(following), torch.zeros(n, 0), counts, [], [])
    return rows, per_line


def listen(
    heads: dict[str, tuple[MelHead, str]], model_dir: Path, model: UtteraTTS, voice_token: int | None,
    limit: int, seed: int, judges_python: str,
) -> dict:  # fmt: skip
    """Every head on the same free-running states of `limit` held-out sentences (the seeded sample of
    `benchmarks.quality`), through the voice's own vocoder, judged per clip; each head paired against every
    head before it."""
    import tempfile

    from benchmarks.naturalness_stages import judge as judge_audio
    from benchmarks.vocoder_ab import JUDGES, load_vocoder, paired, sample

    indices, lines = sample(ROOT / "training" / "eval_sentences.txt", limit, seed)
    rows, per_line = free_running(model, lines, voice_token)
    vocoder = load_vocoder(str(model_dir / "vocoder"))
    work = Path(tempfile.mkdtemp(prefix="mel_head_probe_"))
    manifest: list[dict] = []
    for name, (head, variant) in heads.items():
        chunks = predict(head, rows, variant)
        mels = [m.flatten(0, 1).T for m in chunks.split(rows.counts)]
        k = 0
        for index, n in zip(indices, per_line, strict=True):
            with torch.inference_mode():
                audio = [vocoder(m[None].float())[0].numpy() for m in mels[k : k + n]]
            k += n
            path = work / f"{len(manifest):04d}.npy"
            np.save(path, np.concatenate(audio).astype(np.float32))
            manifest.append({"key": f"{name}|{index}", "path": str(path), "sr": vocoder.config.sample_rate})
    print(f"judging {len(manifest)} clips (in {work})", flush=True)
    scores = {s["key"]: s for s in judge_audio(judges_python, manifest, work)}
    by = {name: {i: scores[f"{name}|{i}"] for i in indices} for name in heads}
    names = list(heads)
    return {
        "indices": indices,
        "means": {name: {j: float(np.mean([by[name][i][j] for i in indices])) for j in JUDGES} for name in names},
        # per clip, so heads of separate runs (same seed: the same sentences and `as is`) can be paired too
        "scores": {name: {str(i): {j: by[name][i][j] for j in JUDGES} for i in indices} for name in names},
        "paired": {f"{b} - {a}": paired(by, b, a) for k, a in enumerate(names) for b in names[k + 1 :]},
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
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"heads to train, of {','.join(VARIANTS)}")
    parser.add_argument("--adv-weights", default="1,1", help="the adv head's LSGAN and feature-matching weights")
    parser.add_argument("--listen", type=int, default=0, help="judge the heads on N held-out sentences spoken freely")
    parser.add_argument("--judges-python", default=None, help="with --listen: the judges' interpreter")
    parser.add_argument("--out", type=Path, default=Path("mel_head_probe.json"))
    a = parser.parse_args()
    if a.listen and not a.judges_python:
        parser.error("--listen needs --judges-python")
    adv, fm = (float(x) for x in a.adv_weights.split(","))
    torch.manual_seed(a.seed)
    model = load_model(str(a.model_dir), "cpu")
    r = model.config.frames_per_step
    train_rows = collect(model, a.train_feat, a.voice_token)
    eval_rows = collect(model, a.eval_feat, a.voice_token)
    print(f"rows: train {train_rows.hidden.shape[0]} ({len(train_rows.counts)} utterances), eval "
          f"{eval_rows.hidden.shape[0]} ({len(eval_rows.counts)} utterances); {r} frames a step", flush=True)  # fmt: skip
    heads = {"as is": (new_head(model, False), "plain")}
    results = {"as is": {"train_l1": None, **judge(predict(heads["as is"][0], eval_rows, "plain"), eval_rows, r)}}
    teacher_movement = movement(eval_rows.target)
    print(f"teacher's movement in a step (mean |frame-to-frame difference|): {teacher_movement:.3f}")
    for variant in a.variants.split(","):
        head = new_head(model, inputs(train_rows, variant)[1] is not None)
        losses = train(head, train_rows, variant, a.epochs, a.seed, a.lr, adv_weights=(adv, fm))
        results[variant] = {"train_l1": losses, **judge(predict(head, eval_rows, variant), eval_rows, r)}
        heads[variant] = (head, variant)
    for name, res in results.items():
        split = res["by_phoneme"]
        print(f"{name:>6}  eval l1 {res['l1']:.3f}  movement {res['movement']:.3f}  by place "
              + " ".join(f"{x:.3f}" for x in res["l1_by_position"]))  # fmt: skip
        print(f"{'':>6}  same phoneme      " + " ".join(f"{x:.3f}" for x in split["same"]))
        print(f"{'':>6}  past a change     " + " ".join(f"{x:.3f}" for x in split["changed"]), flush=True)
    listened = None
    if a.listen:
        listened = listen(heads, a.model_dir, model, a.voice_token, a.listen, a.seed, a.judges_python)
        print(f"{'head':>8}  " + "  ".join(f"{j:>18}" for j in listened["means"][next(iter(heads))]))
        for name, means in listened["means"].items():
            print(f"{name:>8}  " + "  ".join(f"{v:>18.3f}" for v in means.values()))
        for pair, diffs in listened["paired"].items():
            cells = "  ".join(f"{d['mean']:+.3f} ± {d['se']:.3f} ({d['higher']:>2})" for d in diffs.values())
            print(f"{pair:>8}  {cells}", flush=True)
    a.out.write_text(
        json.dumps(
            {
                "command": machine.command(),
                "machine": machine.describe(),
                "frames_per_step": r,
                "teacher_movement": teacher_movement,
                "results": results,
                "listened": listened,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
