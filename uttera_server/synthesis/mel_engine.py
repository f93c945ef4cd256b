"""The patched vLLM engine as a source of mel frames: one `AsyncLLM`, one async iterator per request.

`MelEngine.generate(phoneme_ids)` yields `MelStep`s: for each decode step that voiced a pointer, the
pointer (prompt phoneme index) and its `(frames_per_step, n_mels)` log-mel chunk, in order and without
gaps (engine_patches guarantees it even when this consumer lags). Closing the iterator, or cancelling
the task that drives it, aborts the engine request and frees its KV blocks.
"""

import asyncio
import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any
from contextlib import aclosing
from collections.abc import AsyncGenerator, Callable
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..config import Dtype, EngineConfig
from ..model_dir import VoiceModelConfig

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.metrics.loggers import StatLoggerBase
    from vllm.v1.metrics.stats import IterationStats, MultiModalCacheStats, SchedulerStats

    from engine_patches.engine_vocoder import EngineVocoderConfig
    from engine_patches.pcm_wire import PcmRoute

log = logging.getLogger(__name__)

POINTER_PROCESSOR = "uttera_server.model.pointer_logits:PointerLogitsProcessor"
_MAKING_ENGINE = threading.Lock()
"""Making an AsyncLLM re-registers vLLM's Prometheus metrics in the process-wide registry (unregistering
the previous ones first): two engines made at once in one process race on it (DuplicateTimeseries, seen in
a test that starts two side by side), so they are made one at a time."""


@dataclass(frozen=True, slots=True)
class MelStep:
    pointer: int  # index of the prompt phoneme these frames voice
    mel: np.ndarray | None  # (frames_per_step, n_mels) float32 log-mel; None when vocoded in the engine


@dataclass(slots=True)
class EngineStats:
    """Latest scheduler figures, updated by the engine's stat logger every step."""

    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: float = 0.0  # fraction of KV blocks in use
    steps: int = 0
    last_step_time: float = field(default=0.0)  # time.monotonic() of the last report
    # Steps that followed a step with requests running, and the time between those reports: their ratio
    # is the engine's step time under load, as seen from this process (scheduler + forward + IPC).
    busy_steps: int = 0
    busy_step_s: float = 0.0
    step_trace: list[float] | None = None  # set to [] to record every report's time.monotonic()
    # Requests that ended in the engine, by vLLM finish reason: "stop" (the model said STOP), "length"
    # (hit max_tokens: a runaway, which the pointer rules should make impossible), "abort".
    finished: Counter[str] = field(default_factory=Counter)
    preemptions: int = 0  # requests the scheduler preempted (to recompute later), cumulative
    prefix_cache_hits: int = 0  # prompt tokens served from cached KV blocks, cumulative
    outputs: int = 0  # request outputs received from the engine (one per `stream_interval` steps)
    # Data parallel: each engine core's latest (running, waiting, kv usage); the fields above are their sums
    # (KV usage: the mean).
    per_engine: dict[int, tuple[int, int, float]] = field(default_factory=dict)
    last_step_by_engine: dict[int, float] = field(default_factory=dict)
    # Called after each scheduler report and each finished request (metrics.py, several serving
    # processes: publishes these figures where every process's /metrics sees them).
    on_change: Callable[[], None] | None = None

    def request_finished(self, reason: str) -> None:
        self.finished[reason] += 1
        if self.on_change is not None:
            self.on_change()

    def record_scheduler(self, engine: int, running: int, waiting: int, kv_usage: float, now: float) -> None:
        """One engine core's scheduler figures after one of its steps."""
        last = self.last_step_by_engine.get(engine)
        previous = self.per_engine.get(engine)
        if previous is not None and previous[0] > 0 and last is not None:
            self.busy_steps += 1
            self.busy_step_s += now - last
        self.per_engine[engine] = (running, waiting, kv_usage)
        self.last_step_by_engine[engine] = now
        figures = self.per_engine.values()
        self.num_running = sum(f[0] for f in figures)
        self.num_waiting = sum(f[1] for f in figures)
        self.kv_cache_usage = sum(f[2] for f in figures) / len(self.per_engine)
        self.steps += 1
        self.last_step_time = now
        if self.step_trace is not None:
            self.step_trace.append(now)
        if self.on_change is not None:
            self.on_change()


