"""Run the app under uvicorn, with graceful shutdown in explicit steps that end within the grace period.

On SIGTERM or SIGINT, with G = `ServerConfig.graceful_shutdown_s`:
1. stop accepting connections;
2. refuse new streams (503, WebSocket `error` shutting_down) and let active ones finish, up to
   G - SHUTDOWN_TAIL_S (the time the steps below may need; 0 when G is smaller);
3. cancel the streams still running (HTTP responses are cut, WebSocket contexts get `error`
   shutting_down and the socket closes with 1001), waiting up to CANCEL_WAIT_S;
3b. if streams are still stuck (a client that stopped reading blocks its stream in send()), abort
   every connection's transport and wait up to ABORT_WAIT_S;
4. uvicorn closes the remaining connections and runs the lifespan shutdown, which calls `synth.close()`
   (the engine gets ENGINE_CLOSE_S to stop before its processes are killed).
So whatever clients do, the process exits about max(G, SHUTDOWN_TAIL_S) after the signal.
"""

import asyncio
import logging
import signal
import socket
import threading
from collections.abc import Awaitable
from types import FrameType

import uvicorn

from .app import build_app
from .config import ServerConfig
from .http.limits import limited_protocol
from .logs import uvicorn_log_config
from .streams import ActiveStreams
from .synthesis import SpeechSynthesizer

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 2.0  # step 3: how long cancelled streams may take to close
ABORT_WAIT_S = 1.0  # step 3b: how long streams may take to end once their connections are cut
ENGINE_CLOSE_S = 2.0  # step 4: the engine's processes get this long to exit (engine.MelEngine.shutdown)
SHUTDOWN_TAIL_S = CANCEL_WAIT_S + ABORT_WAIT_S + ENGINE_CLOSE_S + 1.0  # + uvicorn's own close


class GracefulServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, streams: ActiveStreams, grace_s: float):
        super().__init__(config)
        self.streams = streams
        self.drain_timeout_s = max(0.0, grace_s - SHUTDOWN_TAIL_S)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # step 1 (uvicorn repeats it, harmlessly)
            server.close()
        if self.streams.count:
            log.info("draining %d active stream(s) for up to %.1f s", self.streams.count, self.drain_timeout_s)
        if not await self._unless_forced(self.streams.drain(self.drain_timeout_s)):  # step 2
            log.warning("cancelling %d stream(s) still active", self.streams.count)
            if not await self._unless_forced(self.streams.cancel_all(CANCEL_WAIT_S)):  # step 3
                # step 3b: a client that stopped reading blocks its stream in send(); cut it off
                log.warning("closing %d connection(s) whose streams did not end", len(self.server_state.connections))
                self._abort_connections()
                await self._unless_forced(self.streams.cancel_all(ABORT_WAIT_S))
        await super().shutdown(sockets)  # step 4 (uvicorn skips the lifespan shutdown when forced)

    def _abort_connections(self) -> None:
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()  # drops unsent data; connection_lost unblocks the stream's send()

    async def _unless_forced(self, step: Awaitable[bool]) -> bool:
        """Run a shutdown step; a second Ctrl-C (uvicorn's `force_exit`) abandons it, as uvicorn does."""
        task = asyncio.ensure_future(step)
        while not task.done() and not self.force_exit:
            await asyncio.wait({task}, timeout=0.1)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        return False


def serve(config: ServerConfig, synth: SpeechSynthesizer, sock: socket.socket | None = None) -> bool:
    """Serve `synth` (constructed, not started) until a signal; blocks. False if the server could not
    start (e.g. the port is taken). `sock`: a listening socket to serve on (shared by the serving
    processes of `--api-servers`, frontends.py) instead of binding host:port."""
    app = build_app(config, synth)
    uv_config = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        log_config=uvicorn_log_config(config.log_format),
        http=limited_protocol(config),  # header deadline and size (http/limits.py)
        timeout_keep_alive=config.keep_alive_timeout_s,
        ws="websockets-sansio",
        ws_max_size=config.ws_max_message_bytes,
        ws_per_message_deflate=False,  # PCM barely compresses; deflate would only cost CPU
        lifespan="on",
        timeout_graceful_shutdown=int(CANCEL_WAIT_S),
        loop=config.event_loop,
    )
    server = GracefulServer(uv_config, app.state.uttera.streams, config.graceful_shutdown_s)
    # uvicorn raises the signal that stopped it again once its shutdown is done. A SIGTERM's default action
    # would end the process there, before the callers' cleanup (runtime_dirs.py): it raises here instead,
    # as a Ctrl-C's SIGINT does.
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if _in_main_thread() else None
    try:
        server.run(sockets=[sock] if sock is not None else None)
    except KeyboardInterrupt:
        log.info("stopped by SIGINT")
    except _Terminated:
        log.info("stopped by SIGTERM")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return server.started


class _Terminated(BaseException):
    """SIGTERM, raised again by uvicorn after its graceful shutdown."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
