"""The `uttera` command (also `python -m uttera_server`).

    uttera serve [--model DIR] [--host H] [--port P] [engine flags]   HTTP + WebSocket server
    uttera say "TEXT" -o out.wav [--model DIR] [--voice V] [--speed S]  offline synthesis to a WAV file

Configuration is built once, from the flags (`flags.build_config`); defaults live in the config
dataclasses only. The engine core runs in a spawned process, so it starts inside `main()`, never at
import time.
"""

import asyncio
import logging
import sys
import wave
from collections.abc import Callable, Sequence
from pathlib import Path

from .config import ServerConfig
from .errors import ConfigError, UtteraError
from .flags import build_config, build_parser
from .logs import setup_logging
from .runtime_dirs import ipc_dir
from .speech_params import Catalog, check_speed, check_text, resolve_voice
from .synthesis import AudioChunk, SpeechSynthesizer
from .audio.wav import SAMPLE_BYTES, pcm_bytes

log = logging.getLogger("uttera_server")

STARTUP_FAILURE = 3  # exit status when the server could not start (as uvicorn's)

SynthesizerFactory = Callable[[ServerConfig], SpeechSynthesizer]


def make_synthesizer(config: ServerConfig) -> SpeechSynthesizer:
    """The one place a Synthesizer is constructed (not started) from the configuration."""
    from .synthesis.synthesizer import Synthesizer

    return Synthesizer(config.model_dir, config.engine, max_input_chars=config.max_input_chars)


def main(argv: Sequence[str] | None = None, *, synthesizer_factory: SynthesizerFactory = make_synthesizer) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with ipc_dir():  # the engine's and the PCM channel's socket files, removed when this returns
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
    first = next(iter(synth.voices))  # DEFAULT_VOICE names it
    voices = ", ".join(
        f"{v.id} ({v.name}, {v.language}{', default' if v.id == first else ''})" for v in synth.voices.values()
    )
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
        resolved = resolve_voice(voice, catalog.voices)
        check_speed(speed)
    except UtteraError as e:
        print(f"uttera: error: {e}", file=sys.stderr)
        return 1
    await synth.start()
    samples = 0
    try:
        chunks = synth.stream(text, voice=resolved, speed=speed)  # raises for bad input before any file exists
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