def _stat_logger_factory(stats: EngineStats) -> "type[StatLoggerBase]":
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Recorder(StatLoggerBase):
        def __init__(self, vllm_config: "VllmConfig", engine_index: int = 0):
            pass

        def record(
            self,
            scheduler_stats: "SchedulerStats | None",
            iteration_stats: "IterationStats | None",
            mm_cache_stats: "MultiModalCacheStats | None" = None,
            engine_idx: int = 0,
        ) -> None:
            if iteration_stats is not None:
                stats.preemptions += iteration_stats.num_preempted_reqs
            if scheduler_stats is None:
                return
            stats.prefix_cache_hits += scheduler_stats.prefix_cache_stats.hits
            stats.record_scheduler(
                engine_idx,
                scheduler_stats.num_running_reqs,
                scheduler_stats.num_waiting_reqs + scheduler_stats.num_skipped_waiting_reqs,
                scheduler_stats.kv_cache_usage,
                time.monotonic(),
            )

        def log_engine_initialized(self) -> None:
            pass

    return _Recorder


def _no_vllm_prometheus() -> "type[StatLoggerBase]":
    """A stand-in for vLLM's own Prometheus logger, which registers and records nothing.

    vLLM adds `PrometheusStatLogger` to every AsyncLLM unless a custom logger is one (StatLoggerManager in
    vllm/v1/metrics/loggers.py). Nothing serves its `vllm:*` metrics here: /metrics is the server's own
    registry (metrics.py). Yet it observed a histogram per running row every step (inter-token latency):
    a tenth of a serving process's samples at 1,024 paced streams (benchmarks/RESULTS.md, H100 profile;
    benchmarks/stat_logger_overhead.py measures it). It also re-registered its metrics in the global registry
    as each engine was made, which raced when two were made at once."""
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    class _NoVllmPrometheus(PrometheusStatLogger):
        def __init__(self, vllm_config: "VllmConfig", engine_indexes: list[int] | None = None):
            self.engine_indexes = engine_indexes or [0]

        def record(self, *args: Any, **kwargs: Any) -> None:
            pass

        def record_sleep_state(self, sleep: int = 0, level: int = 0) -> None:
            pass

        def record_admission_rejection(self, reason: str) -> None:
            pass

        def log_engine_initialized(self) -> None:
            pass

    return _NoVllmPrometheus


@dataclass(frozen=True, slots=True)
class EngineClientSlot:
    """This serving process's place among several that share one engine core (vLLM's multi-frontend
    machinery, as `vllm serve --api-server-count`): the ZMQ addresses/listeners vLLM's launcher made
    for client `index` of `count` (see uttera_server/frontends.py)."""

    index: int
    count: int
    addresses: dict[str, Any]  # vLLM's `client_addresses`: ZMQ addresses and listener sockets


