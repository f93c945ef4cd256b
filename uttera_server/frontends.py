"""Several serving processes, one engine core: `uttera serve --api-servers N`.

The serving process's event loop (HTTP, WebSocket, vLLM's output handling, PCM delivery) is what limits
a GPU server when one process serves every stream. With N > 1, this supervisor does what `vllm serve
--api-server-count N` does, with vLLM's own machinery: it binds the engine's ZMQ listeners for N
clients, launches the engine core (`launch_core_engines`), and spawns N serving processes, each an
`AsyncLLM` client (`client_index` i of `client_count` N) running the whole app under uvicorn on ONE
shared listening socket, so the kernel spreads connections over them; a WebSocket session or an HTTP
stream is served wholly by the process that accepted it. With the vocoder in the engine, each serving
process binds its own PCM sink (pcm_receiver.py) and the worker sends each utterance's audio to the
process that asked for it.

`/metrics` reports the whole server: the serving processes share a Prometheus multiprocess directory
(metrics.py), so any of them answers with the sum.

Shutdown: SIGTERM or SIGINT here is passed to every serving process, which drains as a single server
does (serve.py); once they have exited, the engine core is shut down.
"""

import logging
import multiprocessing
import os
import signal
import socket
from multiprocessing.context import SpawnProcess
from types import FrameType
from typing import Any

from .config import ServerConfig
from .runtime_dirs import metrics_dir

log = logging.getLogger(__name__)


def default_api_servers() -> int:
    """One serving process per 4 cores on a GPU host (at most 8), one on a CPU-only host, where the
    engine's worker needs the cores."""
    try:
        import torch

        gpu = torch.cuda.is_available()
    except Exception:
        gpu = False
    if not gpu:
        return 1
    return max(1, min(8, (os.cpu_count() or 4) // 4))


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _frontend_main(
    config: ServerConfig,
    index: int,
    count: int,
    addresses: dict[str, Any],
    sock: socket.socket,
    sink_base: str | None,
) -> None:
    """One serving process: a Synthesizer that is client `index` of the shared engine, served on `sock`."""
    from .synthesis.mel_engine import EngineClientSlot
    from .logs import setup_logging
    from .serve import serve
    from .synthesis.synthesizer import Synthesizer

    setup_logging(config.log_level, config.log_format)
    synth = Synthesizer(
        config.model_dir,
        config.engine,
        max_input_chars=config.max_input_chars,
        client=EngineClientSlot(index, count, addresses),
        sink_base=sink_base,
    )
    log.info("serving process %d of %d (pid %d)", index, count, os.getpid())
    ok = serve(config, synth, sock=sock)
    raise SystemExit(0 if ok else 3)


def serve_frontends(config: ServerConfig, count: int) -> bool:
    """Launch the engine core and `count` serving processes; block until they exit. False if the server
    could not start."""
    with metrics_dir():  # set before the serving processes start: they read it as they import prometheus_client
        return _serve_frontends(config, count)


def _serve_frontends(config: ServerConfig, count: int) -> bool:
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.utils import bind_engine_zmq_listeners, launch_core_engines
    from vllm.v1.executor import Executor

    from .synthesis.synthesizer import Synthesizer

    # The engine's arguments exactly as a single-process server builds them (one place: MelEngine).
    plan = Synthesizer(config.model_dir, config.engine, max_input_chars=config.max_input_chars)
    sink_base = plan.sink_base if plan.vocoder_process == "engine" else None
    args = plan.engine_args()
    args._api_process_count = count
    args._api_process_rank = -1
    vllm_config = args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    try:
        sock = _listen(config.host, config.port)
    except OSError as e:
        log.error("cannot listen on %s:%d: %s", config.host, config.port, e)
        return False

    stopping = False  # a signal asked for it, or a serving process failed
    failed = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            log.info("signal %d: stopping %d serving processes", signum, count)
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)

    procs: list[SpawnProcess] = []
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    listeners = bind_engine_zmq_listeners(vllm_config, count)
    spawn = multiprocessing.get_context("spawn")
    launch = None
    try:
        with launch_core_engines(vllm_config, Executor.get_class(vllm_config), True, listeners.addresses) as launch:
            for i, (inp, out) in enumerate(zip(listeners.inputs, listeners.outputs, strict=True)):
                addresses = {
                    "input_address": inp.address,
                    "output_address": out.address,
                    "input_listener": inp.socket,
                    "output_listener": out.socket,
                }
                if launch.coordinator is not None:  # data parallel: the engines' load, for balancing
                    addresses["stats_update_address"] = launch.coordinator.get_stats_publish_address()
                p = spawn.Process(
                    target=_frontend_main,
                    name=f"uttera-frontend-{i}",
                    args=(config, i, count, addresses, sock, sink_base),
                )
                p.start()
                procs.append(p)
                inp.close()
                out.close()
            launch.watched_frontend_processes = procs
        log.info("engine core up; %d serving processes on http://%s:%d", count, config.host, config.port)
        while any(p.is_alive() for p in procs):
            for p in procs:
                p.join(timeout=0.2)
                if not p.is_alive() and not stopping:
                    failed = True
                    log.error("serving process %s exited (status %s): stopping the server", p.name, p.exitcode)
                    on_signal(signal.SIGTERM, None)
        return not failed
    finally:
        for p in procs:
            if p.is_alive():
                p.join(timeout=10)
            if p.is_alive():
                p.kill()
        if launch is not None and launch.engine_manager is not None:
            launch.engine_manager.shutdown()
        if launch is not None and launch.coordinator is not None:
            launch.coordinator.shutdown()
        sock.close()
