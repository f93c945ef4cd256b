"""A fault of the server's own session machinery closes the socket with 1011.

Nothing a client sends can make the real server fail this way, so this one test drives the real app
in-process (Starlette's TestClient) with a stand-in synthesizer and a fault injected into the protocol.
"""

from starlette.testclient import TestClient

from _stand_ins import IdleSynthesizer

from uttera_server.app import build_app
from uttera_server.config import ServerConfig
from uttera_server.synthesis import SpeechSynthesizer
from uttera_server.ws.protocol import SpeechSessionProtocol


def test_the_stand_in_is_a_speech_synthesizer():
    assert isinstance(IdleSynthesizer(), SpeechSynthesizer)


def test_a_session_fault_answers_internal_error_and_closes_1011(tmp_path, monkeypatch):
    app = build_app(ServerConfig(model_dir=tmp_path), IdleSynthesizer())
    receive_text = SpeechSessionProtocol.receive_text

    def faulty(self, data: str):
        if "boom" in data:
            raise RuntimeError("injected fault")
        return receive_text(self, data)

    monkeypatch.setattr(SpeechSessionProtocol, "receive_text", faulty)
    with TestClient(app).websocket_connect("/v1/audio/speech/stream") as ws:
        ws.send_json({"type": "text", "text": "Open context", "context_id": "c"})
        assert ws.receive_json()["type"] == "started"
        ws.send_json({"type": "text", "text": "boom", "context_id": "c"})
        error = ws.receive_json()
        assert error == {"type": "error", "code": "internal_error", "message": error["message"]}
        assert "reconnect" in error["message"] and "injected" not in error["message"]
        closed = ws.receive()
    assert closed == {"type": "websocket.close", "code": 1011, "reason": "internal_error"}
    samples = app.state.uttera.metrics.registry
    assert samples.get_sample_value("uttera_requests_total", {"transport": "websocket", "status": "error"}) == 1
    assert samples.get_sample_value("uttera_ws_connections") == 0
    assert app.state.uttera.streams.count == 0


def test_engine_not_ready_closes_1013(tmp_path):
    synth = IdleSynthesizer()
    synth.is_ready = lambda: False
    with TestClient(build_app(ServerConfig(model_dir=tmp_path), synth)).websocket_connect(
        "/v1/audio/speech/stream"
    ) as ws:
        assert ws.receive_json()["code"] == "engine_not_ready"
        assert ws.receive()["code"] == 1013
