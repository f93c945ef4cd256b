"""Incremental text in, audio out before the reply is complete; flush ordering; word timestamps.
Against the real server and engine (the session `server` fixture)."""

import pytest

from _agent import PARAGRAPH, audio_ms, check_done, joined, kinds, speak, token_feed
from _server_process import timeout
from uttera_server.client import Audio, Flushed, SpeechStreamClient, Started, Timestamps
from uttera_server.frontend import prepare
from uttera_server.ws.protocol import MAX_CONTEXT_WAIT_MS


async def test_audio_starts_before_end_on_a_token_feed(ws_url):
    tokens = token_feed(PARAGRAPH, seed=1)
    # enough tokens to complete the first sentence and show the next word, nothing more
    cut = next(i for i in range(len(tokens)) if "".join(tokens[:i]).startswith("Sure, I can help with that. Y"))
    async with await SpeechStreamClient.connect(ws_url) as client:
        reply = client.context("reply")
        for token in tokens[:cut]:
            await reply.send_text(token)
        first = [await reply.next_event(timeout(30))]
        while not isinstance(first[-1], Audio):  # the first sentence speaks while the reply is still coming
            first.append(await reply.next_event(timeout(30)))
        assert isinstance(first[0], Started)
        for token in tokens[cut:]:
            await reply.send_text(token)
        await reply.end()
        rest = await reply.collect(timeout(60))
    done = check_done(joined(first, rest))
    assert done.characters == len(PARAGRAPH)
    words = [w for e in first + rest.events if isinstance(e, Timestamps) for w in e.words]
    assert [w.word for w in words] == [w.text for s in prepare(PARAGRAPH) for w in s.words]


async def test_max_wait_speaks_text_without_a_boundary(ws_url):
    async with await SpeechStreamClient.connect(ws_url) as client:
        ctx = client.context()
        await ctx.send_text("and then we walked slowly down the long ro")  # no sentence or clause end
        events = [await ctx.next_event(timeout(30))]
        while not isinstance(events[-1], Audio):  # spoken after --ws-max-wait-ms, without flush or end
            events.append(await ctx.next_event(timeout(30)))
        words = [w.word for e in events if isinstance(e, Timestamps) for w in e.words]
        assert "ro" not in words  # the partial last word waits for the rest of itself
        await ctx.send_text("ad.")
        await ctx.end()
        rest = await ctx.collect(timeout(60))
    check_done(joined(events, rest))
    words += [w.word for w in rest.words]
    assert words == ["and", "then", "we", "walked", "slowly", "down", "the", "long", "road"]


async def test_a_context_with_a_longer_max_wait_holds_text_without_a_boundary(ws_url):
    async with await SpeechStreamClient.connect(ws_url) as client:
        ctx = client.context(max_wait_ms=MAX_CONTEXT_WAIT_MS)
        await ctx.send_text("and then we walked slowly down the long ro")
        started = await ctx.next_event(timeout(30))
        assert isinstance(started, Started)
        with pytest.raises(TimeoutError):  # the server's own wait (300 ms) would have spoken by now
            await ctx.next_event(1.5)
        await ctx.send_text("ad.")
        await ctx.end()
        result = joined([started], await ctx.collect(timeout(60)))
    check_done(result)
    assert [w.word for w in result.words] == ["and", "then", "we", "walked", "slowly", "down", "the", "long", "road"]


async def test_flushed_comes_after_the_audio_it_covers_and_before_later_audio(ws_url):
    first, second = "The first part of the reply", " and a second part that comes after it"
    async with await SpeechStreamClient.connect(ws_url) as client:
        ctx = client.context("f")
        await ctx.send_text(first)
        await ctx.flush()
        await ctx.send_text(second)  # its request starts while the first part's audio still streams
        await ctx.flush()
        await ctx.end()
        result = await ctx.collect(timeout(60))
    check_done(result)
    assert kinds(result) == ["Started", "Audio", "Flushed", "Audio", "Flushed", "Done"]
    split = next(i for i, e in enumerate(result.events) if isinstance(e, Flushed))
    before_ms = audio_ms(sum(len(e.pcm) for e in result.events[:split] if isinstance(e, Audio)), result.sample_rate)
    words = result.words
    assert [w.word for w in words] == first.split() + second.split()
    first_words = [w for w in words if w.char_end <= len(first)]
    assert len(first_words) == len(first.split())
    assert all(w.end_ms <= before_ms + 1 for w in first_words)  # the first part's audio precedes `flushed`
    assert all(w.start_ms >= before_ms - 1 for w in words[len(first_words) :])  # and the second's follows it


async def test_flush_of_nothing_is_acknowledged_at_once(ws_url):
    async with await SpeechStreamClient.connect(ws_url) as client:
        ctx = client.context("idle")
        await ctx.flush()
        assert await ctx.next_event(timeout(30)) == Flushed("idle")


async def test_word_timestamps_cover_every_word_as_written(ws_url):
    text = "I paid $5 to Dr. Smith, then we left at 3:30 p.m. with 2 friends!"
    async with await SpeechStreamClient.connect(ws_url) as client:
        normal, fast = client.context("normal"), client.context("fast", speed=2.0)
        for fragment in token_feed(text, seed=3):
            await normal.send_text(fragment)
            await fast.send_text(fragment)
        await normal.end()
        await fast.end()
        results = [await normal.collect(timeout(60)), await fast.collect(timeout(60))]
    expected = [w.text for s in prepare(text) for w in s.words]
    assert "$5" in expected and "Dr." in expected and "3:30 p.m." in expected
    for result in results:
        done = check_done(result)
        words = result.words
        assert [w.word for w in words] == expected
        assert all(text[w.char_start : w.char_end] == w.word for w in words)
        assert all(0 <= w.start_ms <= w.end_ms <= done.audio_ms for w in words)
        assert all(a.end_ms <= b.start_ms for a, b in zip(words, words[1:]))
        assert words[-1].end_ms >= done.audio_ms - 500  # the last word ends near the end of the audio
    normal_done, fast_done = results[0].final, results[1].final
    assert 0.4 < fast_done.audio_ms / normal_done.audio_ms < 0.6  # speed 2 halves the time...
    assert 0.4 < results[1].words[-1].end_ms / results[0].words[-1].end_ms < 0.6  # ...and the timestamps


async def test_timestamps_arrive_with_the_audio(ws_url):
    """Each timestamps message comes before the audio frame holding the end of its words."""
    async with await SpeechStreamClient.connect(ws_url) as client:
        result = await speak(client.context(), "One sentence here. And a second one, a little longer.", timeout(60))
    check_done(result)
    received = 0.0
    for event in result.events:
        if isinstance(event, Audio):
            received += audio_ms(len(event.pcm), result.sample_rate)
        elif isinstance(event, Timestamps):
            assert all(w.end_ms >= received - 1 for w in event.words)
