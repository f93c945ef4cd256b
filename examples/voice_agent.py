"""A voice agent's side of `WebSocket /v1/audio/speech/stream`: stream an LLM-like token feed, save the audio.

    uttera serve --model models/tiny-dev &            # or `make serve`
    python examples/voice_agent.py -o reply.wav       # prints latency and word timestamps

The "LLM" is a paragraph split into random token-sized fragments sent with small random delays, as a
model streaming its reply would. Audio arrives while tokens are still being sent; it is written to a WAV
file as it comes. `--barge-in-ms N` cancels the reply once N ms of audio have arrived, as an agent does
when the user starts talking; the words heard so far are then those whose end_ms <= N.
"""

import argparse
import asyncio
import random
import sys
import time
import wave
from pathlib import Path

from uttera_server.client import Audio, Cancelled, Done, SpeechStreamClient, Started, Timestamps

REPLY = (
    "Sure, I can help with that. Your order of three books shipped this morning, and it should arrive by "
    "Friday. The total was $42.50, including tax. Dr. Smith's note is in the box too. Anything else?"
)


def llm_tokens(text: str, rng: random.Random) -> list[str]:
    """`text` in fragments of 1 to 6 characters, cut anywhere, as LLM tokens are."""
    tokens, i = [], 0
    while i < len(text):
        n = rng.randint(1, 6)
        tokens.append(text[i : i + n])
        i += n
    return tokens


async def send_reply(ctx, tokens: list[str], rng: random.Random, delay_ms: float, log) -> None:
    for token in tokens:
        await ctx.send_text(token)
        await asyncio.sleep(rng.uniform(0.5, 1.5) * delay_ms / 1000)  # the LLM's pace
    await ctx.end()
    log("sent end")


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    t0 = time.monotonic()

    def log(what: str) -> None:
        print(f"{1000 * (time.monotonic() - t0):7.0f} ms  {what}")

    async with await SpeechStreamClient.connect(args.url) as client:
        ctx = client.context("reply", speed=args.speed)
        sender = asyncio.create_task(send_reply(ctx, llm_tokens(args.text, rng), rng, args.delay_ms, log))
        out, received_ms, words = None, 0.0, []
        try:
            async for event in ctx.events(timeout=60):
                match event:
                    case Started(sample_rate=rate):
                        out = wave.open(str(args.output), "wb")
                        out.setnchannels(1)
                        out.setsampwidth(2)
                        out.setframerate(rate)
                        log(f"started at {rate} Hz")
                    case Audio(pcm=pcm):
                        if received_ms == 0:
                            log("first audio")
                        out.writeframes(pcm)
                        received_ms += 1000 * len(pcm) / 2 / out.getframerate()
                        if args.barge_in_ms and received_ms >= args.barge_in_ms and not sender.done():
                            sender.cancel()
                            await ctx.cancel()
                            log(f"barge-in after {received_ms:.0f} ms of audio: cancel")
                    case Timestamps(words=new):
                        words += new
                    case Done(audio_ms=ms, characters=n):
                        log(f"done: {ms} ms of audio for {n} characters")
                    case Cancelled():
                        log("cancelled")
                    case _:
                        log(f"{event}")
                        return 1
        finally:
            if out is not None:
                out.close()
            if not sender.done():
                sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    print(f"\nwrote {args.output}; word timestamps (ms from the start of the audio):")
    for w in words:
        heard = "" if not args.barge_in_ms or w.end_ms <= received_ms else "   (not heard)"
        print(f"  {w.start_ms:6d} {w.end_ms:6d}  {w.word}{heard}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="ws://127.0.0.1:8000/v1/audio/speech/stream")
    parser.add_argument("-o", "--output", type=Path, default=Path("reply.wav"))
    parser.add_argument("--text", default=REPLY)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--delay-ms", type=float, default=25.0, help="mean delay between tokens")
    parser.add_argument("--barge-in-ms", type=float, default=0.0, help="cancel after this much audio (0: never)")
    parser.add_argument("--seed", type=int, default=0)
    sys.exit(asyncio.run(main(parser.parse_args())))