class MelEngine:
    def __init__(
        self,
        model: VoiceModelConfig,
        config: EngineConfig,
        *,
        engine_vocoder: "EngineVocoderConfig | None" = None,
        client: EngineClientSlot | None = None,
    ):
        self.model = model
        self.config = config
        self.engine_vocoder = engine_vocoder
        self.client = client
        self.stats = EngineStats()
        self._llm: AsyncLLM | None = None
        self._epoch = time.monotonic()

    def priority(self, deadline: float) -> int:
        """vLLM's priority (smaller goes first) for a request whose client runs out of audio at
        `deadline` (time.monotonic()): milliseconds from this engine's creation, so the waiting queue is
        served earliest-deadline-first; ties go by arrival. Used with `scheduling="deadline"`."""
        return round(1000.0 * (deadline - self._epoch))

    def start(self) -> None:
        """Start the engine core (a spawned process), or connect to one that `frontends.py` launched
        (`client`): call from a `__main__`-guarded program."""
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.metrics.loggers import StatLoggerFactory

        args = self.engine_args()
        loggers: list[StatLoggerFactory] = [_stat_logger_factory(self.stats), _no_vllm_prometheus()]
        if self.client is None:
            with _MAKING_ENGINE:
                self._llm = AsyncLLM.from_engine_args(args, stat_loggers=loggers)
            return
        from vllm.usage.usage_lib import UsageContext

        args._api_process_count = self.client.count
        args._api_process_rank = self.client.index
        vllm_config = args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        with _MAKING_ENGINE:
            self._llm = AsyncLLM.from_vllm_config(
                vllm_config,
                stat_loggers=loggers,
                disable_log_stats=False,
                usage_context=UsageContext.OPENAI_API_SERVER,
                client_addresses=dict(self.client.addresses),
                client_count=self.client.count,
                client_index=self.client.index,
            )

    def engine_args(self) -> "AsyncEngineArgs":
        """vLLM's `AsyncEngineArgs` for this model and configuration (patches applied in this process)."""
        import engine_patches

        # The mel patch covers the runner that the CPU build uses (gpu_model_runner.GPUModelRunner and
        # its CPU subclass); on CUDA vLLM 0.32 defaults to "model runner v2": keep the covered one
        # (an explicit VLLM_USE_V2_MODEL_RUNNER=1 is refused by engine_patches.apply()).
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        engine_patches.check_vllm_version()
        from ..model.plugin import register

        register()  # patches and the model in this process (see plugin.py); the entry point covers the others
        from vllm.engine.arg_utils import AsyncEngineArgs

        from engine_patches.engine_vocoder import CONFIG_KEY

        c = self.config
        extra: dict[str, Any] = {}
        if self.engine_vocoder is not None:
            extra["additional_config"] = {CONFIG_KEY: self.engine_vocoder.as_dict()}
        # Off with the in-engine vocoder unless asked for: not yet measured there (EngineConfig docstring).
        async_scheduling = (
            False if c.async_scheduling is None and self.engine_vocoder is not None else c.async_scheduling
        )
        if async_scheduling is not None:
            extra["async_scheduling"] = async_scheduling
        return AsyncEngineArgs(
            model=str(self.model.path),
            skip_tokenizer_init=True,
            tokenizer=None,
            dtype=self._dtype(),
            max_model_len=c.max_model_len or self.model.max_position_embeddings,
            max_num_seqs=c.max_num_seqs,
            gpu_memory_utilization=c.gpu_memory_utilization,
            kv_cache_memory_bytes=c.kv_cache_memory_bytes,
            tensor_parallel_size=c.tensor_parallel_size,
            data_parallel_size=c.data_parallel_size,
            distributed_executor_backend=c.executor_backend(),
            block_size=c.block_size,
            enable_prefix_caching=c.enable_prefix_caching,
            long_prefill_token_threshold=c.prefill_chunk_tokens or 0,
            enforce_eager=self._enforce_eager(),
            logits_processors=[POINTER_PROCESSOR],
            disable_log_stats=False,
            seed=c.seed,
            # "deadline": each request's priority is its client's playback deadline (see `priority`).
            scheduling_policy="priority" if c.scheduling == "deadline" else "fcfs",
            **extra,
        )

    def _dtype(self) -> Dtype:
        """`auto` is the checkpoint's dtype (fp16 for shipped voices) except on CPU, where fp16 matmuls
        are emulated: at 8 concurrent requests the default voice decoded 207 steps/s in fp16, 400 in fp32 and 429
        in bf16 here; fp32 keeps the engine's mel identical to training-time inference."""
        if self.config.dtype != "auto":
            return self.config.dtype
        from vllm.platforms import current_platform

        return "float32" if current_platform.is_cpu() else "auto"

    def _enforce_eager(self) -> bool:
        if self.config.enforce_eager is not None:
            return self.config.enforce_eager
        from vllm.platforms import current_platform

        return current_platform.is_cpu()

    @property
    def started(self) -> bool:
        return self._llm is not None

    @property
    def failed(self) -> bool:
        return self._llm is not None and bool(self._llm.errored)

    def shutdown(self, timeout_s: float | None = 2.0) -> None:
        """Stop the engine (or leave the shared one, as a client); its processes get `timeout_s` to
        exit before they are killed (serve.py's shutdown budget counts on it)."""
        if self._llm is not None:
            # vLLM's AsyncLLM.shutdown stops the engine core before it cancels its output handler, which in
            # between may read the engine's exit as a failure and log it with a traceback ("AsyncLLM
            # output_handler failed"; seen when the engine's worker had to be force-killed, 2026-12-07):
            # the handler is cancelled first here.
            from vllm.utils.async_utils import cancel_task_threadsafe

            if (handler := getattr(self._llm, "output_handler", None)) is not None:
                cancel_task_threadsafe(handler)
            self._llm.shutdown(timeout=timeout_s)
            self._llm = None

    async def generate(
        self,
        phoneme_ids: list[int],
        request_id: str | None = None,
        deadline: float | None = None,
        stream_interval: int | None = None,
        pcm: "PcmRoute | None" = None,
    ) -> AsyncGenerator[MelStep, None]:
        """Yield the mel chunks of one utterance (one sentence prompt) as the engine produces them.

        `deadline` (time.monotonic()) is when the client runs out of audio without this request: now for
        a request's first sentence; it orders waiting requests under `scheduling="deadline"`.
        `stream_interval`: this request's, instead of `EngineConfig.stream_interval`.
        `pcm`: vocode in the engine and send the PCM to `pcm.sink` as utterance `pcm.key` (needs an
        engine started with `engine_vocoder`); the steps then carry the pointer only (`mel` None)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        from engine_patches.outputs import mel_chunks
        from engine_patches.pcm_wire import PCM_ARG

        if self._llm is None:
            raise RuntimeError("MelEngine.start() was not called")
        m = self.model
        params = SamplingParams(
            temperature=0.0,
            max_tokens=m.max_steps(len(phoneme_ids)) + 1,
            stop_token_ids=[m.stop_token_id],
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
            stream_interval=stream_interval or self.config.stream_interval,  # see EngineConfig.stream_interval
            extra_args=None if pcm is None else {PCM_ARG: pcm.as_arg()},
        )
        request_id = request_id or uuid.uuid4().hex
        history: list[int] = []  # generated tokens so far
        prompt = TokensPrompt(prompt_token_ids=list(phoneme_ids))
        reason = "abort"  # unless the engine says otherwise
        try:
            # aclosing: when our consumer stops early, vLLM's generator is closed right away, which
            # aborts the engine request (rather than whenever the abandoned generator is collected).
            priority = 0
            if self.config.scheduling == "deadline":
                priority = self.priority(time.monotonic() if deadline is None else deadline)
            async with aclosing(self._llm.generate(prompt, params, request_id, priority=priority)) as outputs:
                async for out in outputs:
                    self.stats.outputs += 1
                    completion = out.outputs[0]
                    chunks = mel_chunks(completion)
                    voiced_before = max(len(history) - 1, 0)
                    history.extend(completion.token_ids)
                    if pcm is not None:  # every token but the last was consumed by a step that voiced it
                        for token in history[voiced_before : max(len(history) - 1, 0)]:
                            yield MelStep(pointer=token - m.pointer_offset, mel=None)
                        if out.finished:
                            reason = str(completion.finish_reason)
                            self.last_finish_reason = reason
                            return
                        continue
                    # A step's chunk voices the token that step consumed: the one generated just before
                    # the token it arrived with. The first token (pointer 0) arrives with no chunk.
                    if len(chunks) > max(len(history) - 1, 0):
                        raise RuntimeError(f"engine sent {len(chunks)} mel chunks for {len(history)} tokens")
                    consumed = history[len(history) - 1 - len(chunks) : len(history) - 1]
                    for chunk, token in zip(chunks, consumed):
                        yield MelStep(pointer=token - m.pointer_offset, mel=chunk.numpy())
                    if out.finished:
                        reason = str(completion.finish_reason)
                        self.last_finish_reason = reason
                        return
        finally:
            self.stats.request_finished(reason)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until the engine reports no running or waiting request (for tests and drain)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stats.num_running == 0 and self.stats.num_waiting == 0:
                return True
            await asyncio.sleep(0.02)
        return False
