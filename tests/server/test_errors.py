"""The error hierarchy: codes, HTTP statuses, the OpenAI-style body, WebSocket closing."""

import pytest

from uttera_server import errors as e


@pytest.mark.parametrize("cls, status, code, param", [
    (e.EmptyInput, 400, "empty_input", "input"),
    (e.InputTooLong, 400, "input_too_long", "input"),
    (e.UnknownVoice, 400, "unknown_voice", "voice"),
    (e.InvalidSpeed, 400, "invalid_speed", "speed"),
    (e.UnsupportedFormat, 400, "unsupported_format", "response_format"),
    (e.UnknownModel, 404, "model_not_found", "model"),
    (e.RequestTooLarge, 413, "request_too_large", None),
    (e.InvalidJSON, 400, "invalid_json", None),
    (e.MissingField, 400, "missing_field", None),
    (e.InvalidType, 400, "invalid_type", None),
    (e.EngineNotReady, 503, "engine_not_ready", None),
    (e.ShuttingDown, 503, "shutting_down", None),
    (e.SynthesisFailed, 500, "synthesis_failed", None),
    (e.ServerFault, 500, "internal_error", None),
])  # fmt: skip
def test_mapping(cls, status, code, param):
    exc = cls()
    assert (exc.http_status, exc.code, exc.param) == (status, code, param)
    assert exc.message  # every error says something by default
    assert isinstance(exc, ValueError) == (status < 500)


def test_payload_is_openai_shaped():
    exc = e.InvalidType("the field 'speed' must be a number", param="speed")
    assert e.error_payload(exc) == {
        "error": {
            "code": "invalid_type",
            "message": "the field 'speed' must be a number",
            "type": "invalid_request_error",
            "param": "speed",
        }
    }
    assert e.error_payload(e.EngineNotReady())["error"]["type"] == "server_error"
    assert "param" not in e.error_payload(e.EngineNotReady())["error"]


def test_only_malformed_messages_close_the_websocket():
    assert e.InvalidJSON.closes_websocket and e.BinaryNotSupported.closes_websocket
    assert not e.UnknownVoice.closes_websocket and not e.SynthesisFailed.closes_websocket


def test_unexpected_exceptions_are_hidden():
    hidden = e.as_uttera_error(RuntimeError("secret internals"))
    assert isinstance(hidden, e.SynthesisFailed) and "secret" not in hidden.message
    mine = e.EmptyInput()
    assert e.as_uttera_error(mine) is mine
