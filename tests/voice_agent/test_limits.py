"""Limits and malformed input over the real server: each answered as docs/protocol.md says, and none of them
disturbs another context or another connection."""

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from _agent import check_done, speak
from _server_process import MAX_INPUT_CHARS, timeout
from _speech_client import expect_close, metric, read_metrics, recv_json, wait_for_metrics
from uttera_server.client import Audio, ContextError, SpeechStreamClient

MAX_MESSAGE_BYTES = 12 * MAX_INPUT_CHARS + 4096  # ServerConfig.ws_max_message_bytes of the test server
BYSTANDER_TEXT = "A bystander on another connection. It keeps talking whatever the others do."


@pytest.fixture
async def bystander(ws_url):
    """Another connection streaming while the test misbehaves; it must finish normally."""
    client = await SpeechStreamClient.connect(ws_url)
    ctx = client.context("bystander")
    await ctx.send_text(BYSTANDER_TEXT)
    await ctx.end()
    yield
    check_done(await ctx.collect(timeout(60)))
    await client.close()


@pytest.mark.parametrize("frame, code", [
    ("this is not json", "invalid_json"),
    ('{"type": "speak", "text": "hi"}', "unknown_message_type"),
    ('{"type": "text", "text": 42}', "invalid_type"),
    (b"\x01\x02binary", "binary_not_supported"),
])  # fmt: skip
async def test_malformed_message_closes_1008_and_stops_its_contexts(ws_url, bystander, frame, code):
    async with await SpeechStreamClient.connect(ws_url) as client:
        ctx = client.context("open")
        await ctx.send_text("An open context, mid reply. It will be stopped by the bad message.")
        await ctx.next_event(timeout(30))  # started
        await client.ws.send(frame)
        assert await client.wait_closed() == (1008, code)
        assert client.errors[-1]["code"] == code and "context_id" not in client.errors[-1]


async def test_oversized_message_closes_1009(ws_url, bystander):
    async with connect(ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "text", "text": "x" * MAX_MESSAGE_BYTES}))
        code, messages = await expect_close(ws)
    assert code == 1009 and messages == []


async def test_too_many_contexts_refuses_the_extra_one_only(ws_url):
    async with await SpeechStreamClient.connect(ws_url) as client:
        contexts = [client.context(f"c{i}") for i in range(8)]  # the server's --ws-max-contexts default
        for ctx in contexts:
            await ctx.send_text("Waiting for more")
        extra = client.context("c8")
        await extra.send_text("One too many.")
        event = await extra.next_event(timeout(30))
        assert isinstance(event, ContextError) and event.code == "too_many_contexts"
        for ctx in contexts[1:]:
            await ctx.cancel()
        await contexts[0].send_text(" text.")
        await contexts[0].end()
        check_done(await contexts[0].collect(timeout(60)))
        check_done(await speak(extra, "Room now.", timeout(60)))


async def test_too_much_buffered_text_ends_only_that_context(ws_url, http):
    before = await read_metrics(http)
    async with await SpeechStreamClient.connect(ws_url) as client:
        other = client.context("other")
        await other.send_text(BYSTANDER_TEXT)
        greedy = client.context("greedy")
        await greedy.send_text("word " * (MAX_INPUT_CHARS // 5 - 2))  # 990 characters: under the limit
        # 1,100 characters: over the limit by themselves, so however much of the first text was spoken
        # before this message is read (a fast engine had spoken nearly all of it once), it is too much.
        await greedy.send_text("more words " * 100)
        events = [e async for e in greedy.events(timeout(30))]
        assert isinstance(events[-1], ContextError) and events[-1].code == "input_too_long"
        await other.end()
        check_done(await other.collect(timeout(60)))
        assert client.queue("greedy").empty()
    await wait_for_metrics(
        http,
        lambda s: (
            metric(s, "uttera_requests_total", transport="websocket", status="error")
            >= metric(before, "uttera_requests_total", transport="websocket", status="error") + 1
        ),
    )


async def test_bad_context_parameters_answer_an_error_and_keep_the_socket(ws_url):
    async with await SpeechStreamClient.connect(ws_url) as client:
        for ctx, code in [
            (client.context("v", voice="nobody"), "unknown_voice"),
            (client.context("s", speed=9), "invalid_speed"),
        ]:
            await ctx.send_text("Hello.")
            event = await ctx.next_event(timeout(30))
            assert isinstance(event, ContextError) and event.code == code and event.context_id == ctx.id
        check_done(await speak(client.context("fine"), "Still fine.", timeout(60)))


async def test_idle_socket_closes_1000_unless_kept_alive(ws_url):
    idle_s = timeout(1.5)
    async with await SpeechStreamClient.connect(ws_url, idle_timeout_s=idle_s) as client:
        loop = asyncio.get_running_loop()
        until = loop.time() + 2 * idle_s
        while loop.time() < until:  # keepalives (pacing, not synchronization) hold the socket open
            await client.keepalive()
            await asyncio.sleep(idle_s / 6)
        result = await speak(client.context(), "Kept alive.", timeout(60))
        check_done(result)
        # synthesis does not count as idle, and the timer restarts when it ends; now say nothing
        closed_after = loop.time()
        assert await asyncio.wait_for(client.wait_closed(), timeout(30)) == (1000, "idle_timeout")
        assert loop.time() - closed_after >= 0.9 * idle_s


async def test_idle_close_drops_open_contexts(ws_url):
    async with await SpeechStreamClient.connect(ws_url, idle_timeout_s=timeout(0.5)) as client:
        ctx = client.context()
        await ctx.send_text("Never")  # short: under the minimum chunk, so the max wait does not speak it
        events = [e async for e in ctx.events(timeout(30))]
        assert events[-1].__class__.__name__ == "Closed" and events[-1].code == 1000
        assert not any(isinstance(e, Audio) for e in events)


@pytest.mark.parametrize("value", ["0", "-1", "nope", "100000"])
async def test_invalid_idle_timeout_is_refused_with_1008(ws_url, value):
    async with connect(f"{ws_url}?idle_timeout_s={value}") as ws:
        error = await recv_json(ws)
        assert error["code"] == "invalid_type" and "idle_timeout_s" in error["message"]
        code, _ = await expect_close(ws)
    assert code == 1008


async def test_connections_gauge(ws_url, http):
    base = metric(await read_metrics(http), "uttera_ws_connections")
    async with connect(ws_url), connect(ws_url):
        await wait_for_metrics(http, lambda s: metric(s, "uttera_ws_connections") == base + 2)
    await wait_for_metrics(http, lambda s: metric(s, "uttera_ws_connections") == base)
    samples = await read_metrics(http)
    assert ("uttera_stream_underruns_total", frozenset()) in samples
    assert ("uttera_cancellations_total", frozenset()) in samples
