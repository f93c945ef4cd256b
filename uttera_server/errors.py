"""Errors a user or operator can trigger, each with a stable `code` and a message saying what to do.

    UtteraError                         code, http_status, param; `error_payload()` renders it
      InvalidRequest (ValueError)       the request is wrong: fix it and retry (HTTP 400)
        EmptyInput, InputTooLong, UnknownVoice, InvalidSpeed, UnsupportedFormat,
        ContextConflict, TooManyContexts  (WebSocket only)
        UnknownModel                    HTTP 404
        RequestTooLarge                 HTTP 413
        Unauthorized                    HTTP 401: a missing or wrong API key
        OriginNotAllowed                HTTP 403: a browser Origin not in --cors-origins
        RequestTimeout                  HTTP 408: the headers or body came too slowly
        UnsupportedMediaType            HTTP 415: a JSON body without Content-Type: application/json
        HeadersTooLarge                 HTTP 431
        MalformedRequest                the body or message does not parse or has the wrong shape;
          InvalidJSON, InvalidType,     over WebSocket the server answers `error` and closes with 1008
          MissingField, UnknownMessageType, BinaryNotSupported
      ServiceUnavailable                retry later (HTTP 503)
        EngineNotReady, ShuttingDown
        Overloaded                      HTTP 429 with Retry-After; WebSocket close 1013 (admission control)
      SynthesisFailed                   the engine failed during a request (HTTP 500)
      ServerFault                       the server's own machinery failed (WebSocket: close 1011)
    ConfigError (ValueError)            invalid server or engine configuration (the CLI exits with 2)

The class attributes below are the one place where an error maps to an HTTP status, an OpenAI-style
error `type`, and (for `MalformedRequest`) closing the WebSocket.
"""

from typing import ClassVar

WS_POLICY_VIOLATION = 1008  # RFC 6455 close code for a message that violates the protocol
WS_TRY_AGAIN_LATER = 1013  # RFC 6455 close code: the server is overloaded, retry later


class UtteraError(Exception):
    code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500
    error_type: ClassVar[str] = "server_error"
    default_message: ClassVar[str] = "internal error"
    closes_websocket: ClassVar[bool] = False
    param: str | None = None

    def __init__(self, message: str | None = None, *, param: str | None = None):
        super().__init__(message or self.default_message)
        if param is not None:
            self.param = param

    @property
    def message(self) -> str:
        return str(self.args[0])


class ConfigError(ValueError):
    """Invalid server or engine configuration; the message names the flag to change."""


class InvalidRequest(UtteraError, ValueError):
    code = "invalid_request"
    http_status = 400
    error_type = "invalid_request_error"
    default_message = "invalid request"


class EmptyInput(InvalidRequest):
    code = "empty_input"
    param = "input"
    default_message = "input is empty: send some text to synthesize"


class InputTooLong(InvalidRequest):
    code = "input_too_long"
    param = "input"
    default_message = "input is too long: split the text into several requests"


class UnknownVoice(InvalidRequest):
    code = "unknown_voice"
    param = "voice"
    default_message = "unknown voice: GET /v1/audio/voices lists the voices"


class InvalidSpeed(InvalidRequest):
    code = "invalid_speed"
    param = "speed"
    default_message = "speed must be a number from 0.25 to 4.0"


class UnsupportedFormat(InvalidRequest):
    code = "unsupported_format"
    param = "response_format"
    default_message = "unsupported response_format"


class UnknownModel(InvalidRequest):
    code = "model_not_found"
    http_status = 404
    param = "model"
    default_message = "unknown model: GET /v1/models lists the models"


class RequestTooLarge(InvalidRequest):
    code = "request_too_large"
    http_status = 413
    default_message = "request body is too large"


class Unauthorized(InvalidRequest):
    code = "invalid_api_key"
    http_status = 401
    default_message = (
        "missing or wrong API key: send Authorization: Bearer KEY (WebSocket: also "
        "?api_key=KEY or the subprotocol uttera.api-key.KEY)"
    )


class OriginNotAllowed(InvalidRequest):
    code = "origin_not_allowed"
    http_status = 403
    default_message = "this Origin may not use the API: start the server with --cors-origins listing it"


class RequestTimeout(InvalidRequest):
    code = "request_timeout"
    http_status = 408
    default_message = "the request was not received in time: send the headers and body without pausing"


class UnsupportedMediaType(InvalidRequest):
    code = "unsupported_media_type"
    http_status = 415
    default_message = "the body must be JSON: send Content-Type: application/json"


class HeadersTooLarge(InvalidRequest):
    code = "headers_too_large"
    http_status = 431
    default_message = "too many or too large request headers: send fewer"


class ContextConflict(InvalidRequest):
    code = "context_conflict"
    param = "context_id"
    default_message = "the message conflicts with the state of its context"


class TooManyContexts(InvalidRequest):
    code = "too_many_contexts"
    param = "context_id"
    default_message = "too many open contexts on this socket: end or cancel one first"


class MalformedRequest(InvalidRequest):
    code = "malformed_request"
    closes_websocket = True
    default_message = "malformed request"


class InvalidJSON(MalformedRequest):
    code = "invalid_json"
    default_message = "the body is not a JSON object: send a JSON object"


class InvalidType(MalformedRequest):
    code = "invalid_type"
    default_message = "a field has the wrong type"


class MissingField(MalformedRequest):
    code = "missing_field"
    default_message = "a required field is missing"


class UnknownMessageType(MalformedRequest):
    code = "unknown_message_type"
    param = "type"
    default_message = "unknown message type: use text, flush, end, cancel or keepalive"


class BinaryNotSupported(MalformedRequest):
    code = "binary_not_supported"
    default_message = "binary messages are not accepted: send JSON text messages"


class ServiceUnavailable(UtteraError):
    code = "service_unavailable"
    http_status = 503
    default_message = "service unavailable: retry later"


class EngineNotReady(ServiceUnavailable):
    code = "engine_not_ready"
    default_message = "the engine is not ready: retry when GET /health answers 200"


class ShuttingDown(ServiceUnavailable):
    code = "shutting_down"
    default_message = "the server is shutting down: retry on another instance"


class Overloaded(ServiceUnavailable):
    """Admission control refused the request before any engine work (`--max-waiting`, `--max-connections`)."""

    code = "overloaded"
    http_status = 429
    ws_close_code: ClassVar[int] = WS_TRY_AGAIN_LATER
    retry_after_s: ClassVar[int] = 1
    default_message = "the server is at capacity: retry after the Retry-After seconds"


class SynthesisFailed(UtteraError):
    code = "synthesis_failed"
    default_message = "synthesis failed inside the engine; the server log has the details"


class ServerFault(UtteraError):
    code = "internal_error"
    default_message = "internal server error (the server log has the details): reconnect and retry"


def as_uttera_error(exc: BaseException) -> UtteraError:
    """`exc` itself when it is an `UtteraError`, else a `SynthesisFailed` that hides internals."""
    if isinstance(exc, UtteraError):
        return exc
    return SynthesisFailed()


def error_payload(exc: UtteraError) -> dict[str, dict[str, str]]:
    """OpenAI-style body: `{"error": {"code", "message", "type", "param"?}}`."""
    body = {"code": exc.code, "message": exc.message, "type": exc.error_type}
    if exc.param is not None:
        body["param"] = exc.param
    return {"error": body}
