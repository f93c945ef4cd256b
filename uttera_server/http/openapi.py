"""`GET /openapi.json`: an OpenAPI 3.1 description built from the code that serves the API.

Paths and methods come from the app's routes, summaries from the endpoints' docstrings, the speech body
and query from `speech_params` (its enums, defaults and limits) and `audio_formats` (media types), the
error shape from `errors`. Nothing here is a second copy of a value: a new format, route or limit shows
up in the document by itself (tests/server/test_openapi.py checks that every route is described).
"""

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from ..audio.formats import MEDIA_TYPES, output_rate
from .sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from ..speech_params import MODEL_ALIAS, AudioFormat, StreamFormat
from ..synthesis import DEFAULT_VOICE
from ..synthesis.speed import MAX_SPEED, MIN_SPEED

SPEECH_PATH = "/v1/audio/speech"


def _summary(endpoint: Callable[..., Any]) -> str:
    doc = inspect.getdoc(endpoint) or inspect.getdoc(inspect.getmodule(endpoint)) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def speech_fields(sample_rate: int, max_input_chars: int, voices: list[str]) -> dict[str, Any]:
    """JSON schema properties of the speech request, from speech_params."""
    formats = [f.value for f in AudioFormat]
    rates = ", ".join(f"{f.value}: {output_rate(f, sample_rate)} Hz" for f in AudioFormat)
    return {
        "model": {"type": "string", "description": f"the served model's id, or {MODEL_ALIAS!r}"},
        "input": {"type": "string", "minLength": 1, "maxLength": max_input_chars, "description": "text to speak"},
        "voice": {"type": "string", "enum": voices, "default": DEFAULT_VOICE},
        "response_format": {
            "type": "string",
            "enum": formats,
            "default": AudioFormat.WAV.value,
            "description": f"streamed as it is encoded; sample rates: {rates}",
        },
        "speed": {"type": "number", "minimum": MIN_SPEED, "maximum": MAX_SPEED, "default": 1.0},
        "stream_format": {
            "type": "string",
            "enum": [f.value for f in StreamFormat],
            "default": StreamFormat.AUDIO.value,
            "description": "audio: the encoded audio, chunked; sse: speech.audio.delta events "
            "(base64 audio), then speech.audio.done with usage",
        },
    }


ERROR = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _speech_operation(fields: dict[str, Any], method: str) -> dict[str, Any]:
    audio = {MEDIA_TYPES[f]: {"schema": {"type": "string", "format": "binary"}} for f in AudioFormat}
    audio[SSE_MEDIA_TYPE] = {"schema": {"type": "string"}}
    op: dict[str, Any] = {
        "responses": {
            "200": {
                "description": "the audio, streamed with chunked transfer (no Content-Length)",
                "headers": {
                    "x-sample-rate": {"schema": {"type": "integer"}},
                    "x-audio-format": {"schema": {"type": "string"}},
                    "x-request-id": {"schema": {"type": "string"}},
                },
                "content": audio,
            },
            "400": ERROR,
            "404": ERROR,
            "413": ERROR,
            "503": ERROR,
        }
    }
    if method == "post":
        op["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "object", "required": ["model", "input"], "properties": fields}}
            },
        }
    else:
        op["summary"] = "The same as POST, with the fields as query parameters (model may be left out), for <audio src>"
        op["parameters"] = [
            {"name": name, "in": "query", "required": name == "input", "schema": schema}
            for name, schema in fields.items()
        ]
    return op


def build(
    routes: Sequence[BaseRoute], sample_rate: int, max_input_chars: int, voices: list[str], version: str
) -> dict[str, Any]:
    """The OpenAPI document of `routes` (the app's)."""
    fields = speech_fields(sample_rate, max_input_chars, voices)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if isinstance(route, WebSocketRoute):
            paths[route.path] = {"get": {
                "summary": _summary(route.endpoint),
                "description": "WebSocket (upgrade). Protocol: docs/protocol.md in the repository.",
                "responses": {"101": {"description": "switching protocols"}}}}  # fmt: skip
        elif isinstance(route, Route) and route.methods:
            for method in sorted(m.lower() for m in route.methods if m != "HEAD"):
                if route.path == SPEECH_PATH:
                    op = _speech_operation(fields, method)
                else:
                    op = {"responses": {"200": {"description": "OK"}}}
                op.setdefault("summary", _summary(route.endpoint))
                paths.setdefault(route.path, {})[method] = op
        elif isinstance(route, Mount):
            paths[route.path + "/{file}"] = {
                "get": {"summary": "static files of the playground", "responses": {"200": {"description": "the file"}}}
            }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "uttera",
            "version": version,
            "description": "Streaming text-to-speech, OpenAI-compatible (docs/api.md).",
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message", "type"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                                "type": {"type": "string"},
                                "param": {"type": ["string", "null"]},
                            },
                        }
                    },
                }
            }
        },
    }


async def openapi_json(request: Request) -> JSONResponse:
    """This document: every route, the speech request body and query, the error shape."""
    from importlib.metadata import PackageNotFoundError, version

    state = request.app.state.uttera
    try:
        v = version("uttera-server")
    except PackageNotFoundError:
        v = "0"
    voices = sorted({DEFAULT_VOICE, *state.synth.voices})  # the ids a request may name, and the alias
    return JSONResponse(build(request.app.routes, state.synth.sample_rate, state.catalog.max_input_chars, voices, v))
