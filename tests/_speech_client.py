"""Client-side helpers for the endpoint tests: reading /metrics, collecting WebSocket messages."""

import asyncio
import json
import struct

import httpx
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from _server_process import timeout
from uttera_server.ws.messages import decode_audio_frame


async def read_metrics(client: httpx.AsyncClient) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset of label items): value} from GET /metrics."""
    r = await client.get("/metrics")
    assert r.status_code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def metric(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def requests_total(samples: dict, transport: str, status: str) -> float:
    return metric(samples, "uttera_requests_total", transport=transport, status=status)


async def wait_for_metrics(client: httpx.AsyncClient, check, seconds: float = 10.0) -> dict:
    """Poll /metrics until `check(samples)` is true; fail with the last samples after the timeout."""
    deadline = asyncio.get_running_loop().time() + timeout(seconds)
    while True:
        samples = await read_metrics(client)
        if check(samples):
            return samples
        if asyncio.get_running_loop().time() > deadline:
            interesting = {
                k: v
                for k, v in samples.items()
                if k[0].startswith("uttera_") and not k[0].endswith(("_bucket", "_created"))
            }
            raise AssertionError(f"metrics condition not met within {timeout(seconds)} s: {interesting}")
        await asyncio.sleep(0.05)  # poll interval


def parse_wav_header(data: bytes) -> dict:
    """Fields of a 44-byte PCM WAV header."""
    (
        riff,
        riff_size,
        wave_,
        fmt,
        fmt_size,
        audio_format,
        channels,
        rate,
        byte_rate,
        align,
        bits,
        data_id,
        data_size,
    ) = struct.unpack("<4sI4s4sIHHIIHH4sI", data[:44])
    assert (riff, wave_, fmt, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    return {
        "riff_size": riff_size,
        "fmt_size": fmt_size,
        "audio_format": audio_format,
        "channels": channels,
        "sample_rate": rate,
        "byte_rate": byte_rate,
        "block_align": align,
        "bits": bits,
        "data_size": data_size,
    }


async def recv(ws: ClientConnection) -> str | bytes:
    return await asyncio.wait_for(ws.recv(), timeout(30))


async def recv_audio(ws: ClientConnection) -> bytes:
    """The next binary frame; word `timestamps` of a segment may come before its first audio."""
    message = await recv(ws)
    while isinstance(message, str):
        assert json.loads(message)["type"] == "timestamps", message
        message = await recv(ws)
    return message


async def recv_json(ws: ClientConnection) -> dict:
    message = await recv(ws)
    assert isinstance(message, str), f"expected a JSON message, got {len(message)} binary bytes"
    return json.loads(message)


async def send_json(ws: ClientConnection, **message) -> None:
    await ws.send(json.dumps(message))


async def collect_until(ws: ClientConnection, *types: str) -> tuple[list[dict], dict[str, bytearray]]:
    """Read until a JSON message whose type is in `types`; returns (JSON messages in order, the last one
    included; PCM per context id)."""
    messages: list[dict] = []
    audio: dict[str, bytearray] = {}
    while True:
        message = await recv(ws)
        if isinstance(message, bytes):
            context_id, pcm = decode_audio_frame(message)
            audio.setdefault(context_id, bytearray()).extend(pcm)
            continue
        messages.append(json.loads(message))
        if messages[-1]["type"] in types:
            return messages, audio


async def expect_close(ws: ClientConnection) -> tuple[int | None, list]:
    """Read until the server closes; returns (close code, messages read before it)."""
    messages = []
    try:
        while True:
            messages.append(await recv(ws))
    except ConnectionClosed:
        pass
    return ws.close_code, messages
