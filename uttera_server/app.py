"""The ASGI app: routes, shared state, and the engine's start and close (lifespan).

The engine starts in the background, so the server listens at once and `GET /health` answers 503
until the engine is ready. `synth.close()` is the last shutdown step (after `serve.GracefulServer` has
drained and cancelled the streams).
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute

from . import guard, heap
from .http import info as http_info
from .app_state import AppState
from .config import ServerConfig
from .http.speech import create_speech
from .logs import RequestIdMiddleware
from .metrics import ServerMetrics
from .speech_params import Catalog
from .streams import ActiveStreams
from .synthesis import SpeechSynthesizer
from .http.web import routes as _web_routes
from .ws.endpoint import speech_stream

log = logging.getLogger(__name__)


def build_app(config: ServerConfig, synth: SpeechSynthesizer) -> Starlette:
    """`synth`: constructed but not started (the lifespan starts and closes it)."""
    streams = ActiveStreams()
    state = AppState(
        config=config,
        synth=synth,
        metrics=ServerMetrics(synth.engine_stats, lambda: streams.count),
        streams=streams,
        catalog=Catalog.of(synth, config.max_input_chars),
        created=int(time.time()),
    )
    routes = [
        Route("/v1/audio/speech", create_speech, methods=["GET", "POST"]),
        WebSocketRoute("/v1/audio/speech/stream", speech_stream),
        Route("/v1/models", http_info.list_models),
        Route("/v1/audio/voices", http_info.list_voices),
        Route("/health", http_info.health),
        Route("/metrics", http_info.metrics),
        *_web_routes(),  # the playground at /, /openapi.json
    ]
    app = Starlette(
        routes=routes,
        lifespan=_lifespan,
        exception_handlers={HTTPException: _http_error},
        middleware=[Middleware(RequestIdMiddleware), *guard.middleware(config, state)],
    )  # x-request-id, log context (logs.py)
    app.state.uttera = state
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    state: AppState = app.state.uttera
    starting = asyncio.create_task(_start_engine(state))
    lag = asyncio.create_task(state.metrics.watch_loop())  # uttera_event_loop_lag_seconds
    try:
        yield
    finally:
        lag.cancel()
        if not starting.done():
            starting.cancel()
            await asyncio.wait({starting})
        log.info("closing the engine")
        await state.synth.close()


async def _start_engine(state: AppState) -> None:
    started = time.monotonic()
    try:
        await state.synth.start()
    except Exception as e:
        state.start_error = f"{type(e).__name__}: {e}"
        log.exception("the engine failed to start; GET /health answers 503")
        return
    log.info(
        "engine ready in %.1f s (event loop: %s)",
        time.monotonic() - started,
        type(asyncio.get_running_loop()).__module__,
    )
    _cache_vllm_environment()
    if not state.config.freeze_heap:
        return
    frozen = heap.freeze()
    log.info(
        "heap frozen: %d objects; a full collection took %.0f ms before, %.1f ms after",
        frozen.objects,
        1000 * frozen.full_pass_before_s,
        1000 * frozen.full_pass_after_s,
    )


def _cache_vllm_environment() -> None:
    """vLLM reads its environment variables from `os.environ` on every access until its cache is on; its
    output path reads one for every running row on every step (`IterationStats.update_from_output`:
    2.6 µs a row, 0.6 cached; benchmarks/envs_cache.py). vLLM turns the cache on in its engine core and
    workers once they are set up, not in a process that serves the API: each serving process does so here,
    once its engine is up (the variables are all set by then, and nothing here changes them later)."""
    from vllm import envs

    envs.enable_envs_cache()


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Routing errors (404, 405) in the same JSON shape as the API's own errors. (Starlette types every
    handler as taking any Exception; this one is registered for HTTPException only.)"""
    if not isinstance(exc, HTTPException):
        raise exc
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    body = {"error": {"code": code, "message": str(exc.detail), "type": "invalid_request_error"}}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
