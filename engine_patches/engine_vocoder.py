"""The streaming vocoder inside the engine's worker process: one CUDA context per GPU.

Runs in vLLM's worker (rank 0), fed by the model runner patch (gpu_model_runner.py) with each step's
mel rows where they were computed (on the GPU: no device -> host -> device round trip), batched over
every utterance that has frames, on the vocoder's own CUDA stream (vocoder/streaming.py). PCM, made int16 on
the vocoder's device (`int16_pcm`: half the bytes to the host, no conversion per utterance there), leaves on
the PCM channel (pcm_wire.py) from a publisher thread, which waits for the GPU with the GIL released,
so the worker's step loop never waits for the vocoder.

An utterance is one engine request that asked for PCM (`SamplingParams.extra_args[PCM_ARG]`). It is
opened the first step its request is seen, gets a chunk of frames for every step that voiced a
pointer, and is finished (vocoder tail flushed, `final` sent) when the scheduler reports the request
finished, whatever the reason; a preempted request keeps its utterance and resumes it.

Streamed audio equals offline vocoding of the utterance's whole mel (the StreamingVocoder contract); the
chunk schedule is the StreamingVocoder's (first chunk after `first_chunk_frames`, then doubling up to
`chunk_frames`), except for an utterance about to run dry: once its audio sent is less than `urgent_s`
ahead of a client that started playing it at its first chunk, every pending frame goes out at the next
step (`eager`), so a slow step (a full batch, prefills) costs a smaller chunk rather than a gap.
"""

import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .pcm_wire import PcmRoute, encode, sink_address

if TYPE_CHECKING:
    import zmq

    from uttera_server.synthesis.speed import MelTimeScale
    from vocoder.step_result import StepResult

# One utterance's part of a pass, for the publisher: (request id, where its PCM goes, final).
_Meta = tuple[Hashable, PcmRoute, bool]

log = logging.getLogger(__name__)

_NO_PCM = np.zeros(0, np.int16)

CONFIG_KEY = "uttera_vocoder"  # vllm_config.additional_config key holding `EngineVocoderConfig`


@dataclass(frozen=True, slots=True)
class EngineVocoderConfig:
    """What the serving process tells the worker (through `additional_config[CONFIG_KEY]`)."""

    sink_base: str  # pcm_wire.sink_address base
    chunk_frames: int = 32
    first_chunk_frames: int = 8
    cuda_graphs: bool = False
    max_utterances: int = 32  # the engine's max_num_seqs: state slots allocated up front
    urgent_s: float = 0.25  # an utterance with less audio than this ahead of real-time playback is vocoded at once

    def __post_init__(self) -> None:
        if min(self.chunk_frames, self.first_chunk_frames, self.max_utterances) < 1 or self.urgent_s < 0:
            raise ValueError(f"EngineVocoderConfig needs positive frame counts and utterances, got {self}")

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


