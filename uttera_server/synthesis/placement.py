"""Where the streaming vocoder runs (`EngineConfig.vocoder_process`, `vocoder_device`): policy, resolved once,
and the serving process's own vocoder when it runs there."""

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from vocoder.config import VOICE_VOCODER

from ..config import EngineConfig
from ..errors import ConfigError

if TYPE_CHECKING:
    from .vocoder_worker import VocoderWorker

log = logging.getLogger(__name__)


def vocoder_process(setting: str, device: str, vocoder: str = VOICE_VOCODER) -> str:
    """`EngineConfig.vocoder_process` resolved: "auto" is the engine's worker when the vocoder runs on
    CUDA (one CUDA context; no mel round trip through the host) or is not the voice's own (only the
    engine runs the others), this process on CPU (where the worker's cores are the engine's, and the
    vocoder runs beside it on the other core)."""
    if setting == "auto":
        return "engine" if device == "cuda" or vocoder != VOICE_VOCODER else "frontend"
    return setting


def check_vocoder(name: str, model_dir: Path) -> None:
    """`EngineConfig.vocoder` against the voice in `model_dir`: a vocoder other than the voice's own must
    be installed (a package's, or the voice's `hifigan/`) and read the voice's mel (config.json's analysis keys); raises `ConfigError` otherwise."""
    if name == VOICE_VOCODER:
        return
    from vocoder.errors import VocoderError
    from vocoder.hifigan import config_of

    try:
        config_of(name, model_dir).check_matches(json.loads((model_dir / "config.json").read_text()))
    except VocoderError as e:
        raise ConfigError(str(e)) from None


def vocoder_device(setting: str) -> str:
    """`EngineConfig.vocoder_device` resolved in this process: "auto" is CUDA when torch sees a GPU."""
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--vocoder-device cuda: this process sees no CUDA device (use auto or cpu)")
    return setting


async def start_vocoder_worker(model_dir: Path, c: EngineConfig, device: str) -> "tuple[VocoderWorker, str]":
    """The serving process's own vocoder (`vocoder_process="frontend"`) for the voice in `model_dir`, on
    `device` (resolved); returns it and where it runs, in words."""
    from vocoder.model import Vocoder
    from vocoder.streaming import StreamingVocoder

    from .vocoder_worker import VocoderWorker

    vocoder = Vocoder.from_dir(model_dir / "vocoder")
    vocoder.config.check_matches(json.loads((model_dir / "config.json").read_text()))
    graphs = device != "cpu" and c.vocoder_cuda_graphs is True  # None: off in the serving process
    # With CUDA graphs: a state slot per engine sequence from the start (growing the pool reallocates
    # it, which makes every captured graph stale), and the graphs captured before the first request.
    streaming = StreamingVocoder(
        vocoder,
        chunk_frames=c.vocoder_chunk_frames,
        first_chunk_frames=c.first_chunk_frames,
        device=device,
        initial_capacity=c.max_num_seqs + 1 if graphs else 8,
        cuda_graphs=graphs,
    )
    if streaming.cuda_graphs:
        t0 = time.monotonic()
        captured = await asyncio.to_thread(streaming.capture_graphs, c.max_num_seqs)
        log.info("vocoder: %d CUDA graphs captured in %.1f s", captured, time.monotonic() - t0)
    # On CPU a big vocoder batch takes tens of ms: cap the non-urgent work of a pass (see VocoderWorker).
    worker = VocoderWorker(
        streaming,
        deadline_first=c.scheduling == "deadline",
        max_relaxed_frames=2 * c.vocoder_chunk_frames if device == "cpu" else None,
        driver=c.vocoder_driver,
    )
    return worker, f"on {device}{' (CUDA graphs)' if streaming.cuda_graphs else ''} in the server"
