"""Train `vocoder.model.Vocoder` on teacher audio (random segments, resumable).

Each step takes `--batch` random segments of `--segment-frames` mel frames (x 256 samples) from the
synthesis shards, analyses them with `vocoder.mel.MelSpectrogram`, vocodes, and minimizes
`training.vocoder_losses`: 45 * mel L1 + multi-resolution STFT, plus (once `--gan-after` of the time
budget has passed) hinge adversarial + feature-matching losses of training/discriminators.py's
multi-period and multi-resolution discriminators (Vocos weighting: MRD terms x 0.1). AdamW with cosine
decay over the `--minutes` time budget (progress stored in the checkpoint, like train_acoustic.py),
checkpoint `RUN/ckpt.pt`, log `RUN/log.jsonl`.

    python -m training.train_vocoder SYNTH_DIR[,SYNTH_DIR...] RUN_DIR [--minutes 15] [--resume] [--seed 0]
        [--init VOCODER_DIR]

Several synthesis directories (one per voice): one vocoder for all of them, segments drawn uniformly
over their utterances. `--init` starts a new run from an exported vocoder's weights (`voices/*/vocoder`);
the discriminators still start from scratch. `--pred-mels` (training/aligned_mels.py): a `--pred-fraction`
of each batch is vocoded from the acoustic model's teacher-forced mel of the same frames instead of the
teacher's (the served input), with the same targets (the teacher's audio).

`--arch hifigan` fine-tunes a HiFi-GAN V1 generator (vocoder/hifigan.py) instead, from `--init` (a packaged
generator such as `hifigan-universal`, or a voice's `hifigan/` folder), with the same data, losses and
discriminators; `training/export_hifigan.py` writes the result into a voice as `hifigan/`
(`uttera serve --vocoder voice-hifigan`). The generator runs on whole segments (`HifiGan.generate`, zero
padding at the edges, as HiFi-GAN was trained); `--d-warmup` steps first train the new discriminators
alone against the pretrained generator, so that its first adversarial gradients come from a trained critic.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vocoder import hifigan
from vocoder.config import ANALYSIS_KEYS, VocoderConfig
from vocoder.mel import MelSpectrogram
from vocoder.model import Vocoder

from training.discriminators import MultiPeriodDiscriminator, MultiResolutionDiscriminator
from training.train_log import TrainLog
from training.vocoder_losses import (
    MelLoss,
    MultiResolutionSTFTLoss,
    discriminator_loss,
    feature_matching_loss,
    generator_loss,
)

MEL_WEIGHT = 45.0  # Vocos / HiFi-GAN
MRD_WEIGHT = 0.1  # Vocos: multi-resolution discriminator terms relative to the multi-period ones


class GAN(nn.Module):
    """HiFi-GAN multi-period + Vocos multi-resolution discriminators, hinge losses.

    `amp`: the discriminators' convolutions run under bf16 autocast (their logits and feature maps are
    cast back to float32 before any loss); the generator and every loss stay float32."""

    def __init__(
        self, mpd_channels: tuple[int, ...] = (32, 128, 512, 1024, 1024), mrd_channels: int = 32, amp: bool = False
    ):
        super().__init__()
        self.mpd = MultiPeriodDiscriminator(channels=mpd_channels)
        self.mrd = MultiResolutionDiscriminator(channels=mrd_channels)
        self.amp = amp

    def _run(self, d: nn.Module, wav: torch.Tensor) -> tuple[list[torch.Tensor], list[list[torch.Tensor]]]:
        with torch.autocast(device_type=wav.device.type, dtype=torch.bfloat16, enabled=self.amp):
            logits, maps = d(wav)
        return [x.float() for x in logits], [[m.float() for m in ms] for ms in maps]

    def d_loss(self, wav: torch.Tensor, wav_hat: torch.Tensor) -> torch.Tensor:
        loss = discriminator_loss(self._run(self.mpd, wav)[0], self._run(self.mpd, wav_hat)[0])
        return loss + MRD_WEIGHT * discriminator_loss(self._run(self.mrd, wav)[0], self._run(self.mrd, wav_hat)[0])

    def g_loss(self, wav: torch.Tensor, wav_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (adversarial, feature matching)."""
        total_adv: torch.Tensor | float = 0.0
        total_fm: torch.Tensor | float = 0.0
        for d, w in ((self.mpd, 1.0), (self.mrd, MRD_WEIGHT)):
            with torch.no_grad():
                _, real_maps = self._run(d, wav)
            fake_logits, fake_maps = self._run(d, wav_hat)
            total_adv = total_adv + w * generator_loss(fake_logits)
            total_fm = total_fm + w * feature_matching_loss(real_maps, fake_maps)
        assert isinstance(total_adv, torch.Tensor) and isinstance(total_fm, torch.Tensor)  # two discriminators
        return total_adv, total_fm


