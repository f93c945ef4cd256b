"""TextChunker, pure: fragments and a fake clock in, chunks out."""

from hypothesis import given, settings
from hypothesis import strategies as st

from uttera_server.frontend import SegmenterConfig, split_sentences
from uttera_server.ws.text_chunker import Chunk, ChunkerConfig, TextChunker

CONFIG = ChunkerConfig(max_wait_ms=300, min_chunk_chars=10, max_chars=80)
TEXT = "Hello there, my friend. I paid $5 to Dr. Smith; he was glad, truly glad! And then we left"


def feed(chunker: TextChunker, fragments: list[str], now: float = 0.0) -> list[Chunk]:
    out = []
    for f in fragments:
        out += chunker.push(f, now)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_any_fragmentation_gives_the_segmenter_chunks(sizes):
    fragments, i = [], 0
    while i < len(TEXT):
        n = sizes[len(fragments) % len(sizes)]
        fragments.append(TEXT[i : i + n])
        i += n
    chunker = TextChunker(CONFIG)
    chunks = feed(chunker, fragments) + chunker.flush()
    expected = split_sentences(TEXT, SegmenterConfig(max_chars=80, min_clause_chars=10))
    assert [(c.text, c.start, c.end) for c in chunks] == [(s.text, s.start, s.end) for s in expected]
    assert all(TEXT[c.start : c.end] == c.text for c in chunks)


def test_a_sentence_is_cut_once_the_next_word_shows():
    chunker = TextChunker(CONFIG)
    assert feed(chunker, ["Hel", "lo the", "re."]) == []  # "re." may still be "re.5" or "re. he"
    (chunk,) = chunker.push(" Now", 0.1)
    assert (chunk.text, chunk.start, chunk.end, chunk.since) == ("Hello there.", 0, 12, 0.0)
    assert chunker.pending_chars == len(" Now")


def test_max_wait_cuts_at_the_last_word_boundary():
    chunker = TextChunker(CONFIG)
    assert chunker.deadline() is None
    feed(chunker, ["  and so we walked", " down the ro"], now=1.0)
    assert chunker.deadline() == 1.3
    assert chunker.tick(1.29) == []
    (chunk,) = chunker.tick(1.3)
    assert (chunk.text, chunk.start, chunk.since) == ("and so we walked down the", 2, 1.0)
    assert chunker.pending_chars == len(" ro")  # the partial word waits for the rest of itself
    (rest,) = chunker.push("ad.", 1.4) + chunker.flush()
    assert (rest.text, rest.start, rest.end) == ("road.", 28, 33)


def test_max_wait_needs_the_minimum_chunk_then_retries_on_every_push():
    chunker = TextChunker(CONFIG)
    chunker.push("Oh no", 0.0)
    assert chunker.tick(0.5) == []  # "Oh" is under min_chunk_chars
    assert chunker.deadline() is None  # overdue: nothing to wait for, the next push decides
    assert chunker.push(" it is", 0.6) == []
    (chunk,) = chunker.push(" raining ag", 0.7)
    assert chunk.text == "Oh no it is raining" and chunk.since == 0.0


def test_max_wait_speaks_a_finished_sentence_whatever_its_length():
    chunker = TextChunker(CONFIG)
    chunker.push("Anything else?", 0.0)  # the segmenter waits for the next word; the reply may be over
    assert chunker.tick(0.2) == []
    (chunk,) = chunker.tick(0.3)
    assert chunk.text == "Anything else?" and chunker.pending_chars == 0
    chunker.push(' He said "ok."  ', 1.0)
    assert [c.text for c in chunker.tick(1.3)] == ['He said "ok."']


def test_the_max_wait_clock_starts_with_the_oldest_unspoken_text():
    chunker = TextChunker(CONFIG)
    chunker.push("First one. Sec", 0.0)
    assert chunker.deadline() == 0.3  # "First one." waits for its next word
    chunker.push("ond part", 0.2)  # "First one." cut: "Second part" is from t=0 (its "Sec" arrived then)
    assert chunker.deadline() == 0.3
    chunker.push(". Third", 0.25)
    assert chunker.deadline() == 0.25 + 0.3


def test_flush_takes_everything_and_blank_text_gives_nothing():
    chunker = TextChunker(CONFIG)
    assert feed(chunker, ["   ", "\n"]) == [] and chunker.deadline() is None
    assert chunker.flush() == []
    chunker.push("Almost a sent", 0.0)
    (chunk,) = chunker.flush()
    assert (chunk.text, chunk.start) == ("Almost a sent", 4)
    assert chunker.pending_chars == 0 and chunker.received_chars == 17
    (after,) = chunker.push(" More words.", 1.0) + chunker.flush()
    assert (after.text, after.start, after.since) == ("More words.", 18, 1.0)


def test_long_text_is_cut_at_max_chars():
    chunker = TextChunker(CONFIG)
    chunks = chunker.push("word " * 40, 0.0) + chunker.flush()
    assert len(chunks) >= 3 and all(len(c.text) <= 80 for c in chunks)
