"""The WebSocket outbox: audio bounded by watermarks, control messages never wait, cancel drops audio."""

import asyncio

import pytest

from _server_process import timeout
from uttera_server.ws.outbox import Outbox, OutboxClosed, Outgoing


async def test_producers_wait_above_high_until_below_low():
    box = Outbox(high_bytes=10, low_bytes=4)
    box.put_audio("a", b"x" * 6)
    await asyncio.wait_for(box.wait_writable(), timeout(5))  # 6 <= high
    box.put_audio("a", b"x" * 6)  # crosses high: admitted, producers now wait
    blocked = asyncio.create_task(box.wait_writable())
    await asyncio.sleep(0)
    assert not blocked.done()
    box.put_control(Outgoing("control never waits"))
    assert (await box.get()).data == b"x" * 6  # 6 bytes left: above low, still waiting
    await asyncio.sleep(0)
    assert not blocked.done()
    await box.get()  # 0 bytes left
    await asyncio.wait_for(blocked, timeout(5))
    box.put_audio("a", b"x" * 6)
    assert [(await box.get()).data for _ in range(2)] == ["control never waits", b"x" * 6]


async def test_drop_audio_keeps_other_contexts_and_control():
    box = Outbox(high_bytes=100, low_bytes=50)
    box.put_audio("a", b"1")
    box.put_control(Outgoing("msg"))
    box.put_audio("b", b"2")
    box.put_audio("a", b"3")
    assert box.drop_audio("a") == 2
    assert box.audio_bytes == 1
    assert [(await box.get()).data for _ in range(2)] == ["msg", b"2"]


async def test_close_wakes_waiters_and_refuses_puts():
    box = Outbox(high_bytes=1, low_bytes=1)
    box.put_audio("a", b"xx")
    blocked = asyncio.create_task(box.wait_writable())
    await asyncio.sleep(0)
    box.close()
    with pytest.raises(OutboxClosed):
        await asyncio.wait_for(blocked, timeout(5))
    with pytest.raises(OutboxClosed):
        box.put_audio("a", b"y")
    assert (await box.get()).data == b"xx"  # what was queued can still be sent
    with pytest.raises(OutboxClosed):
        await box.get()


def test_watermarks_are_checked():
    with pytest.raises(ValueError):
        Outbox(high_bytes=1, low_bytes=2)
