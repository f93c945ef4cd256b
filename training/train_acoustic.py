"""Train the pointer-token acoustic model (training/model.py) on teacher features.

Loss = CE over the move classes the serving logits processor allows (training/data.py)
     + `--mel-weight` * L1 on the log-mel chunk predicted at each pointer position
     [+ with `--adv-weight` > 0, an adversarial loss on windows of the predicted mel (`MelGan`): LSGAN on a
        `training.discriminators.MelDiscriminator` + `--fm-weight` x its feature matching, scaled to the L1
        (GANSpeech's adaptive weight), after `--d-warmup` steps of the discriminator alone].
AdamW, linear warm-up then cosine decay over the run's *time budget* (`--minutes`: progress is
wall-clock seconds trained / budget, stored in the checkpoint so `--resume` continues the same schedule),
bf16 autocast on CUDA, batches of similar length capped at `--max-tokens` tokens.
A checkpoint (`RUN/ckpt.pt`) is written every `--ckpt-minutes` and at the end; `RUN/log.jsonl`
holds one JSON line per log interval (train) and per validation.

    python -m training.train_acoustic FEAT_DIR RUN_DIR [--minutes 15] [--resume] [--seed 0]
    python -m training.train_acoustic FEAT_JOE:joe:1,FEAT_HEART:heart:255 RUN_DIR ...   # one model, two voices

Several voices: each voice's prompts begin with its voice token instead of `^` (the checkpoint keeps the
map, `voice_tokens`, for training/export.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training.data import BatchDataset, collate, length_batches, load_utterances, next_tokens
from training.discriminators import MelDiscriminator
from training.model import AcousticConfig, UtteraTTS
from training.train_log import TrainLog
from training.vocoder_losses import discriminator_loss, feature_matching_loss, generator_loss

BOS_ID = 1  # `^`, every prompt's first id (the frontend's table), which a voice token replaces
# AcousticConfig fields settable from the command line (a new run only; --resume keeps the checkpoint's);
# with --init only STEP_FIELDS (init_from adapts the mel head).
STEP_FIELDS = ("frames_per_step", "max_advance")
SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "intermediate_size", *STEP_FIELDS)


def parse_voices(spec: str) -> dict[str, tuple[str, int | None]]:
    """`DIR` -> {"default": (DIR, None)}; `DIR:ID:TOKEN,...` -> {ID: (DIR, TOKEN)} (a voice token per voice)."""
    if ":" not in spec:
        return {"default": (spec, None)}
    voices: dict[str, tuple[str, int | None]] = {}
    for item in spec.split(","):
        feat_dir, voice_id, token = item.rsplit(":", 2)
        if voice_id in voices or int(token) in {t for _, t in voices.values()}:
            raise SystemExit(f"voice {voice_id!r} or token {token} given twice in {spec!r}")
        voices[voice_id] = (feat_dir, int(token))
    return voices


def init_from(model: UtteraTTS, model_dir: Path, voice_tokens: list[int]) -> None:
    """Load an exported directory's weights (fp16 -> fp32) into `model`; each of `voice_tokens` the directory
    was not trained with (not in its config.json `voices`) gets the embedding of `^`, the id it replaces. A
    `model` of another frames_per_step gets the directory's mel head stretched over its frames."""
    from safetensors.torch import load_file

    state = {k: v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    c = model.config
    for key in ("mel_head.fc2.weight", "mel_head.fc2.bias"):
        src = state[key].unflatten(0, (-1, c.n_mels))  # (frames the directory emits, n_mels, ...)
        if src.shape[0] != c.frames_per_step:  # another frames_per_step: frame j starts as frame j * r0 // r
            state[key] = src[torch.arange(c.frames_per_step) * src.shape[0] // c.frames_per_step].flatten(0, 1)
    if model.mel_head.next_proj is not None and "mel_head.next_proj.weight" not in state:
        state["mel_head.next_proj.weight"] = model.mel_head.next_proj.weight.detach().clone()  # zeros: as the parent
    model.load_state_dict(state)
    trained = {v["voice_token"] for v in json.loads((model_dir / "config.json").read_text()).get("voices", [])}
    emb = model.model.embed_tokens.weight
    with torch.no_grad():
        for t in voice_tokens:
            if t not in trained and t != BOS_ID:
                emb[t] = emb[BOS_ID]
    print(f"initialized from {model_dir} (new voice tokens: {sorted(set(voice_tokens) - trained - {BOS_ID})})")


def mel_windows(
    pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, window: int, rng: random.Random
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One random window of `window` consecutive frames per row, from the predicted and the target mel.

    pred, target (B, S, r, n_mels) at every position, mask (B, S): the pointer positions (one contiguous run per
    row). -> (fake, real) (N, window, n_mels) for the N rows whose mel is at least `window` frames, or None."""
    B, S, r, n_mels = pred.shape
    first = mask.int().argmax(1).tolist()
    count = mask.sum(1).tolist()
    rows, starts = [], []
    for b in range(B):
        if count[b] * r >= window:
            rows.append(b)
            starts.append(first[b] * r + rng.randrange(count[b] * r - window + 1))
    if not rows:
        return None
    index = torch.tensor(starts, device=pred.device).unsqueeze(1) + torch.arange(window, device=pred.device)
    index = index.unsqueeze(-1).expand(-1, -1, n_mels)
    pick = torch.tensor(rows, device=pred.device)
    fake = pred.flatten(1, 2)[pick].gather(1, index)
    real = target.flatten(1, 2)[pick].float().gather(1, index)
    return fake, real


class MelGan:
    """The acoustic model's adversarial loss on its mel (GANSpeech, Yang et al. 2021, on our chunked mel).

    Each training step: one window per row of the teacher-forced mel and of its target (`windows`); the
    discriminator takes one LSGAN step on them (the prediction detached), then, after `d_warmup` discriminator-only steps, the model
    gets `adv_weight` x LSGAN + `fm_weight` x feature matching, the latter scaled to the mel L1's size (its
    adaptive weight: L1 / FM, detached)."""

    def __init__(
        self,
        disc: MelDiscriminator,
        opt: torch.optim.Optimizer,
        window: int,
        adv_weight: float,
        fm_weight: float,
        d_warmup: int,
        seed: int = 0,
    ):
        self.disc, self.opt, self.window = disc, opt, window
        self.adv_weight, self.fm_weight, self.d_warmup = adv_weight, fm_weight, d_warmup
        self.rng = random.Random(seed)

    def windows(self, pred: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`mel_windows` of `pred` (B, S, r, n_mels) and the batch's target, `window` frames each."""
        return mel_windows(pred, batch["mel"], batch["mel_mask"], self.window, self.rng)

    def __call__(
        self, fake: torch.Tensor, real: torch.Tensor, l1: torch.Tensor, step: int, metrics: dict
    ) -> torch.Tensor:
        """The model's adversarial terms for its mel windows `fake` against the target's `real` (N, frames,
        n_mels), after the discriminator's step on them."""
        d_loss = discriminator_loss(self.disc(real)[0], self.disc(fake.detach())[0], "lsgan")
        self.opt.zero_grad(set_to_none=True)
        d_loss.backward()
        self.opt.step()
        metrics["d_loss"] = d_loss.item()
        if step < self.d_warmup:
            return fake.new_zeros(())
        logits, fake_maps = self.disc(fake)
        real_maps = self.disc(real)[1]
        adv = generator_loss(logits, "lsgan")
        fm = feature_matching_loss(real_maps, fake_maps)
        metrics.update(adv=adv.item(), fm=fm.item())
        return self.adv_weight * adv + self.fm_weight * (l1.detach() / fm.detach().clamp(min=1e-6)) * fm


def acoustic_loss(
    model: UtteraTTS,
    batch: dict[str, torch.Tensor],
    mel_weight: float = 1.0,
    gan: MelGan | None = None,
    step: int = 0,
) -> tuple[torch.Tensor, dict]:
    c = model.config
    h = model(batch["tokens"])
    logits = model.lm_head(h).float()  # (B, S, V)
    k = torch.arange(c.max_advance + 1, device=h.device)
    cand_ptr = batch["ce_base"].unsqueeze(-1) + k  # (B, S, A+1)
    ptr_logits = logits.gather(-1, (c.pointer_offset + cand_ptr).clamp(max=c.stop_token_id - 1))
    ptr_logits = ptr_logits.masked_fill(cand_ptr > batch["ce_last"].unsqueeze(-1), float("-inf"))
    stop_logit = logits[..., c.stop_token_id : c.stop_token_id + 1]
    stop_logit = stop_logit.masked_fill((batch["ce_base"] != batch["ce_last"]).unsqueeze(-1), float("-inf"))
    cand = torch.cat([ptr_logits, stop_logit], dim=-1)
    valid = batch["ce_class"] >= 0
    ce = F.cross_entropy(cand[valid], batch["ce_class"][valid])
    acc = (cand[valid].argmax(-1) == batch["ce_class"][valid]).float().mean()
    mask = batch["mel_mask"]
    if gan is None:
        pred = model.mel(h[mask], next_tokens(batch, c.max_advance, c.stop_token_id)[mask]).float()
        l1 = (pred - batch["mel"][mask].float()).abs().mean()
    else:  # every position's chunk: the windows run across chunks in time order
        pred = model.mel(h, next_tokens(batch, c.max_advance, c.stop_token_id)).float()
        l1 = (pred[mask] - batch["mel"][mask].float()).abs().mean()
    loss = ce + mel_weight * l1
    metrics = {"ce": ce.item(), "l1": l1.item(), "acc": acc.item()}
    if gan is not None and (pair := gan.windows(pred, batch)) is not None:
        loss = loss + gan(*pair, l1, step, metrics)
    return loss, {"loss": loss.item(), **metrics}


def lr_at(progress: float, step: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def to_device(batch: dict, device: str) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def validate(model: UtteraTTS, val: list, device: str, max_tokens: int) -> dict:
    model.eval()
    sums: dict[str, float] = {}
    n = 0
    for idx in length_batches([u.length for u in val], max_tokens, random.Random(0)):
        batch = to_device(collate([val[i] for i in idx], model.config.pointer_offset), device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            _, m = acoustic_loss(model, batch)
        for key, v in m.items():
            sums[key] = sums.get(key, 0.0) + v * len(idx)
        n += len(idx)
    model.train()
    return {f"val_{k}": v / max(n, 1) for k, v in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "feat_dir",
        help="features of one voice, or several as DIR:VOICE_ID:TOKEN,... (one model, a voice token per voice)",
    )
    parser.add_argument("run_dir")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=24000)
    parser.add_argument("--mel-weight", type=float, default=1.0)
    parser.add_argument(
        "--adv-weight", type=float, default=0.0, help="LSGAN weight of the mel discriminator (MelGan; 0 = no GAN)"
    )
    parser.add_argument("--fm-weight", type=float, default=1.0, help="feature matching, x the L1 / FM ratio")
    parser.add_argument("--adv-window", type=int, default=64, help="mel frames per discriminator window")
    parser.add_argument("--d-lr", type=float, default=2e-4)
    parser.add_argument("--d-warmup", type=int, default=300, help="first steps that train only the discriminator")
    parser.add_argument("--dropout", type=float, default=0.1, help="residual dropout (training only)")
    parser.add_argument("--ckpt-minutes", type=float, default=3.0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--val-every", type=int, default=1000)
    parser.add_argument("--val-fraction", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--init",
        default=None,
        help="exported model directory (voices/*) to start a new run from: its config and weights; a voice "
        "token it was not trained with starts as its ^ embedding",
    )
    parser.add_argument(
        "--mel-next-pointer",
        action="store_true",
        help="the mel head also sees the next token's embedding (AcousticConfig.mel_next_pointer; with --init "
        "it starts at zero, as the directory's model); not servable yet",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    for f in SIZE_FIELDS:
        parser.add_argument("--" + f.replace("_", "-"), type=int, default=None)
    a = parser.parse_args()

    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    run = Path(a.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    ckpt_path = run / "ckpt.pt"
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False) if a.resume and ckpt_path.exists() else None
    if state is not None:
        config = AcousticConfig(**state["config"])
    elif a.init:
        # The directory's network; only how many frames a step emits and how far the pointer moves may change.
        given = {f: getattr(a, f) for f in SIZE_FIELDS if getattr(a, f) is not None}
        if set(given) - set(STEP_FIELDS):
            raise SystemExit(f"--init keeps the directory's network: only {', '.join(STEP_FIELDS)} may be given")
        config = dataclasses.replace(
            AcousticConfig.from_hf(json.loads((Path(a.init) / "config.json").read_text())), dropout=a.dropout, **given
        )
        config.mel_next_pointer = config.mel_next_pointer or a.mel_next_pointer
    else:
        overrides = {f: getattr(a, f) for f in SIZE_FIELDS if getattr(a, f) is not None}
        if "num_attention_heads" in overrides:
            overrides["num_key_value_heads"] = overrides["num_attention_heads"]
        config = AcousticConfig(**overrides, dropout=a.dropout, mel_next_pointer=a.mel_next_pointer)

    voices = parse_voices(a.feat_dir)
    utts, stats = [], {"rejected": 0, "frames": 0, "max_dwell": 0}
    for feat_dir, token in voices.values():
        u, st = load_utterances(
            feat_dir, config.frames_per_step, config.max_advance, config.max_phonemes, a.limit, token
        )
        utts += u
        stats = {k: max(stats[k], st[k]) if k == "max_dwell" else stats[k] + st[k] for k in stats}
        print(f"{feat_dir}: {len(u)} utterances, voice token {token}", flush=True)
    if state is None:
        # The serving processor forces a move after max_steps_per_phoneme steps: allow the longest
        # dwell seen in the data, plus a margin.
        config.max_steps_per_phoneme = stats["max_dwell"] + 2
    rng = random.Random(a.seed)
    order = list(range(len(utts)))
    rng.shuffle(order)
    n_val = max(1, int(len(utts) * a.val_fraction))
    val = [utts[i] for i in order[:n_val]]
    train = [utts[i] for i in order[n_val:]]
    hours = stats["frames"] * config.hop_length / config.sample_rate / 3600
    print(
        f"utterances train={len(train)} val={len(val)} rejected={stats['rejected']} audio={hours:.2f} h "
        f"max_dwell={stats['max_dwell']} -> max_steps_per_phoneme={config.max_steps_per_phoneme}",
        flush=True,
    )

    model = UtteraTTS(config).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gan = None
    if a.adv_weight > 0:
        disc = MelDiscriminator().to(a.device)
        opt_d = torch.optim.AdamW(disc.parameters(), lr=a.d_lr, betas=(0.5, 0.9))
        gan = MelGan(disc, opt_d, a.adv_window, a.adv_weight, a.fm_weight, a.d_warmup, a.seed)
    step, trained_s, epoch = 0, 0.0, 0
    if state is None and a.init:
        init_from(model, Path(a.init), [t for _, t in voices.values() if t is not None])
    elif state is None:
        # Start the mel head at the data's mean log-mel (silence is -11.5, speech ~ -4): the L1 then
        # spends no early steps on the offset.
        mean = np.concatenate([u.mel.reshape(-1, config.n_mels) for u in train[:2000]]).astype(np.float32).mean(0)
        with torch.no_grad():
            model.mel_head.fc2.bias.copy_(torch.from_numpy(np.tile(mean, config.frames_per_step)))
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, trained_s, epoch = state["step"], state["trained_s"], state["epoch"]
        rng.setstate(state["rng"])
        if gan is not None and "disc" in state:
            gan.disc.load_state_dict(state["disc"])
            gan.opt.load_state_dict(state["opt_d"])
    print(f"params={model.num_params() / 1e6:.2f} M device={a.device} resume_step={step}", flush=True)
    if gan is not None:
        print(
            f"mel GAN: adv {a.adv_weight} fm {a.fm_weight} window {a.adv_window} d_lr {a.d_lr} "
            f"d_warmup {a.d_warmup} disc params {sum(p.numel() for p in gan.disc.parameters()) / 1e6:.2f} M",
            flush=True,
        )
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2))
    budget = a.minutes * 60
    log = TrainLog(run / "log.jsonl", a.log_every)

    def save() -> None:
        st = {
            "config": dataclasses.asdict(config),
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "step": step,
            "trained_s": trained_s,
            "epoch": epoch,
            "rng": rng.getstate(),
            "voice_tokens": {v: t for v, (_, t) in voices.items()},
        }
        if gan is not None:
            st.update(disc=gan.disc.state_dict(), opt_d=gan.opt.state_dict())
        torch.save(st, ckpt_path.with_suffix(".tmp"))
        ckpt_path.with_suffix(".tmp").replace(ckpt_path)

    use_amp = a.device.startswith("cuda")
    # The budget is wall-clock time of this and earlier sessions (loading, validation included).
    session_start, trained_before = time.time(), trained_s
    last_ckpt = time.time()
    done = False
    lengths = [u.length for u in train]
    while not done:
        # One loader over many epochs' batches: worker start-up per epoch would cost more than an epoch.
        plan = [length_batches(lengths, a.max_tokens, rng) for _ in range(50)]
        batches = [b for epoch_batches in plan for b in epoch_batches]
        epoch_of = [e for e, epoch_batches in enumerate(plan) for _ in epoch_batches]
        loader = torch.utils.data.DataLoader(
            BatchDataset(train, batches, config.pointer_offset),
            batch_size=None,
            shuffle=False,
            num_workers=a.workers,
            pin_memory=use_amp,
        )
        for i, batch in enumerate(loader):
            if i and epoch_of[i] != epoch_of[i - 1]:
                epoch += 1
            lr = lr_at(trained_s / budget, step, a.lr, a.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            batch = to_device(batch, a.device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp):
                loss, m = acoustic_loss(model, batch, a.mel_weight, gan, step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            trained_s = trained_before + time.time() - session_start
            log.step(step, m, epoch=epoch, lr=lr, trained_s=round(trained_s, 1), grad_norm=float(gn))
            if step % a.val_every == 0:
                log.write({"step": step, "epoch": epoch, **validate(model, val, a.device, a.max_tokens)})
            if time.time() - last_ckpt > a.ckpt_minutes * 60:
                save()
                last_ckpt = time.time()
            if trained_s >= budget or (a.max_steps and step >= a.max_steps):
                done = True
                break
        else:
            epoch += 1
    log.write({"step": step, "epoch": epoch, "final": True, **validate(model, val, a.device, a.max_tokens)})
    save()
    log.close()


if __name__ == "__main__":
    main()
