"""The `uttera` command (also `python -m uttera_server`).

    uttera serve [--model DIR] [--host H] [--port P] [engine flags]   HTTP + WebSocket server
    uttera say "TEXT" -o out.wav [--model DIR] [--voice V] [--speed S]  offline synthesis to a WAV file

Configuration is built here, once, from the flags (`build_config`); defaults live in the config
dataclasses only. The engine core runs in a spawned process, so it starts inside `main()`, never at
import time.
"""

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
import wave
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from .config import (
    DTYPES,
    EVENT_LOOPS,
    LOG_LEVELS,
    SCHEDULING,
    VOCODER_DEVICES,
    VOCODER_DRIVERS,
    VOCODER_PROCESSES,
    EngineConfig,
    ServerConfig,
)
from .config import LOG_FORMATS
from .errors import ConfigError, UtteraError
from .logs import setup_logging
from .speech_params import Catalog, check_speed, check_text, check_voice
from .synthesis import AudioChunk, SpeechSynthesizer
from .audio.wav import SAMPLE_BYTES, pcm_bytes

log = logging.getLogger("uttera_server")

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "voices" / "default"
STARTUP_FAILURE = 3  # exit status when the server could not start (as uvicorn's)

SynthesizerFactory = Callable[[ServerConfig], SpeechSynthesizer]


def make_synthesizer(config: ServerConfig) -> SpeechSynthesizer:
    """The one place a Synthesizer is constructed (not started) from the configuration."""
    from .synthesis.synthesizer import Synthesizer

    return Synthesizer(config.model_dir, config.engine, max_input_chars=config.max_input_chars)


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


def main(argv: Sequence[str] | None = None, *, synthesizer_factory: SynthesizerFactory = make_synthesizer) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = build_config(args)
        _setup_logging(config.log_level, config.log_format)
        synth = synthesizer_factory(config)
    except (ConfigError, ValueError) as e:
        parser.exit(2, f"uttera: error: {e}\n")
    _log_model(synth)
    if args.command == "serve":
        return _serve(config, synth)
    return asyncio.run(_say(synth, config, args.text, args.output, args.voice, args.speed))


def _setup_logging(level: str, log_format: str = "text") -> None:
    setup_logging(level, log_format)  # logs.py: text or JSON lines, vLLM's loggers included


def _log_model(synth: SpeechSynthesizer) -> None:
    voices = ", ".join(f"{v.id} ({v.name}, {v.language})" for v in synth.voices.values())
    log.info("model %s at %d Hz; voices: %s", synth.model_id, synth.sample_rate, voices)
    if any(v.random_weights for v in synth.voices.values()):
        log.warning("*" * 78)
        log.warning("*** RANDOM WEIGHTS: %s is a development model. It speaks noise, not speech. ***", synth.model_id)
        log.warning("*" * 78)


def _serve(config: ServerConfig, synth: SpeechSynthesizer) -> int:
    from .frontends import default_api_servers, serve_frontends
    from .serve import serve

    count = config.api_servers or default_api_servers()
    log.info(
        "uttera serving on http://%s:%d with %d serving process(es) (engine: %s)",
        config.host,
        config.port,
        count,
        config.engine,
    )
    if count > 1:
        return 0 if serve_frontends(config, count) else STARTUP_FAILURE
    return 0 if serve(config, synth) else STARTUP_FAILURE


async def _say(
    synth: SpeechSynthesizer, config: ServerConfig, text: str, output: Path, voice: str, speed: float
) -> int:
    """Write the audio of `text` to `output` as it is produced; returns the exit status."""
    catalog = Catalog.of(synth, config.max_input_chars)
    try:  # before the engine starts, so bad input fails at once
        check_text(text, catalog.max_input_chars)
        check_voice(voice, catalog.voices)
        check_speed(speed)
    except UtteraError as e:
        print(f"uttera: error: {e}", file=sys.stderr)
        return 1
    await synth.start()
    samples = 0
    try:
        chunks = synth.stream(text, voice=voice, speed=speed)  # raises for bad input before any file exists
        try:
            with wave.open(str(output), "wb") as out:
                out.setnchannels(1)
                out.setsampwidth(SAMPLE_BYTES)
                out.setframerate(synth.sample_rate)
                async for chunk in chunks:
                    if not isinstance(chunk, AudioChunk):
                        continue  # word timings: not asked for
                    data = pcm_bytes(chunk.pcm)
                    out.writeframes(data)
                    samples += len(data) // SAMPLE_BYTES
        except BaseException:
            output.unlink(missing_ok=True)  # no half-written file
            raise
    except UtteraError as e:
        print(f"uttera: error: {e}", file=sys.stderr)
        return 1
    finally:
        await synth.close()
    print(f"wrote {output} ({samples / synth.sample_rate:.2f} s at {synth.sample_rate} Hz)")
    return 0
