"""The PCM channel between the engine's worker (in-engine vocoder) and the serving processes.

Runs on both sides of the process boundary, so it imports neither vLLM nor the server: plain ZMQ
and msgspec. Why a channel of its own instead of vLLM's step outputs: a request's last audio (the
vocoder's lookahead tail) exists only once the engine has finished the request, after its final
output has left, and a per-request tensor in every `EngineCoreOutput` costs a msgpack frame per row
per step; here one message per step per serving process carries every utterance's new PCM.

Addressing: serving process `sink` (vLLM's `client_index`) binds a PULL socket at
`sink_address(base, sink)` before it sends any request; the worker connects one PUSH socket per sink
it sees in a request, lazily. ZMQ queues for a connecting peer, so nothing is lost.

Message (two frames): `header` = msgpack list of `(key, n_samples, final)` in buffer order, and
`pcm` = the samples of all entries concatenated, int16 little-endian mono at the voice's sample
rate. `final` marks an utterance's last entry (possibly 0 samples); nothing follows it for that key.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

# `SamplingParams.extra_args` key that asks for PCM from the in-engine vocoder instead of mel chunks.
PCM_ARG = "uttera_pcm"

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[tuple[str, int, bool]])


@dataclass(frozen=True, slots=True)
class PcmRoute:
    """Where one engine request's PCM goes: `key` names the utterance on serving process `sink`;
    `speed` resamples the mel in time before vocoding (uttera_server/speed.py)."""

    sink: int
    key: str
    speed: float = 1.0

    def as_arg(self) -> dict[str, object]:
        return {"sink": self.sink, "key": self.key, "speed": self.speed}

    @classmethod
    def from_arg(cls, arg: Mapping[str, Any]) -> "PcmRoute":
        return cls(int(arg["sink"]), str(arg["key"]), float(arg.get("speed", 1.0)))


def sink_address(base: str, sink: int) -> str:
    """ZMQ address of serving process `sink`'s PULL socket, e.g. `ipc:///tmp/uttera-1234-pcm-0`."""
    return f"{base}-{sink}"


def encode(entries: list[tuple[str, np.ndarray, bool]]) -> list[bytes]:
    """`(key, int16 pcm (n,), final)` entries -> the two frames of one message."""
    parts = [pcm for _, pcm, _ in entries if pcm.shape[0]]
    body = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return encode_parts([(key, int(pcm.shape[0]), final) for key, pcm, final in entries], body)


def encode_parts(header: list[tuple[str, int, bool]], body: np.ndarray) -> list[bytes]:
    """`(key, n_samples, final)` entries and their int16 samples concatenated in that order -> the two
    frames of one message (what `encode` makes, without an array per entry)."""
    if sum(n for _, n, _ in header) != body.shape[0]:
        raise ValueError(f"PCM header names {sum(n for _, n, _ in header)} samples, body has {body.shape[0]}")
    return [_encoder.encode(header), body.astype("<i2", copy=False).tobytes()]


def decode(frames: list[bytes]) -> list[tuple[str, np.ndarray, bool]]:
    """The inverse of `encode`; the arrays are read-only views of the message buffer."""
    if len(frames) != 2:
        raise ValueError(f"a PCM message has 2 frames, got {len(frames)}")
    entries = _decoder.decode(frames[0])
    audio = np.frombuffer(frames[1], dtype="<i2")
    total = sum(n for _, n, _ in entries)
    if total != audio.shape[0]:
        raise ValueError(f"PCM message header names {total} samples, body has {audio.shape[0]}")
    out, at = [], 0
    for key, n, final in entries:
        out.append((key, audio[at : at + n], final))
        at += n
    return out
