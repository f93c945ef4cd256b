"""Word timestamps from the phoneme pointer, and the playout clock behind the underrun metric (pure)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uttera_server.frontend import prepare
from uttera_server.ws.playout import PlayoutClock
from uttera_server.synthesis.word_clock import SentenceWordClock, WordTiming

WORDS = [("ab", 0, 2), ("cd", 3, 5)]
LABELS = [None, 0, 0, None, 1, 1, None]  # ^ a b _ c d $


def run(clock: SentenceWordClock, pointers: list[int], audio_ms: float | None = None) -> list[tuple]:
    out = []
    for p in pointers:
        out += clock.step(p)
    out += clock.finish(audio_ms)
    return [(w.word, w.start_ms, w.end_ms) for w in out]


def test_a_word_spans_the_steps_that_voice_it():
    clock = SentenceWordClock(LABELS, WORDS, step_ms=10)
    assert [clock.step(p) for p in (0, 1, 2, 2)] == [[], [], [], []]
    assert clock.step(3) == [WordTiming("ab", 10, 40, 0, 2)]  # out as soon as the pointer leaves it
    assert [clock.step(p) for p in (4, 5)] == [[], []]
    assert clock.step(6) == [WordTiming("cd", 50, 70, 3, 5)]
    assert clock.finish() == []


def test_the_sentence_end_closes_open_words_and_caps_times():
    assert run(SentenceWordClock(LABELS, WORDS, 10), [0, 1, 2, 4]) == [("ab", 10, 30), ("cd", 30, 40)]
    assert run(SentenceWordClock(LABELS, WORDS, 10), [0, 1, 2, 4], audio_ms=35) == [("ab", 10, 30), ("cd", 30, 35)]
    assert run(SentenceWordClock(LABELS, WORDS, 10), [0]) == [("ab", 10, 10), ("cd", 10, 10)]


def test_skipped_words_and_words_without_phonemes_get_zero_length():
    assert run(SentenceWordClock(LABELS, WORDS, 10), [0, 3, 6]) == [("ab", 10, 10), ("cd", 20, 20)]
    words = [("$", 0, 1), ("ab", 2, 4), ("!", 5, 6)]
    labels = [None, 1, 1, None]  # "$" and "!" have no phoneme of their own
    assert run(SentenceWordClock(labels, words, 10), [0, 1, 2, 3]) == [("$", 10, 10), ("ab", 10, 30), ("!", 40, 40)]


def test_misuse_fails_loudly():
    clock = SentenceWordClock(LABELS, WORDS, 10)
    clock.step(2)
    with pytest.raises(ValueError, match="moved back from 2 to 1"):
        clock.step(1)
    clock.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        clock.step(3)
    with pytest.raises(ValueError, match="names word 5"):
        SentenceWordClock([None, 5], WORDS, 10)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_every_word_once_in_order_monotonic(data):
    text = data.draw(
        st.sampled_from(
            [
                "I paid $5 to Dr. Smith, then we left.",
                "Hello world.",
                "It's 3:30 p.m. on Jan. 5th; see you!",
                "The iPhone costs $1,299.99 (or so).",
            ]
        )
    )
    sentence = data.draw(st.sampled_from(prepare(text)))
    n = len(sentence.phoneme_ids)
    pointers, p = [0], 0
    while p < n - 1 and len(pointers) < 3 * n:
        p = min(n - 1, p + data.draw(st.integers(0, 3)))
        pointers.append(p)
    timings = []
    clock = SentenceWordClock(sentence.phoneme_words, sentence.words, step_ms=11.6)
    for p in pointers:
        timings += clock.step(p)
    timings += clock.finish(len(pointers) * 11.6)
    assert [(w.word, w.char_start, w.char_end) for w in timings] == [tuple(w) for w in sentence.words]
    assert all(text[w.char_start : w.char_end] == w.word for w in timings)
    assert all(0 <= w.start_ms <= w.end_ms for w in timings)
    assert all(a.end_ms <= b.start_ms for a, b in zip(timings, timings[1:]))


def test_playout_clock_counts_late_audio_unless_the_text_came_late():
    clock = PlayoutClock()
    assert not clock.sent(1.0, now=10.0, ready_since=9.0)  # plays until 11
    assert not clock.sent(1.0, now=10.5, ready_since=9.0)  # until 12
    assert clock.sent(1.0, now=12.5, ready_since=9.0)  # 0.5 s of silence: an underrun; until 13.5
    assert not clock.sent(1.0, now=20.0, ready_since=19.0)  # the text came after the audio ran out
    assert clock.end == 21.0