class _Publisher:
    """Thread that waits for each pass's PCM (GIL released while the GPU works) and sends it, in
    submission order, one message per sink."""

    def __init__(self, sink_base: str):
        import zmq

        self._zmq = zmq
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._base = sink_base
        self._sockets: dict[int, zmq.Socket[bytes]] = {}
        self._queue: queue.SimpleQueue[tuple[StepResult, list[_Meta]] | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="uttera-pcm-publisher", daemon=True)
        self._thread.start()

    def put(self, result: "StepResult", meta: list[_Meta]) -> None:
        if self.error is not None:
            raise RuntimeError("the in-engine vocoder's publisher failed") from self.error
        self._queue.put((result, meta))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)
        for sock in self._sockets.values():
            sock.close(linger=1000)

    def _socket(self, sink: int) -> "zmq.Socket[bytes]":
        sock = self._sockets.get(sink)
        if sock is None:
            sock = self._context.socket(self._zmq.PUSH)
            sock.setsockopt(self._zmq.SNDHWM, 0)  # never drop: the sink reads every step
            sock.connect(sink_address(self._base, sink))
            self._sockets[sink] = sock
        return sock

    def _run(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                result, meta = item
                pcm = result.wait()
                by_sink: dict[int, list[tuple[str, np.ndarray, bool]]] = {}
                for req_id, route, final in meta:
                    audio = pcm.get(req_id)  # int16, converted on the vocoder's device
                    if (audio is not None and audio.size) or final:
                        samples = audio if audio is not None else _NO_PCM
                        by_sink.setdefault(route.sink, []).append((route.key, samples, final))
                for sink, entries in by_sink.items():
                    self._socket(sink).send_multipart(encode(entries), copy=False)
        except BaseException as e:  # surfaced to the step loop by the next `put`
            log.exception("in-engine vocoder publisher failed")
            self.error = e


class EngineVocoder:
    """Mel rows of each engine step in, PCM out on the PCM channel (see module docstring)."""

    def __init__(
        self,
        model_dir: str | Path,
        device: torch.device | str,
        config: EngineVocoderConfig,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`clock`: seconds, for the urgency rule (tests pass a controlled one)."""
        from vocoder.model import Vocoder
        from vocoder.streaming import StreamingVocoder

        device = torch.device(device)
        self.config = config
        self._clock = clock
        graphs = config.cuda_graphs and device.type == "cuda"
        self.vocoder = StreamingVocoder(
            Vocoder.from_dir(Path(model_dir) / "vocoder"),
            chunk_frames=config.chunk_frames,
            first_chunk_frames=config.first_chunk_frames,
            device=device,
            initial_capacity=config.max_utterances + 1 if graphs else 8,
            cuda_graphs=graphs,
            int16_pcm=True,
        )
        if graphs:
            self.vocoder.capture_graphs(config.max_utterances)
        self.n_mels = self.vocoder.config.n_mels
        # Keyed by request id (a str), which is the StreamingVocoder's utterance id.
        self._routes: dict[Hashable, PcmRoute] = {}
        self._scales: dict[Hashable, MelTimeScale] = {}  # for speed != 1
        self._finishing: list[Hashable] = []
        self._started: dict[Hashable, float] = {}  # clock() at the utterance's first chunk's pass
        c = self.vocoder.config
        self._sample_s = 1.0 / c.sample_rate
        self._hop, self._lag = c.hop_length, self.vocoder.lag_samples
        self._publisher = _Publisher(config.sink_base)
        self.passes = 0

    def knows(self, req_id: str) -> bool:
        return req_id in self._routes

    def open(self, req_id: str, route: PcmRoute) -> None:
        from uttera_server.synthesis.speed import MelTimeScale

        self._routes[req_id] = route
        self.vocoder.open(req_id)
        if route.speed != 1.0:
            self._scales[req_id] = MelTimeScale(route.speed)

    def finished(self, req_ids: Iterable[str]) -> None:
        """The scheduler finished these requests (stop, length or abort): flush them next pass."""
        for req_id in req_ids:
            if req_id in self._routes:
                self._finishing.append(req_id)

    def step(self, mel: torch.Tensor | None = None, rows: dict[str, int] | None = None) -> None:
        """Vocode this step: `rows` maps request ids to their row of `mel (R, frames_per_step, n_mels)`
        (the model's output, on its device; rows that voiced a pointer only); finished requests are
        flushed. No tensor is made per row: the vocoder gathers the rows in its pass."""
        finishing, self._finishing = self._finishing, []
        rows = rows or {}
        if not rows and not finishing:
            return
        direct: dict[Hashable, int] = {}
        host: dict[Hashable, np.ndarray] = {}  # speed-changed utterances: resampled on the host
        for req_id, row in rows.items():
            scale = self._scales.get(req_id)
            if scale is None:
                direct[req_id] = row
            else:
                assert mel is not None  # `rows` are rows of `mel`
                host[req_id] = scale.push(mel[row].detach().float().cpu().numpy())
        for uid in finishing:
            scale = self._scales.pop(uid, None)
            if scale is not None and (tail := scale.flush()).size:
                head = host.get(uid)
                host[uid] = tail if head is None or not len(head) else np.concatenate([head, tail])
        host = {k: v for k, v in host.items() if len(v)}
        now = self._clock()
        eager = self._urgent((*direct, *host), now)
        result = self.vocoder.submit(
            host, finish=finishing, step_rows=(mel, direct) if direct and mel is not None else None, eager=eager
        )
        self.passes += 1
        started, vocoder = self._started, self.vocoder
        for uid in (*direct, *host):
            if uid not in started and vocoder.is_open(uid) and vocoder.vocoded_frames(uid):
                started[uid] = now
        for uid in finishing:
            started.pop(uid, None)
        meta = [(req_id, self._routes[req_id], False) for req_id in (*direct, *host) if req_id not in finishing]
        meta += [(req_id, self._routes.pop(req_id), True) for req_id in finishing]
        self._publisher.put(result, meta)

    def _urgent(self, req_ids: Collection[Hashable], now: float) -> set[Hashable]:
        """Utterances whose audio sent is less than `urgent_s` ahead of real-time playback from their first
        chunk (the chunk schedule would make them wait longer than their client can)."""
        started, vocoder, urgent_s = self._started, self.vocoder, self.config.urgent_s
        hop, lag, sample_s = self._hop, self._lag, self._sample_s
        urgent: set[Hashable] = set()
        for req_id in req_ids:
            t0 = started.get(req_id)
            if t0 is not None and (vocoder.vocoded_frames(req_id) * hop - lag) * sample_s - (now - t0) < urgent_s:
                urgent.add(req_id)
        return urgent

    def close(self) -> None:
        self._publisher.close()
