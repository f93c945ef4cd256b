"""The `heart` teacher: hibari-tts 0.2.1 (Kokoro-82M `af_heart` distilled; numpy + onnxruntime, 24 kHz).

hibari runs `hibari.onnx` (inputs `ids` int64 (1, N) with a 0 pad at both ends, `speed` float32 (1,);
outputs lh, theta, ln, lr, phi (601, F) and f0 (F,)) and turns the frame parameters into a waveform on
the host (`hibari.dsp.synth`: n_fft 1200, hop 300 at 24 kHz, so F frames = F * 300 samples).

Durations: inside the graph Kokoro's duration head gives, per input id,
`Clip(Round((exp(logdur) - 1) / speed), min=1)` followed by a Cast to int64 that feeds the CumSum /
ReduceSum of the length regulator. That Cast's output is exposed as an extra graph output at load time
(as `piper.patch_voice_with_alignment` does for Piper's `w_ceil`). Its unit is Kokoro's 40 Hz duration
frame: the length regulator gathers one hidden frame per unit and a Tile doubles it to the decoder's
80 Hz (hop 300) frames, so one unit = `UNIT` = 600 samples and `sum(units) * 600 == len(audio)` exactly.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_RATE = 24_000
HOP = 300  # hibari.dsp.HOP: one decoder frame, 12.5 ms
UNIT = 2 * HOP  # samples per duration unit (the length regulator's Tile doubles each aligned frame)
DURATION_OUTPUT = "durations"


def find_duration_tensor(graph: Any) -> str:
    """Name of the int64 per-id duration tensor: the Cast of `Clip(Round(...))` that feeds a CumSum."""
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for clip in graph.node:
        if clip.op_type != "Clip" or producer.get(clip.input[0]) is None:
            continue
        if producer[clip.input[0]].op_type != "Round":
            continue
        for cast in consumers.get(clip.output[0], []):
            if cast.op_type == "Cast" and any(c.op_type == "CumSum" for c in consumers.get(cast.output[0], [])):
                return str(cast.output[0])
    raise ValueError("no Round -> Clip -> Cast -> CumSum duration tensor in the graph")


def model_path() -> Path:
    from hibari.voices import voice_path

    return Path(voice_path("heart"))


def vocab() -> dict[str, int]:
    import hibari.tts

    return dict(json.loads((Path(hibari.tts.ASSETS) / "vocab.json").read_text(encoding="utf-8")))


@dataclass(frozen=True, slots=True)
class TeacherOutput:
    audio: np.ndarray  # float32 (units.sum() * UNIT,), 24 kHz, as hibari returns it (not normalized)
    units: np.ndarray  # int64 (N,): duration units (600 samples) per input id, pads included


class HeartTeacher:
    """hibari's `heart` voice with its per-id durations. One single-threaded session by default."""

    def __init__(self, threads: int = 1, speed: float = 1.0) -> None:
        import onnx
        import onnxruntime
        from onnx import helper

        proto = onnx.load(str(model_path()))
        name = find_duration_tensor(proto.graph)
        # A graph output must not share its name with an internal tensor's other uses: add an Identity.
        proto.graph.node.append(helper.make_node("Identity", [name], [DURATION_OUTPUT], name="expose_durations"))
        proto.graph.output.append(helper.make_tensor_value_info(DURATION_OUTPUT, onnx.TensorProto.INT64, None))
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = threads
        opts.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            proto.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self.speed = speed
        self.vocab = vocab()
        self.duration_tensor = name

    def synthesize(self, ids: list[int], rng: np.random.Generator) -> TeacherOutput:
        """hibari input ids (0 pads at both ends) -> audio and per-id duration units."""
        from hibari import dsp

        outputs = self.session.run(
            None, {"ids": np.asarray([ids], np.int64), "speed": np.asarray([self.speed], np.float32)}
        )
        by_name = dict(zip((o.name for o in self.session.get_outputs()), outputs))
        lh, th, ln, lr, phi, f0 = (by_name[k][0] for k in ("lh", "theta", "ln", "lr", "phi", "f0"))
        units = np.asarray(by_name[DURATION_OUTPUT], dtype=np.int64).reshape(-1)
        audio = np.asarray(dsp.synth(lh, th, ln, lr, phi, f0, rng), dtype=np.float32)
        if len(units) != len(ids) or int(units.sum()) * UNIT != len(audio):
            raise ValueError(f"{len(ids)} ids, {len(units)} durations summing to {units.sum()}, {len(audio)} samples")
        return TeacherOutput(audio=audio, units=units)


def default_threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


def resample(x: np.ndarray, sr_in: int, sr_out: int, half_width: int = 32, beta: float = 8.0) -> np.ndarray:
    """Band-limited rational resampling (polyphase Kaiser-windowed sinc, numpy only), float32 out.

    Output sample n sits at input time n * sr_in / sr_out; `floor(len(x) * sr_out / sr_in)` samples.
    The low-pass cuts at 0.95 of the lower Nyquist frequency; each phase's taps sum to 1.
    """
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if sr_in == sr_out:
        return x.copy()
    g = math.gcd(sr_in, sr_out)
    up, down = sr_out // g, sr_in // g
    cutoff = 0.95 * min(1.0, up / down)
    taps = np.arange(-half_width + 1, half_width + 1)
    frac = (np.arange(up) * down % up) / up
    t = taps[None, :] - frac[:, None]  # (up, taps): distance in input samples
    window = np.i0(beta * np.sqrt(np.clip(1.0 - (t / half_width) ** 2, 0.0, None))) / np.i0(beta)
    h = cutoff * np.sinc(cutoff * t) * window
    h = (h / h.sum(axis=1, keepdims=True)).astype(np.float32)
    n_out = len(x) * up // down
    xp = np.pad(x, (half_width, half_width + 1))
    out = np.empty(n_out, np.float32)
    for start in range(0, n_out, 16384):
        n = np.arange(start, min(n_out, start + 16384))
        idx = (n * down // up)[:, None] + taps[None, :] + half_width
        out[start : start + len(n)] = np.einsum("nt,nt->n", xp[idx], h[n % up])
    return out


def units_to_frames(units: np.ndarray, sample_rate: int, hop: int) -> np.ndarray:
    """Duration units (600 samples at 24 kHz) -> integer frames of `hop` samples at `sample_rate`.

    The cumulative boundaries are converted and rounded (half up), not the single durations, so there is
    no drift: frame boundary k = floor(cum_units[k] * 600 * sample_rate / 24000 / hop + 1/2), and the
    frames sum to the rounded total. At 22,050 Hz, hop 256 a unit is 2.153 frames, so every unit-long
    phoneme gets 2 or 3 frames; at 24 kHz, hop 300 it is exactly 2 frames.
    """
    cum = np.concatenate([[0], np.cumsum(np.asarray(units, dtype=np.int64))])
    num = cum * UNIT * sample_rate  # exact integers; boundary = num / (SAMPLE_RATE * hop)
    den = SAMPLE_RATE * hop
    bounds = (2 * num + den) // (2 * den)
    return np.diff(bounds).astype(np.int64)
