"""`--vocoder-driver loop` on a server of its own: the event loop issues the vocoder passes, and HTTP and
WebSocket speech come out whole and the same as the default thread driver's (greedy engine, same text;
batching and intra-op threads differ, so samples may differ by float rounding, nothing more)."""

import asyncio

import httpx
import numpy as np
from websockets.asyncio.client import connect

from _server_process import start_server, timeout
from _speech_client import collect_until, send_json

TEXT = "The loop drives the vocoder. Two sentences, streamed."


async def speak(url: str) -> tuple[bytes, bytes]:
    async with httpx.AsyncClient(base_url=url, timeout=timeout(60)) as http:
        r = await http.post("/v1/audio/speech", json={"model": "uttera", "input": TEXT, "response_format": "pcm"})
        assert r.status_code == 200, r.text
    async with connect(url.replace("http://", "ws://") + "/v1/audio/speech/stream") as ws:
        await send_json(ws, type="text", text=TEXT)
        await send_json(ws, type="end")
        messages, audio = await asyncio.wait_for(collect_until(ws, "done"), timeout(60))
    assert messages[-1]["type"] == "done"
    return r.content, bytes(audio["default"])


async def test_loop_driver_serves_the_same_audio_as_the_thread(model_dir, server, tmp_path):
    reference = await speak(server.url)  # the shared server: thread driver
    loop_server = start_server(model_dir, tmp_path / "server.log", ("--vocoder-driver", "loop"))
    try:
        http_pcm, ws_pcm = await speak(loop_server.url)
    finally:
        loop_server.stop_cleanly()
    for got, want in ((http_pcm, reference[0]), (ws_pcm, reference[1])):
        assert len(got) == len(want) > 22050
        a, b = (np.frombuffer(x, np.int16).astype(np.float64) for x in (want, got))
        assert 10 * np.log10(np.sum(a**2) / max(np.sum((a - b) ** 2), 1e-9)) > 50  # SNR in dB
