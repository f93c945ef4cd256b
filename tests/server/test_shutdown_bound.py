"""SIGTERM with clients that stop reading: the process still exits within the grace period (serve.py
keeps SHUTDOWN_TAIL_S of it for cancelling, cutting connections and closing the engine), on a server of
its own."""

import asyncio
import json
import signal
import socket
import time

from websockets.asyncio.client import connect

from _server_process import MAX_INPUT_CHARS, start_server, timeout
from _speech_client import recv_json

GRACE_S = 8.0  # --graceful-shutdown-timeout (above serve.SHUTDOWN_TAIL_S, so 2 s of it are a drain)
BOUND_S = 2.0  # the process's own exit after the last step, with margin
INPUT_CHARS = 4 * MAX_INPUT_CHARS  # enough audio to fill every socket buffer on the way
TEXT = ("A long answer that a client asked for and then stopped reading, so the server's writes block. " * 50)[
    :INPUT_CHARS
]


def _small_buffer_socket(host: str, port: int) -> socket.socket:
    """A connected socket with a 4 KiB receive buffer, so a client that stops reading blocks the server soon."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    return s


async def test_sigterm_with_non_reading_clients_exits_within_the_bound(model_dir, tmp_path):
    server = start_server(
        model_dir,
        tmp_path / "server.log",
        ("--graceful-shutdown-timeout", str(GRACE_S), "--max-input-chars", str(INPUT_CHARS)),
    )
    host, port = server.url.removeprefix("http://").split(":")
    try:
        # HTTP: a long response nobody reads; a tiny receive buffer, so the server's writes block soon
        http = _small_buffer_socket(host, int(port))
        body = json.dumps({"model": "uttera", "input": TEXT}).encode()
        http.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        # WebSocket: two long contexts, then the client stops reading (max_queue=1: the library stops too)
        ws_url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        async with connect(
            ws_url, sock=_small_buffer_socket(host, int(port)), max_queue=1, open_timeout=timeout(30), close_timeout=1
        ) as ws:
            for cid in ("a", "b"):
                await ws.send(json.dumps({"type": "text", "text": TEXT, "context_id": cid}))
                await ws.send(json.dumps({"type": "flush", "context_id": cid}))
            assert (await recv_json(ws))["type"] == "started"
            http.settimeout(timeout(60))
            assert http.recv(1)  # the HTTP response has begun (its first audio is out)
            ws.transport.pause_reading()  # from here on neither client reads
            server.proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            status = await asyncio.to_thread(server.proc.wait, timeout(GRACE_S + BOUND_S) + 30)
            elapsed = time.monotonic() - signalled
        http.close()
        print(f"\nexit {status} {elapsed:.1f} s after SIGTERM (grace {GRACE_S} s)")
        assert elapsed < timeout(GRACE_S + BOUND_S), server.log_tail(80)
        stuck = [line for line in server.log_tail(400).splitlines() if "whose streams did not end" in line]
        print("\n".join(stuck) or "no stream was stuck in send() at the cancel")
        assert "closing the engine" in server.log_tail(200)
    finally:
        server.stop()