class SegmentSampler:
    """All teacher audio in one tensor; random `(B, frames * hop)` segments inside utterances.

    With `pred_dirs` (training/aligned_mels.py output, one per synthesis dir, `pred_k` beside `shard_k`),
    the acoustic model's teacher-forced mel of the same frames comes with each segment (segments then start
    on frame boundaries, which the concatenated audio and mel share: each utterance is `frames * hop` long).
    """

    def __init__(
        self, synth_dirs: list[str], hop: int, device: str, limit: int = 0, pred_dirs: list[str] | None = None
    ):
        if pred_dirs is not None and len(pred_dirs) != len(synth_dirs):
            raise SystemExit("--pred-mels needs one directory per synthesis directory, in the same order")
        audio, starts, lengths, pred = [], [], [], []
        pos = 0
        for d, path in [(i, p) for i, d in enumerate(synth_dirs) for p in sorted(Path(d).glob("shard_*.npz"))]:
            z = np.load(path)
            off = z["audio_off"]
            audio.append(z["audio"])
            for u in range(len(off) - 1):
                starts.append(pos + off[u])
                lengths.append(off[u + 1] - off[u])
            pos += len(z["audio"])
            if pred_dirs is not None:
                with np.load(Path(pred_dirs[d]) / path.name.replace("shard_", "pred_")) as f:
                    if len(f["mel"]) * hop != len(z["audio"]):
                        raise SystemExit(f"{pred_dirs[d]}: predicted mel of {path.name} is not frame-aligned")
                    pred.append(f["mel"])
            if limit and len(starts) >= limit:
                break
        self.audio = torch.from_numpy(np.concatenate(audio)).to(device)
        self.pred = torch.from_numpy(np.concatenate(pred)).to(device) if pred else None  # (F, n_mels) fp16
        self.starts = torch.tensor(starts, device=device)
        self.lengths = torch.tensor(lengths, device=device)
        self.hop = hop
        self.seconds = float(self.lengths.sum()) / 22050

    def sample(self, batch: int, frames: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
        """-> (audio `(B, frames * hop)` float, predicted mel `(B, n_mels, frames)` float or None)."""
        n = frames * self.hop
        dev = self.audio.device
        u = torch.randint(len(self.starts), (batch,), generator=g, device="cpu").to(dev)
        room = (self.lengths[u] - n).clamp(min=0)
        if self.pred is None:
            off = (torch.rand(batch, generator=g, device="cpu").to(dev) * (room + 1).float()).long()
        else:
            off = (torch.rand(batch, generator=g, device="cpu").to(dev) * (room // self.hop + 1).float()).long()
            off = off * self.hop
        idx = (self.starts[u] + off).unsqueeze(1) + torch.arange(n, device=dev)
        idx = idx.clamp(max=len(self.audio) - 1)
        wav = self.audio[idx].float() / 32768.0
        if self.pred is None:
            return wav, None
        f_idx = (idx[:, 0] // self.hop).unsqueeze(1) + torch.arange(frames, device=dev)
        return wav, self.pred[f_idx.clamp(max=len(self.pred) - 1)].float().transpose(1, 2)


ARCHS = ("voice", "hifigan")


def make_generator(
    arch: str, init: str | None, saved: dict | None, over: dict
) -> tuple[Vocoder | hifigan.HifiGan, VocoderConfig]:
    """The generator to train and the `VocoderConfig` whose analysis its losses use (for a HiFi-GAN, the
    voice vocoder's config with the HiFi-GAN's analysis keys). `saved`: a checkpoint's config to resume."""
    if arch == "hifigan":
        if saved is not None:
            net = hifigan.HifiGan(hifigan.HifiGanConfig.from_dict(saved))
        elif init is None:
            raise SystemExit("--arch hifigan needs --init (hifigan-universal, or a voice's hifigan/ folder)")
        else:
            pretrained = (
                hifigan.HifiGan.from_package(init) if init in hifigan.CHECKPOINTS else hifigan.HifiGan.from_dir(init)
            )
            net = hifigan.HifiGan(dataclasses.replace(pretrained.config, output_gain=1.0))  # trained at unit gain
            net.load_state_dict(pretrained.state_dict())
        return net, VocoderConfig(**{k: getattr(net.config, k) for k in ANALYSIS_KEYS}, log_clamp=net.config.log_clamp)
    edges = {k: v for k, v in over.items() if k in ("zero_dc_bin", "zero_nyquist_bin")}  # no weight changes shape
    over = {k: v for k, v in over.items() if k not in edges}
    if saved is not None:
        config = VocoderConfig.from_dict(saved)
    elif init:
        # Trained at unit gain on peak-normalized audio; export.py applies the serving headroom.
        config = dataclasses.replace(VocoderConfig.load(init), output_gain=1.0, **edges)
    else:
        config = VocoderConfig(**over, **edges)
    model = Vocoder(config)
    if init and saved is None:
        model.load_state_dict(Vocoder.from_dir(init, dtype=torch.float32).state_dict())
    return model, config


def lr_at(progress: float, step: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synth_dir")
    parser.add_argument("run_dir")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--segment-frames", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument(
        "--gan-after",
        type=float,
        default=0.3,
        help="fraction of the time budget after which the GAN losses join (>= 1: never)",
    )
    parser.add_argument("--mpd-channels", default="32,128,512,1024,1024", help="HiFi-GAN MPD widths")
    parser.add_argument("--mrd-channels", type=int, default=32)
    parser.add_argument("--ckpt-minutes", type=float, default=3.0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bf16 autocast for the discriminators (default: on CUDA)",
    )
    parser.add_argument(
        "--pred-mels",
        default=None,
        help="training/aligned_mels.py directories, one per synthesis dir: learn from the acoustic model's mel too",
    )
    parser.add_argument("--pred-fraction", type=float, default=0.5, help="share of each batch from --pred-mels")
    parser.add_argument(
        "--init",
        default=None,
        help="exported vocoder directory to start a new run from (--arch hifigan: a packaged name or a hifigan/ folder)",
    )
    parser.add_argument(
        "--arch", choices=ARCHS, default="voice", help="the voice's Vocos-style vocoder, or HiFi-GAN V1"
    )
    parser.add_argument(
        "--d-warmup", type=int, default=0, help="first steps that train only the discriminators (fine-tuning)"
    )
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--intermediate-dim", type=int, default=None)
    parser.add_argument("--num-layers", type=int, default=None)
    parser.add_argument(
        "--zero-dc-bin",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="zero the head's DC bin (VocoderConfig.zero_dc_bin; also over --init's config)",
    )
    a = parser.parse_args()

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True  # the discriminators' and heads' matmuls (convs use TF32 already)
    run = Path(a.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    ckpt_path = run / "ckpt.pt"
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False) if a.resume and ckpt_path.exists() else None
    if state is not None and state.get("arch", "voice") != a.arch:
        raise SystemExit(f"{ckpt_path} holds a {state.get('arch', 'voice')} vocoder, not --arch {a.arch}")
    keys = ("dim", "intermediate_dim", "num_layers", "zero_dc_bin")
    over = {k: getattr(a, k) for k in keys if getattr(a, k) is not None}
    model, config = make_generator(a.arch, a.init, state["config"] if state else None, over)
    model = model.to(a.device).train()
    generate: Callable[[torch.Tensor], torch.Tensor] = model.generate if isinstance(model, hifigan.HifiGan) else model
    mel = MelSpectrogram(config).to(a.device)
    mel_loss = MelLoss(config).to(a.device)
    stft_loss = MultiResolutionSTFTLoss().to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.8, 0.99), weight_decay=0.01)
    mpd_channels = tuple(int(x) for x in a.mpd_channels.split(","))
    amp = a.amp if a.amp is not None else a.device.startswith("cuda")
    disc = GAN(mpd_channels, a.mrd_channels, amp).to(a.device) if a.gan_after < 1 else None
    opt_d = torch.optim.AdamW(disc.parameters(), lr=a.lr, betas=(0.8, 0.99)) if disc is not None else None
    g = torch.Generator().manual_seed(a.seed)
    step, trained_s = 0, 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, trained_s = state["step"], state["trained_s"]
        g.set_state(state["gen"])
        if disc is not None and "disc" in state:
            assert opt_d is not None  # made with disc
            disc.load_state_dict(state["disc"])
            opt_d.load_state_dict(state["opt_d"])
    pred_dirs = a.pred_mels.split(",") if a.pred_mels else None
    data = SegmentSampler(a.synth_dir.split(","), config.hop_length, a.device, a.limit, pred_dirs)
    n_pred = round(a.batch * a.pred_fraction) if pred_dirs else 0
    print(
        f"vocoder params={model.num_params() / 1e6:.2f} M gan_after={a.gan_after if disc else None} amp={amp} "
        f"audio={data.seconds / 3600:.2f} h device={a.device} resume_step={step}",
        flush=True,
    )
    model_config = model.config.to_dict()
    (run / "config.json").write_text(json.dumps(model_config, indent=2))
    log = TrainLog(run / "log.jsonl", a.log_every)
    budget = a.minutes * 60

    def save() -> None:
        st = {
            "arch": a.arch,
            "config": model_config,
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "step": step,
            "trained_s": trained_s,
            "gen": g.get_state(),
        }
        if disc is not None:
            assert opt_d is not None  # made with disc
            st.update(disc=disc.state_dict(), opt_d=opt_d.state_dict())
        torch.save(st, ckpt_path.with_suffix(".tmp"))
        ckpt_path.with_suffix(".tmp").replace(ckpt_path)

    session_start, trained_before = time.time(), trained_s
    last_ckpt = time.time()
    while trained_s < budget and not (a.max_steps and step >= a.max_steps):
        lr = lr_at(trained_s / budget, step, a.lr, a.warmup)
        for pg in opt.param_groups + (opt_d.param_groups if opt_d else []):
            pg["lr"] = lr
        wav, pred = data.sample(a.batch, a.segment_frames, g)
        with torch.no_grad():
            m = mel(wav)
            if pred is not None and n_pred:  # these segments are vocoded from the acoustic model's mel
                m[:n_pred] = pred[:n_pred]
        critic_only = step < a.d_warmup  # the generator waits while new discriminators learn
        with torch.set_grad_enabled(not critic_only):
            wav_hat = generate(m)
            parts = {"mel_l1": mel_loss(wav_hat, wav), "stft": stft_loss(wav_hat, wav)}
        loss = MEL_WEIGHT * parts["mel_l1"] + parts["stft"]
        if disc is not None and (critic_only or trained_s >= a.gan_after * budget):
            assert opt_d is not None  # made with disc
            d_loss = disc.d_loss(wav, wav_hat.detach())
            opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            opt_d.step()
            parts["d_loss"] = d_loss
            if not critic_only:
                parts["adv"], parts["fm"] = disc.g_loss(wav, wav_hat)
                loss = loss + parts["adv"] + 2.0 * parts["fm"]
        gn = torch.zeros(())
        if not critic_only:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
        step += 1
        trained_s = trained_before + time.time() - session_start
        metrics = {"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in parts.items()}}
        log.step(step, metrics, lr=lr, trained_s=round(trained_s, 1), grad_norm=float(gn))
        if time.time() - last_ckpt > a.ckpt_minutes * 60:
            save()
            last_ckpt = time.time()
    save()
    log.close()
    print(f"vocoder done: step={step} trained_s={trained_s:.0f}", flush=True)


if __name__ == "__main__":
    main()
