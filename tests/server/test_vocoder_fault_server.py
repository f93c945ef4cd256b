"""A vocoder fault in a real server's serving process (issue 10, item 8): the request that meets it is
answered with a typed error at once, GET /health answers 503 `failed` (the server will not recover, so
not `starting`), and later requests are refused, over HTTP and WebSocket; nothing hangs."""

import json
import sys
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from _server_process import get_health, start_server, timeout
from _speech_client import expect_close

WRAPPER = Path(__file__).with_name("_faulty_vocoder.py")


async def test_vocoder_fault_fails_the_request_and_health(model_dir, tmp_path, monkeypatch):
    flag = tmp_path / "fault"
    monkeypatch.setenv("UTTERA_TEST_VOCODER_FAULT", str(flag))  # the server inherits it
    server = start_server(model_dir, tmp_path / "server.log", entry=(sys.executable, str(WRAPPER)))
    body = {"model": "uttera", "input": "A sentence for the vocoder.", "response_format": "pcm"}
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout(60)) as http:
            assert (await http.post("/v1/audio/speech", json=body)).status_code == 200
            flag.touch()
            r = await http.post("/v1/audio/speech", json=body)
            assert r.status_code == 500 and r.json()["error"]["code"] == "synthesis_failed", r.text
            status, health = get_health(server.url)
            assert status == 503 and health["status"] == "failed", (status, health)
            assert "vocoder" in health["error"]
            r = await http.post("/v1/audio/speech", json=body)
            assert r.status_code == 503 and r.json()["error"]["code"] == "engine_not_ready", r.text
        ws_url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        async with connect(ws_url, open_timeout=timeout(30)) as ws:  # refused as soon as it opens
            close_code, messages = await expect_close(ws)
        assert close_code == 1013 and json.loads(messages[0])["code"] == "engine_not_ready"
        log = server.log_tail(400)  # the 500 says "the server log has the details": it has them, once
        assert log.count("vocoder_worker: vocoder worker failed; it serves nothing more") == 1, log
        assert "RuntimeError: injected vocoder fault" in log
    finally:
        server.stop()
