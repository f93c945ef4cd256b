"""`POST /v1/audio/speech`: OpenAI-compatible speech, streamed with chunked transfer as it is produced.

The request is validated, and the synthesizer's own checks run (`Synthesizer.stream` raises before the
first chunk), before any header leaves, so bad input gets a 4xx JSON error. Audio then streams, encoded
chunk by chunk in the response format (audio/formats.py), raw or as SSE events (sse.py). `GET` takes the
same fields as query parameters, so that `<audio src>` plays it progressively.
A client disconnect or a shutdown cancel closes the synthesizer iterator, which aborts the engine request.
"""

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from .. import logs
from ..app_state import AppState
from ..errors import EngineNotReady, RequestTooLarge, ShuttingDown, UtteraError, as_uttera_error, error_payload
from ..metrics import Transport
from ..outcome import Outcome
from ..audio.formats import MEDIA_TYPES, output_rate
from ..speech_params import (
    AudioFormat,
    SpeechParams,
    StreamFormat,
    parse_speech_query,
    parse_speech_request,
    resolve_voice,
)
from .sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from .sse import open_response_encoder
from ..audio.wav import duration_s
from ..synthesis import AudioChunk, WordTimings

log = logging.getLogger(__name__)


def error_response(exc: UtteraError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_payload(exc), status_code=exc.http_status, headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing more than `limit` bytes without reading them all."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body of {declared} bytes is over the {limit}-byte limit")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise RequestTooLarge(f"request body is over the {limit}-byte limit")
        parts.append(part)
    return b"".join(parts)


async def create_speech(request: Request) -> Response:
    state: AppState = request.app.state.uttera
    received = time.monotonic()
    # x-request-id (validated) or generated, by logs.RequestIdMiddleware; the synthesizer appends a unique
    # suffix to the engine request id, so a client reusing an id cannot collide in the engine.
    request_id = logs.request_id.get() or logs.new_request_id()
    try:
        if not state.streams.accepting:
            raise ShuttingDown()
        if request.method == "GET":  # <audio src="/v1/audio/speech?input=...">
            params = parse_speech_query(request.query_params, state.catalog)
        else:
            params = parse_speech_request(await read_body(request, state.config.max_body_bytes), state.catalog)
        synth = state.synth
        if not synth.is_ready():
            raise EngineNotReady()
        voice = resolve_voice(params.voice, state.catalog.voices)
        chunks = synth.stream(params.text, voice=voice, speed=params.speed, request_id=f"http-{request_id}")
    except Exception as e:
        if not isinstance(e, UtteraError):
            log.exception("speech request %s failed before streaming", request_id)
        state.metrics.request_finished(Transport.HTTP, Outcome.ERROR)
        return error_response(as_uttera_error(e), {"x-request-id": request_id})
    return SpeechStreamResponse(state, chunks, params, received, request_id)


class _Interrupted(Exception):
    def __init__(self, outcome: Outcome):
        self.outcome = outcome


async def _pull(chunks: AsyncIterator[AudioChunk | WordTimings]) -> AudioChunk | None:
    """The next chunk of `chunks`, or None at its end (word timings, not asked for here, are skipped)."""
    while True:
        try:
            item = await anext(chunks)
        except StopAsyncIteration:
            return None
        if isinstance(item, AudioChunk):
            return item


