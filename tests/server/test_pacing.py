"""`--max-lead-s`: a request's later sentences wait until the audio already sent is at most that far
ahead of real-time playback (time since the first byte), so a long text streams at about real time
instead of engine speed, with the same audio. The shared server (no pacing) is the reference."""

import time

import httpx
import numpy as np

from _server_process import start_server, timeout

SAMPLE_RATE = 22050
TEXT = " ".join(
    f"Sentence number {w} is here." for w in ("one", "two", "three", "four", "five", "six", "seven", "eight")
)
MAX_LEAD_S = 0.3


async def stream(url: str) -> tuple[bytes, float, float]:
    """PCM, seconds from first to last byte, and the largest lead of received audio over wall time."""
    pcm, lead = bytearray(), 0.0
    first: float | None = None
    async with httpx.AsyncClient(base_url=url, timeout=timeout(120)) as http:
        async with http.stream(
            "POST", "/v1/audio/speech", json={"model": "uttera", "input": TEXT, "response_format": "pcm"}
        ) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_bytes():
                now = time.monotonic()
                first = now if first is None else first
                pcm += chunk
                lead = max(lead, len(pcm) / 2 / SAMPLE_RATE - (now - first))
    assert first is not None, "no audio"
    return bytes(pcm), time.monotonic() - first, lead


async def test_max_lead_paces_later_sentences_to_playback(model_dir, server, tmp_path):
    free_pcm, free_s, free_lead = await stream(server.url)
    paced_server = start_server(model_dir, tmp_path / "server.log", ("--max-lead-s", str(MAX_LEAD_S)))
    try:
        paced_pcm, paced_s, paced_lead = await stream(paced_server.url)
    finally:
        paced_server.stop_cleanly()
    duration = len(free_pcm) / 2 / SAMPLE_RATE
    assert duration > 4.0, duration  # eight sentences: pacing has something to hold back
    # Same audio: the engine is greedy; vocoder batches may differ, so float rounding at most.
    assert len(paced_pcm) == len(free_pcm)
    a, b = (np.frombuffer(x, np.int16).astype(np.float64) for x in (free_pcm, paced_pcm))
    assert 10 * np.log10(np.sum(a**2) / max(np.sum((a - b) ** 2), 1e-9)) > 50
    # Paced: never more than the lead plus about one sentence ahead of playback, so the last byte
    # comes close to real time; unpaced, the audio runs ahead by however fast the engine is.
    assert paced_lead < 0.4 * duration, (paced_lead, duration)
    assert paced_s > 0.5 * duration, (paced_s, duration)
    assert paced_s > free_s and paced_lead < free_lead, (paced_s, free_s, paced_lead, free_lead)
