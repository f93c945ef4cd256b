"""Three replicas behind a real nginx (Debian's), configured by deploy/nginx/uttera.conf.template: HTTP and
WebSocket streams go through it, one replica is killed mid-run (SIGKILL: a crash, no drain), and

- the streams on the other replicas finish whole;
- the streams on the killed replica end early, with an error the client sees, not a hang;
- new sessions succeed: the one that finds the dead replica is retried on another (proxy_next_upstream), and
  none is sent to it after that (passive health: max_fails/fail_timeout).

Which replica served which stream is read from nginx's JSON access log (`upstream_addr` per request id).
"""

import asyncio
import time
from dataclasses import dataclass

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from _debian import debian_binary
from _nginx import Nginx, start_nginx
from _replicas import live
from _server_process import timeout
from uttera_server.client import Audio, Done, SpeechStreamClient

# Several sentences: an HTTP stream is paced to playback (--max-lead-s) and lasts ~10 s; a WebSocket
# client sends them one per SENTENCE_GAP_S, as a voice agent's LLM would.
SENTENCES = [
    f"This is sentence {n} of a long answer, spoken slowly for the test."
    for n in ("one", "two", "three", "four", "five", "six")
]
LONG_TEXT = " ".join(SENTENCES)
SENTENCE_GAP_S = 1.5  # the WebSocket streams outlast the wait for every first audio on a loaded CI host
SHORT_TEXT = "A new session, after the crash."
HTTP_STREAMS = 6
WS_STREAMS = 3


@dataclass
class Stream:
    request_id: str
    transport: str
    ok: bool = False  # finished whole: HTTP 200 with its whole chunked body, WebSocket `done`
    audio_bytes: int = 0
    first_audio: asyncio.Event | None = None
    error: str = ""
    echoed_id: str | None = None  # the x-request-id the response carried
    seconds: float = 0.0


async def http_stream(base: str, s: Stream, text: str) -> Stream:
    started = time.monotonic()
    body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
    try:
        async with httpx.AsyncClient(timeout=timeout(30)) as client:
            async with client.stream(
                "POST", f"{base}/v1/audio/speech", json=body, headers={"x-request-id": s.request_id}
            ) as r:
                s.echoed_id = r.headers.get("x-request-id")
                async for chunk in r.aiter_raw():
                    s.audio_bytes += len(chunk)
                    if s.first_audio is not None:
                        s.first_audio.set()
                s.ok = r.status_code == 200
                s.error = "" if s.ok else f"HTTP {r.status_code}"
    except httpx.HTTPError as e:
        s.error = f"{type(e).__name__}: {e}"
    s.seconds = time.monotonic() - started
    return s


async def ws_stream(base: str, s: Stream, text: str) -> Stream:
    started = time.monotonic()
    url = base.replace("http://", "ws://") + "/v1/audio/speech/stream"
    try:
        client = await SpeechStreamClient.connect(
            url, additional_headers={"x-request-id": s.request_id}, open_timeout=timeout(10)
        )
    except OSError as e:
        s.error = f"{type(e).__name__}: {e}"
        return s
    async with client:
        assert client.ws.response is not None  # the handshake's
        s.echoed_id = client.ws.response.headers.get("x-request-id")
        ctx = client.context("answer")
        feed = asyncio.create_task(feed_sentences(ctx, text))
        async for event in ctx.events(timeout(30)):
            if isinstance(event, Audio):
                s.audio_bytes += len(event.pcm)
                if s.first_audio is not None:
                    s.first_audio.set()
            final = event
        s.ok = isinstance(final, Done)
        feed.cancel()
        await asyncio.wait({feed})
        s.error = "" if s.ok else repr(final)
    s.seconds = time.monotonic() - started
    return s


async def feed_sentences(ctx, text: str) -> None:
    """The text of `ctx` one sentence at a time, then `end` (the socket may die meanwhile: then stop)."""
    try:
        for sentence in text.split(". "):
            await ctx.send_text(sentence.rstrip(".") + ". ")
            await asyncio.sleep(SENTENCE_GAP_S)
        await ctx.end()
    except ConnectionClosed:
        pass


