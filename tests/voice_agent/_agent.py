"""Helpers for the voice-agent tests: LLM-like token feeds and checks on collected contexts."""

import random

from uttera_server.client import Audio, ContextHandle, ContextResult, Done, Flushed, Timestamps

PARAGRAPH = (
    "Sure, I can help with that. Your order of three books shipped this morning, and it should arrive "
    "by Friday. The total was $42.50, including tax. Is there anything else you need today"
)


def token_feed(text: str, seed: int = 0) -> list[str]:
    """`text` split into LLM-token-sized fragments (1 to 6 characters, splitting words anywhere)."""
    rng = random.Random(seed)
    fragments, i = [], 0
    while i < len(text):
        n = rng.randint(1, 6)
        fragments.append(text[i : i + n])
        i += n
    return fragments


async def speak(ctx: ContextHandle, text: str, timeout_s: float) -> ContextResult:
    """Send `text` in one message, end, and collect the context."""
    await ctx.send_text(text)
    await ctx.end()
    return await ctx.collect(timeout_s)


def audio_ms(pcm_bytes: int, sample_rate: int) -> float:
    return 1000 * pcm_bytes / 2 / sample_rate


def check_done(result: ContextResult) -> Done:
    """The context ended with `done`, whose audio_ms matches the PCM received."""
    assert isinstance(result.final, Done), result.final
    assert result.sample_rate is not None, "no started event"
    assert result.pcm and abs(result.final.audio_ms - audio_ms(len(result.pcm), result.sample_rate)) <= 1
    return result.final


def kinds(result: ContextResult) -> list[str]:
    """Event kinds in order, timestamps left out and runs of audio collapsed: ["Started", "Audio", ...]."""
    out: list[str] = []
    for e in result.events:
        name = type(e).__name__
        if isinstance(e, Timestamps) or (isinstance(e, Audio) and out and out[-1] == name):
            continue
        out.append(name)
    return out


def joined(events: list, rest: ContextResult) -> ContextResult:
    """`rest` with `events` (read from the same context before it) in front."""
    events = events + rest.events
    return ContextResult(events, b"".join(e.pcm for e in events if isinstance(e, Audio)), rest.final)


__all__ = [
    "PARAGRAPH",
    "Audio",
    "Done",
    "Flushed",
    "Timestamps",
    "audio_ms",
    "check_done",
    "joined",
    "kinds",
    "speak",
    "token_feed",
]