class SpeechStreamResponse(Response):
    """Streams one synthesizer iterator; a `StreamOwner` so shutdown can cancel it."""

    def __init__(
        self,
        state: AppState,
        chunks: AsyncGenerator[AudioChunk | WordTimings, None],
        params: SpeechParams,
        received: float,
        request_id: str,
    ):
        self.state = state
        self.chunks = chunks
        self.params = params
        self.received = received  # time.monotonic() when the request arrived
        self.status_code = 200
        sse = params.stream_format is StreamFormat.SSE
        self.media_type = SSE_MEDIA_TYPE if sse else MEDIA_TYPES[params.response_format]
        sample_rate = output_rate(params.response_format, state.synth.sample_rate)
        fmt = params.response_format
        self.init_headers({
            "x-sample-rate": str(sample_rate),
            "x-audio-format": "pcm_s16le" if fmt is AudioFormat.PCM else fmt.value,
            "x-audio-channels": "1",
            "x-request-id": request_id,
            "cache-control": "no-store",
        })  # fmt: skip
        self._interrupt: asyncio.Future[Outcome] | None = None
        self._ttfa_ms: float | None = None  # for the log line
        self._engine_request_id = f"http-{request_id}"  # the prefix of the synthesizer's engine request ids

    async def begin_drain(self) -> None:
        pass  # an HTTP response finishes on its own

    async def cancel(self) -> None:
        if self._interrupt is not None and not self._interrupt.done():
            self._interrupt.set_result(Outcome.CANCELLED)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state, metrics, sample_rate = self.state, self.state.metrics, self.state.synth.sample_rate
        self._interrupt = asyncio.get_running_loop().create_future()
        watcher = asyncio.create_task(self._watch_disconnect(receive))
        state.streams.opened()
        state.streams.add_owner(self)
        outcome, sent = Outcome.ERROR, 0  # sent: PCM bytes
        try:
            try:
                first = await self._next_chunk()
            except _Interrupted as i:
                outcome = i.outcome
                if outcome is Outcome.CANCELLED:
                    await error_response(ShuttingDown())(scope, receive, send)
                return
            except Exception as e:
                if not isinstance(e, UtteraError):
                    log.exception("speech request failed before its first audio")
                await error_response(as_uttera_error(e))(scope, receive, send)
                return
            if first is not None:
                metrics.first_audio(Transport.HTTP, time.monotonic() - self.received)
                self._ttfa_ms = round(1000 * (time.monotonic() - self.received), 1)
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            encoder = open_response_encoder(self.params, sample_rate)  # the format's (and SSE's) framing
            chunk = first
            try:
                while chunk is not None:
                    body = encoder.encode(chunk.pcm)
                    if body:  # a codec may hold a chunk smaller than its frame
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                    sent += 2 * len(chunk.pcm)
                    chunk = await self._next_chunk()
                await send({"type": "http.response.body", "body": encoder.flush(), "more_body": False})
            finally:
                encoder.close()
            outcome = Outcome.OK
            metrics.synthesis_completed(time.monotonic() - self.received, duration_s(sent, sample_rate))
        except _Interrupted as i:
            outcome = i.outcome  # the response stays incomplete: the client sees a truncated transfer
        except Exception:
            log.exception("speech request failed mid-stream; the response is cut short")
        finally:
            watcher.cancel()
            await asyncio.wait({watcher})
            await self.chunks.aclose()  # aborts the engine request unless it already finished
            state.streams.remove_owner(self)
            state.streams.closed()
            metrics.request_finished(Transport.HTTP, outcome, duration_s(sent, sample_rate))
            log.info("speech request %s", outcome, extra=self._timings(outcome, sent))

    def _timings(self, outcome: Outcome, sent: int) -> dict[str, Any]:
        """The `extra=` fields of the request's log line (logs.py): durations in ms, audio in seconds."""
        return {
            "outcome": str(outcome),
            "engine_request_id": self._engine_request_id,
            "ttfa_ms": self._ttfa_ms,
            "duration_ms": round(1000 * (time.monotonic() - self.received), 1),
            "audio_s": round(duration_s(sent, self.state.synth.sample_rate), 3),
        }

    async def _next_chunk(self) -> AudioChunk | None:
        """The next chunk or None at the end; raises `_Interrupted` on a disconnect or a cancel."""
        interrupt = self._interrupt
        assert interrupt is not None  # made first thing in __call__
        if interrupt.done():
            raise _Interrupted(interrupt.result())
        pull = asyncio.ensure_future(_pull(self.chunks))
        either: set[asyncio.Future[Any]] = {pull, interrupt}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not pull.done():
            pull.cancel()  # throws CancelledError into the synthesizer iterator, closing it
            await asyncio.wait({pull})
            raise _Interrupted(interrupt.result())
        return pull.result()

    async def _watch_disconnect(self, receive: Receive) -> None:
        interrupt = self._interrupt
        assert interrupt is not None  # made before this task starts
        while (await receive())["type"] != "http.disconnect":
            pass
        if not interrupt.done():
            interrupt.set_result(Outcome.DISCONNECTED)