def upstreams(nginx: Nginx) -> dict[str, list[str]]:
    """request id -> the replicas nginx tried for it, in order ("127.0.0.1:PORT")."""
    return {line["request_id"]: line["upstream_addr"].split(", ") for line in nginx.access_lines()}


async def wait_logged(nginx: Nginx, request_ids: list[str]) -> dict[str, list[str]]:
    """nginx writes a request's access line when it ends, just after the client saw the end."""
    async with asyncio.timeout(timeout(10)):
        while not set(request_ids) <= (seen := upstreams(nginx)).keys():
            await asyncio.sleep(0.05)
    return seen


@pytest.fixture(scope="module")
def nginx(replicas, tmp_path_factory):
    n = start_nginx(
        debian_binary("nginx", "nginx"), tmp_path_factory.mktemp("nginx"), [f"127.0.0.1:{r.port}" for r in replicas]
    )
    yield n
    n.stop()


async def test_replica_killed_mid_run(replicas, nginx):
    assert len(live(replicas)) == 3, "the load-balancer test needs the three replicas alive"
    streams = [Stream(f"lb-http-{i}", "http", first_audio=asyncio.Event()) for i in range(HTTP_STREAMS)]
    streams += [Stream(f"lb-ws-{i}", "websocket", first_audio=asyncio.Event()) for i in range(WS_STREAMS)]
    run = [
        asyncio.create_task((http_stream if s.transport == "http" else ws_stream)(nginx.url, s, LONG_TEXT))
        for s in streams
    ]

    async with asyncio.timeout(timeout(60)):  # every phase is bounded: a hanging client fails the test
        await asyncio.gather(*(s.first_audio.wait() for s in streams))  # all streaming
        assert not any(t.done() for t in run), "a stream finished before the crash: make LONG_TEXT longer"
        victim = replicas[1]
        victim.kill()
        killed_at = time.monotonic()
        await asyncio.gather(*run)

        # New sessions one at a time: least_conn breaks the tie between idle replicas round robin, so one of
        # them tries the dead replica (refused, retried on another, the replica marked down); then a burst.
        alone = [await http_stream(nginx.url, Stream(f"lb-after-{i}", "http"), SHORT_TEXT) for i in range(3)]
        burst = [Stream(f"lb-after-http-{i}", "http") for i in range(1, 5)]
        burst += [Stream(f"lb-after-ws-{i}", "websocket") for i in range(2)]
        await asyncio.gather(
            *((http_stream if s.transport == "http" else ws_stream)(nginx.url, s, SHORT_TEXT) for s in burst)
        )
        tried = await wait_logged(nginx, [s.request_id for s in streams + alone + burst])

    dead = f"127.0.0.1:{victim.port}"
    on_dead = [s for s in streams if tried[s.request_id][-1] == dead]
    on_live = [s for s in streams if tried[s.request_id][-1] != dead]
    report = "\n".join(
        f"{s.request_id}: via {tried[s.request_id]} ok={s.ok} audio={s.audio_bytes} B {s.seconds:.1f} s {s.error}"
        for s in streams + alone + burst
    )
    assert on_dead, f"no stream was on the killed replica:\n{report}"
    assert len({tried[s.request_id][-1] for s in on_live}) == 2, f"least_conn spread:\n{report}"
    for s in on_live:  # unaffected by the crash of another replica
        assert s.ok and s.audio_bytes > 0 and s.echoed_id == s.request_id, report
    for s in on_dead:  # cut short, seen by the client as an error soon after the crash
        assert not s.ok and s.error, report
    assert all(s.seconds < timeout(60) for s in streams), report
    for s in alone + burst:  # new sessions: all served, by the live replicas
        assert s.ok and s.audio_bytes > 0 and tried[s.request_id][-1] != dead, report
    assert sum(dead in tried[s.request_id] for s in alone) <= 1, f"dead replica tried twice:\n{report}"
    assert all(dead not in tried[s.request_id] for s in burst), f"routed to the dead replica again:\n{report}"
    assert time.monotonic() - killed_at < timeout(60)
