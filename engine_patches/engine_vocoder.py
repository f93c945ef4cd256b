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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vocoder.config import VOCODERS, VOICE_VOCODER
from vocoder.slot_frames import SlotFrames
from vocoder.step_result import StepPass
from vocoder.step_vocoder import StepVocoder

from .pcm_wire import PcmRoute, encode_parts, sink_address

if TYPE_CHECKING:
    import zmq

    from uttera_server.synthesis.speed import MelTimeScale

# One pass for the publisher: the pass, and each entry's utterance key and sink as they were at submission.
_Sent = tuple[StepPass, np.ndarray, np.ndarray]

log = logging.getLogger(__name__)

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
    vocoder: str = VOICE_VOCODER  # or a HiFi-GAN of vocoder/hifigan.py (the voice's or a package's), on windows

    def __post_init__(self) -> None:
        if min(self.chunk_frames, self.first_chunk_frames, self.max_utterances) < 1 or self.urgent_s < 0:
            raise ValueError(f"EngineVocoderConfig needs positive frame counts and utterances, got {self}")
        if self.vocoder not in VOCODERS:
            raise ValueError(f"unknown vocoder {self.vocoder!r}; known: {', '.join(VOCODERS)}")

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
        self._queue: queue.SimpleQueue[_Sent | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="uttera-pcm-publisher", daemon=True)
        self._thread.start()

    def put(self, result: StepPass, keys: np.ndarray, sinks: np.ndarray) -> None:
        """`keys`/`sinks`: each entry's utterance key and serving process, as they were at submission."""
        if self.error is not None:
            raise RuntimeError("the in-engine vocoder's publisher failed") from self.error
        self._queue.put((result, keys, sinks))

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
                result, keys, sinks = item
                result.wait()  # int16, converted on the vocoder's device
                counts = result.hi - result.lo
                for sink in np.unique(sinks).tolist():
                    sel = np.flatnonzero(sinks == sink)
                    header = list(zip(keys[sel].tolist(), counts[sel].tolist(), result.final[sel].tolist()))
                    self._socket(sink).send_multipart(encode_parts(header, result.body(sel)), copy=False)
        except BaseException as e:  # surfaced to the step loop by the next `put`
            log.exception("in-engine vocoder publisher failed")
            self.error = e


