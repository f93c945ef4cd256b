"""The playground at `/` in Debian's Chromium (driven by Playwright) against the real server: it loads with
no console error, audio really plays (the AudioContext clock advances and the analyser hears non-silent
samples), `#ttfa` shows a number, WebSocket word timings highlight words, and Stop silences playback."""

import re

import playwright.async_api as playwright_api  # the dev extras; never skipped: CI must run these tests
import pytest

from _server_process import timeout

CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make test` installs it (see the Makefile)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
LONG_TEXT = (
    "This sentence is long enough to keep the audio playing for a while, so that stopping it "
    "is something we can observe. "
) * 3


@pytest.fixture(scope="module")
async def browser(tmp_path_factory):
    async with playwright_api.async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True, args=ARGS
        )
        yield context
        await context.close()


@pytest.fixture
async def page(browser, base_url):
    """The playground, loaded; fails the test on any console error or uncaught exception."""
    page = await browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    await page.goto(base_url + "/")
    await page.wait_for_function("document.querySelectorAll('#format option').length > 1", timeout=timeout(15) * 1000)
    yield page
    await page.close()
    assert errors == []


async def wait_for(page, js: str, seconds: float = 30, arg=None):
    return await page.wait_for_function(js, arg=arg, timeout=timeout(seconds) * 1000, polling=50)


async def speak(page, text: str, transport: str = "http", fmt: str = "pcm", llm: bool = False) -> int:
    """Click #speak; returns #ttfa (ms) once audio is playing."""
    await page.fill("#text", text)
    await page.select_option("#transport", transport)
    await page.select_option("#format", fmt)
    await page.set_checked("#llm", llm)
    await page.click("#speak")
    await wait_for(page, "/^\\d+$/.test(document.getElementById('ttfa').textContent)")
    return int(await page.text_content("#ttfa"))


async def audio_clock_advances(page, seconds: float = 0.3) -> None:
    start = await page.evaluate("window.playground.audioTime")
    await wait_for(page, "t => window.playground.audioTime > t", arg=start + seconds)


async def test_page_loads_and_lists_voices_and_formats(page):
    formats = await page.eval_on_selector_all("#format option", "os => os.map(o => o.value)")
    assert formats[0] == "pcm" and {"mp3", "opus", "wav"} <= set(formats) and "mulaw" not in formats
    assert await page.eval_on_selector_all("#voice option", "os => os.length") >= 1
    assert await page.is_visible("#text") and await page.is_visible("#speak")


async def test_http_pcm_plays_and_shows_ttfa_and_rtf(page):
    ttfa = await speak(page, "Hello from the browser test. It streams over HTTP.")
    assert 0 < ttfa < timeout(10) * 1000
    await audio_clock_advances(page)
    await wait_for(page, "window.playground.peak > 1e-4")  # decoded samples reach the output: not silent
    await wait_for(page, "/^\\d+\\.\\d+$/.test(document.getElementById('rtf').textContent)")


async def test_websocket_llm_typing_highlights_words(page):
    await speak(page, "Words light up as they are spoken, one after another.", transport="ws", llm=True)
    await audio_clock_advances(page)
    await wait_for(page, "document.querySelectorAll('#words span.w.spoken').length >= 2")
    words = await page.eval_on_selector_all("#words span.w", "s => s.map(e => e.textContent)")
    assert words[:3] == ["Words", "light", "up"]
    await wait_for(page, "window.playground.peak > 1e-4")


async def test_compressed_format_plays_through_the_audio_element(page):
    ttfa = await speak(page, "This one is Ogg Opus, played by an audio element.", fmt="opus")
    assert ttfa > 0
    await wait_for(page, "document.getElementById('player').currentTime > 0.2")


async def test_stop_silences_playback(page):
    await speak(page, LONG_TEXT, transport="ws")
    await wait_for(page, "window.playground.peak > 1e-4")
    await page.click("#stop")
    assert re.match("stopped", await page.text_content("#status"))
    await audio_clock_advances(page, 0.2)  # let the analyser see what plays after the stop
    assert await page.evaluate("window.playground.level()") == 0
    assert not await page.evaluate("window.playground.playing")
    assert await page.is_disabled("#stop")
