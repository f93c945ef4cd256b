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