class EngineVocoder:
    """Mel rows of each engine step in, PCM out on the PCM channel (see module docstring). Each utterance
    (engine request) is a slot of the `StepVocoder`; its route and urgency clock are arrays indexed by slot."""

    def __init__(
        self,
        model_dir: str | Path,
        device: torch.device | str,
        config: EngineVocoderConfig,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`clock`: seconds, for the urgency rule (tests pass a controlled one)."""
        from vocoder import hifigan
        from vocoder.model import Vocoder
        from vocoder.windowed import WindowedStepVocoder

        device = torch.device(device)
        self.config = config
        self._clock = clock
        graphs = config.cuda_graphs and device.type == "cuda"
        self.vocoder: SlotFrames
        if config.vocoder == VOICE_VOCODER:
            self.vocoder = StepVocoder(
                Vocoder.from_dir(Path(model_dir) / "vocoder"),
                chunk_frames=config.chunk_frames,
                first_chunk_frames=config.first_chunk_frames,
                device=device,
                capacity=config.max_utterances,
                cuda_graphs=graphs,
            )
        else:
            self.vocoder = WindowedStepVocoder(
                hifigan.load(config.vocoder, model_dir),
                chunk_frames=config.chunk_frames,
                first_chunk_frames=config.first_chunk_frames,
                device=device,
                capacity=config.max_utterances,
            )
        if graphs:
            self.vocoder.capture_graphs(config.max_utterances)
        self.n_mels = self.vocoder.config.n_mels
        self.slot_of: dict[str, int] = {}  # open utterances by request id
        n = self.vocoder.capacity
        self._keys = np.empty(n, object)  # per slot: its PcmRoute's key and sink
        self._sinks = np.zeros(n, np.int64)
        self._started = np.full(n, np.nan)  # clock() at the pass that vocoded the utterance's first frames
        self._scales: dict[int, MelTimeScale] = {}  # slots with speed != 1: their mel resampled on the host
        self._scaled = np.zeros(n, bool)
        self._finishing: list[int] = []
        self._sample_s = 1.0 / self.vocoder.config.sample_rate
        self._publisher = _Publisher(config.sink_base)
        self.passes = 0

    def knows(self, req_id: str) -> bool:
        return req_id in self.slot_of

    def open(self, req_id: str, route: PcmRoute) -> None:
        from uttera_server.synthesis.speed import MelTimeScale

        slot = self.slot_of[req_id] = self.vocoder.open()
        if slot >= len(self._keys):  # the vocoder's slots grew: grow ours alike
            grow = self.vocoder.capacity - len(self._keys)
            self._keys = np.concatenate([self._keys, np.empty(grow, object)])
            self._sinks = np.concatenate([self._sinks, np.zeros(grow, np.int64)])
            self._started = np.concatenate([self._started, np.full(grow, np.nan)])
            self._scaled = np.concatenate([self._scaled, np.zeros(grow, bool)])
        self._keys[slot], self._sinks[slot], self._started[slot] = route.key, route.sink, np.nan
        self._scaled[slot] = route.speed != 1.0
        if route.speed != 1.0:
            self._scales[slot] = MelTimeScale(route.speed)

    def slots(self, req_ids: list[str]) -> np.ndarray:
        """The slot of each request id (-1: not an open utterance)."""
        get = self.slot_of.get
        return np.fromiter((get(r, -1) for r in req_ids), np.int64, len(req_ids))

    def finished(self, req_ids: Iterable[str]) -> None:
        """The scheduler finished these requests (stop, length or abort): flush them next pass."""
        for req_id in req_ids:
            slot = self.slot_of.pop(req_id, None)
            if slot is not None:
                self._finishing.append(slot)

    def step(
        self, mel: torch.Tensor | None = None, slots: np.ndarray | None = None, rows: np.ndarray | None = None
    ) -> None:
        """Vocode this step: row `rows[i]` of `mel (R, frames_per_step, n_mels)` (the model's output, on
        its device) belongs to the utterance in slot `slots[i]` (rows that voiced a pointer only);
        finished requests are flushed."""
        finishing, self._finishing = self._finishing, []
        slots = np.asarray(slots if slots is not None and mel is not None else (), np.int64)
        rows = np.asarray(rows if rows is not None and mel is not None else (), np.int64)
        if not len(slots) and not finishing:
            return
        host: dict[int, np.ndarray] = {}  # speed-changed utterances: resampled on the host
        if len(slots) and (scaled := self._scaled[slots]).any():
            assert mel is not None
            for slot, row in zip(slots[scaled].tolist(), rows[scaled].tolist()):
                host[slot] = self._scales[slot].push(mel[row].detach().float().cpu().numpy())
            slots, rows = slots[~scaled], rows[~scaled]
        for slot in finishing:
            self._scaled[slot] = False
            scale = self._scales.pop(slot, None)
            if scale is not None and (tail := scale.flush()).size:
                head = host.get(slot)
                host[slot] = tail if head is None or not len(head) else np.concatenate([head, tail])
        now = self._clock()
        voc = self.vocoder
        result = voc.submit(
            mel, slots, rows, host=host, finish=np.asarray(finishing, np.int64), eager=self._urgent(now)
        )
        self.passes += 1
        self._started[np.isnan(self._started) & voc.is_open & (voc.emitted > 0)] = now
        self._publisher.put(result, self._keys[result.slots], self._sinks[result.slots])

    def _urgent(self, now: float) -> np.ndarray:
        """Mask over slots: utterances whose audio sent is less than `urgent_s` ahead of real-time playback
        from their first chunk (the chunk schedule would make them wait longer than their client can)."""
        ahead = self.vocoder.emitted * self._sample_s - (now - self._started)
        with np.errstate(invalid="ignore"):
            return ahead < self.config.urgent_s  # NaN (not started): False

    def close(self) -> None:
        self._publisher.close()
