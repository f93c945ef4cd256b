"""HiFi-GAN UNIVERSAL streamed on windows (vocoder/windowed.py): exactness, latency and work per lookahead.

    python -m benchmarks.hifigan_streaming [--lookahead 0,2,4,8,13] [--rounds 3] [--out benchmarks/results/hifigan_streaming.json]

The mel of each teacher clip in `docs/samples/teacher_*.flac` (both voices, 10 clips, ~48 s; our analysis,
vocoder/mel.py) is streamed 4 frames a step (the engine's) through `WindowedStepVocoder` with the server's
chunk schedule (first chunk 8 frames, chunks up to 32), each lookahead in turn, and compared with
`HifiGan.forward` on the whole mel: SNR over all clips (dB; inf = identical int16), largest difference
(LSB), the latency the lookahead adds before the first chunk (ms of audio), and the network's frames per
frame of audio (context recomputed each pass). Wall time per second of audio, streamed / offline, is
timed on this machine's CPU in alternated rounds (median); on the GPU the passes batch across streams.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.machine import describe, loadavg

ROOT = Path(__file__).resolve().parent.parent
STEP = 4  # mel frames per engine step


def clips_mels() -> list[torch.Tensor]:
    import av  # the samples are streamed FLAC (no length in the header), which libsndfile cannot read

    from vocoder.config import VocoderConfig
    from vocoder.mel import MelSpectrogram

    analysis = MelSpectrogram(VocoderConfig())
    mels = []
    for path in sorted((ROOT / "docs" / "samples").glob("teacher_*.flac")):
        with av.open(str(path)) as container:
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
            rate = container.streams.audio[0].rate
        assert rate == 22050, path
        audio = np.concatenate(frames).astype(np.float32) / 32768.0
        with torch.inference_mode():
            mels.append(analysis(torch.from_numpy(audio)[None])[0].T.contiguous())  # (T, 80)
    return mels


class CountingNet(torch.nn.Module):
    """The network, counting the frames it runs."""

    def __init__(self, net):
        super().__init__()
        self.net, self.config, self.frames = net, net.config, 0

    def reach(self):
        return self.net.reach()

    def generate(self, mel):
        self.frames += mel.shape[0] * mel.shape[-1]
        return self.net.generate(mel)


def stream(net, mel: torch.Tensor, lookahead: int) -> np.ndarray:
    from vocoder.windowed import WindowedStepVocoder

    sv = WindowedStepVocoder(net, chunk_frames=32, first_chunk_frames=8, capacity=1, lookahead=lookahead)
    slot = sv.open()
    steps = -(-mel.shape[0] // STEP)
    padded = torch.full((steps * STEP, mel.shape[1]), net.config.silence)
    padded[: mel.shape[0]] = mel
    out = []
    for s in range(steps + 1):
        last = s == steps
        batch = None if last else padded[s * STEP : (s + 1) * STEP][None]
        r = sv.submit(
            batch,
            np.array([] if last else [slot]),
            np.array([] if last else [0]),
            finish=np.array([slot] if last else []),
        )
        out += [r.pcm(j).copy() for j in range(len(r.slots))]
    return np.concatenate(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lookahead", default="0,2,4,8,13")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hifigan_streaming.json")
    a = p.parse_args()
    from vocoder.hifigan import HifiGan

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = HifiGan.from_package("hifigan-universal")
    mels = clips_mels()
    frames = sum(m.shape[0] for m in mels)
    audio_s = frames * net.config.hop_length / net.config.sample_rate
    with torch.inference_mode():
        padded = [torch.cat([m, torch.full((-m.shape[0] % STEP, m.shape[1]), net.config.silence)]) for m in mels]
        offline = [(net(m.T[None])[0].clamp(-1, 1) * 32767).to(torch.int16).numpy() for m in padded]
    lookaheads = [int(x) for x in a.lookahead.split(",")]
    rows = {la: {"lookahead": la, "added_latency_ms": round(1000 * la * 256 / 22050, 1)} for la in lookaheads}
    times: dict[str, list[float]] = {"offline": [], **{str(la): [] for la in lookaheads}}
    for rnd in range(a.rounds):
        t0 = time.perf_counter()
        with torch.inference_mode():
            for m in padded:
                net(m.T[None])
        times["offline"].append((time.perf_counter() - t0) / audio_s)
        for la in lookaheads:
            counting = CountingNet(net)
            t0 = time.perf_counter()
            with torch.inference_mode():
                got = [stream(counting, m, la) for m in mels]
            times[str(la)].append((time.perf_counter() - t0) / audio_s)
            if rnd == 0:
                diff = np.concatenate([g.astype(np.float64) - w for g, w in zip(got, offline)])
                ref = np.concatenate(offline).astype(np.float64)
                err = float((diff**2).sum())
                rows[la]["snr_db"] = round(10 * np.log10((ref**2).sum() / err), 1) if err else float("inf")
                rows[la]["max_lsb"] = int(np.abs(diff).max())
                rows[la]["network_frames_per_frame"] = round(counting.frames / sum(p.shape[0] for p in padded), 2)
    off = statistics.median(times["offline"])
    print(f"{len(mels)} clips, {audio_s:.1f} s of audio; offline {off:.3f} s per audio-s (1 CPU thread)\n")
    print(
        "| lookahead (frames) | added latency ms | SNR dB | max LSB | network frames / frame | wall, streamed / offline |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for la in lookaheads:
        r = rows[la]
        r["wall_ratio"] = round(statistics.median(times[str(la)]) / off, 2)
        print(
            f"| {la} | {r['added_latency_ms']} | {r['snr_db']} | {r['max_lsb']} | {r['network_frames_per_frame']} | {r['wall_ratio']} |"
        )
    a.out.write_text(
        json.dumps(
            {
                **describe(),
                "loadavg_end": loadavg(),
                "clips": len(mels),
                "audio_s": round(audio_s, 2),
                "offline_s_per_audio_s": round(off, 4),
                "rows": list(rows.values()),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
