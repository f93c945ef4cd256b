"""The policy behind the exposure limits, without I/O: API keys, origins, media types, admission bounds,
and the flags that configure them."""

import pytest

from uttera_server import security
from uttera_server.admission import Admission, Refusal
from uttera_server.flags import build_config, build_parser
from uttera_server.errors import ConfigError, Overloaded


def test_api_keys_accept_only_configured_keys():
    keys = security.ApiKeys(["alpha", "beta"])
    assert keys.enabled and keys.accepts("alpha") and keys.accepts("beta")
    for wrong in (None, "", "alph", "alphaa", "ALPHA", "beta\x00", "\udcff"):
        assert not keys.accepts(wrong)
    assert not security.ApiKeys([]).enabled


@pytest.mark.parametrize("header, token", [
    ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Basic abc", None), ("Bearer", None), (None, None),
])  # fmt: skip
def test_bearer_token(header, token):
    assert security.bearer_token(header) == token


def test_websocket_credential_order():
    headers = [(b"sec-websocket-protocol", b"uttera, uttera.api-key.sub")]
    assert security.websocket_credential([(b"authorization", b"Bearer hdr"), *headers], b"api_key=q") == ("hdr", None)
    assert security.websocket_credential(headers, b"api_key=q") == ("sub", "uttera.api-key.sub")
    assert security.websocket_credential([], b"x=1&api_key=q") == ("q", None)
    assert security.websocket_credential([], b"") == (None, None)
    assert security.selected_subprotocol(["uttera", "uttera.api-key.k"], "uttera.api-key.k") == "uttera"
    assert security.selected_subprotocol(["uttera.api-key.k"], "uttera.api-key.k") == "uttera.api-key.k"


@pytest.mark.parametrize("origin, allowed, host, ok", [
    (None, (), "h:1", True),  # not a browser
    ("http://h:1", (), "h:1", True),  # same origin
    ("http://evil:1", (), "h:1", False),
    ("https://app.example", ("https://app.example",), "h:1", True),
    ("https://app.example/", ("https://app.example",), "h:1", True),
    ("https://evil.example", ("https://app.example",), "h:1", False),
    ("null", (), "h:1", False),
    ("https://any.example", ("*",), "h:1", True),
])  # fmt: skip
def test_origin_allowed(origin, allowed, host, ok):
    assert security.origin_allowed(origin, allowed, host) is ok


@pytest.mark.parametrize("content_type, ok", [
    ("application/json", True), ("Application/JSON; charset=utf-8", True), ("text/plain", False),
    ("application/x-www-form-urlencoded", False), (None, False), ("application/jsonp", False),
])  # fmt: skip
def test_is_json(content_type, ok):
    assert security.is_json(content_type) is ok


def test_admission_bounds():
    engine_waiting = [0]
    a = Admission(max_connections=2, max_waiting=1, engine_waiting=lambda: engine_waiting[0])
    first = a.admit()
    assert a.refusal(True) is None
    first.wait()
    assert a.refusal(False) is None and a.refusal(True) is Refusal.WAITING
    first.started()
    assert a.refusal(True) is None
    engine_waiting[0] = 1  # the engine's own queue counts too
    assert a.waiting_refusal() is Refusal.WAITING
    second = a.admit()
    assert a.refusal(False) is Refusal.CONNECTIONS
    for t in (first, second, second):  # release is idempotent
        t.release()
    assert (a.connections, a.waiting) == (0, 0)


def test_admission_without_an_engine_counts_its_own():
    def broken() -> int:
        raise RuntimeError("engine not started")

    a = Admission(max_connections=None, max_waiting=1, engine_waiting=broken)
    assert a.refusal(True) is None
    a.admit().wait()
    assert a.refusal(True) is Refusal.WAITING


def test_overloaded_maps_to_429_and_1013():
    assert (Overloaded.http_status, Overloaded.code, Overloaded.ws_close_code) == (429, "overloaded", 1013)


def _config(tmp_path, *flags, env=None, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.delenv("UTTERA_API_KEYS", raising=False)
        if env is not None:
            monkeypatch.setenv("UTTERA_API_KEYS", env)
    return build_config(build_parser().parse_args(["serve", "--model", str(tmp_path), *flags]))


def test_flags_build_the_exposure_config(tmp_path, monkeypatch):
    c = _config(
        tmp_path,
        "--api-key",
        "a",
        "--api-key",
        "b",
        "--cors-origins",
        "https://x.example,https://y.example/",
        "--no-metrics-auth",
        "--max-waiting",
        "4",
        "--max-connections",
        "9",
        monkeypatch=monkeypatch,
    )
    assert c.api_keys == ("a", "b") and not c.metrics_auth
    assert c.cors_origins == ("https://x.example", "https://y.example")
    assert (c.max_waiting, c.max_connections) == (4, 9)
    assert _config(tmp_path, env="k1, k2,", monkeypatch=monkeypatch).api_keys == ("k1", "k2")
    assert _config(tmp_path, "--api-key", "flag", env="env", monkeypatch=monkeypatch).api_keys == ("flag",)
    assert _config(tmp_path, monkeypatch=monkeypatch).api_keys == ()


@pytest.mark.parametrize("flags", [
    ("--cors-origins", "app.example"), ("--max-waiting", "0"), ("--max-connections", "-1"),
    ("--header-timeout-s", "0"), ("--body-timeout-s", "-1"), ("--max-header-bytes", "0"),
])  # fmt: skip
def test_invalid_exposure_flags(tmp_path, monkeypatch, flags):
    with pytest.raises(ConfigError):
        _config(tmp_path, *flags, monkeypatch=monkeypatch)
