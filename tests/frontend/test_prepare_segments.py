"""`prepare_segments` (the frontend one segment at a time) and the synthesis's first-sentence-first use of it
(uttera_server/synthesis/sentences.py)."""

import asyncio

import pytest

from uttera_server.errors import EmptyInput
from uttera_server.frontend import prepare, prepare_segments
from uttera_server.synthesis import sentences
from uttera_server.synthesis.sentences import first_and_later, sentence_stream

TEXT = "Hello there. The second one is a little longer than the first! And 3 more, at 4:30 pm."


def test_segments_concatenate_to_prepare():
    parts = list(prepare_segments(TEXT, offset=7))
    assert [s for part in parts for s in part] == prepare(TEXT, offset=7)
    assert len(parts) == 3 and all(parts)


def test_segments_are_prepared_lazily():
    segments = prepare_segments(TEXT)
    first = next(segments)
    assert [s.text for s in first] == ["Hello there."]
    assert len(list(segments)) == 2


def test_bad_budget_raises_at_the_call():
    with pytest.raises(ValueError):
        prepare_segments(TEXT, max_phonemes=3)


def test_first_and_later_split_the_text():
    async def run():
        first, later = await first_and_later(TEXT, 100, 400)
        streamed = [s async for s in sentence_stream(first, later)]
        return first, streamed

    first, streamed = asyncio.run(run())
    assert [s.text for s in first] == ["Hello there."]
    assert streamed == prepare(TEXT, offset=100)
    assert streamed[0].span[0] == 100 + TEXT.index("Hello")


@pytest.mark.parametrize("text", ["", "... !!! ???", "   "])
def test_nothing_to_speak_raises_empty_input(text):
    with pytest.raises(EmptyInput):
        asyncio.run(first_and_later(text, 0, 400))


def test_bad_budget_is_empty_input():
    with pytest.raises(EmptyInput):
        asyncio.run(first_and_later(TEXT, 0, 3))


def test_first_skips_segments_with_nothing_to_speak():
    spoken = prepare("Hello.")
    assert sentences._first(iter([[], [], spoken, []])) == spoken
    with pytest.raises(EmptyInput):
        sentences._first(iter([[], []]))
