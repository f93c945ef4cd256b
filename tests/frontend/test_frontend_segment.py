"""Segmentation: sentence/clause boundaries, and streamed input == whole-text segmentation."""

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from uttera_server.frontend import (
    TextSpan,
    Segmenter,
    SegmenterConfig,
    SegmenterClosedError,
    split_sentences,
)

CASES = [
    ("Hello world. How are you? I am fine!", ["Hello world.", "How are you?", "I am fine!"]),
    ("Dr. Smith is here. He is late.", ["Dr. Smith is here.", "He is late."]),
    ("Mr. and Mrs. Jones left.", ["Mr. and Mrs. Jones left."]),
    ("It costs 3.5 dollars. Cheap.", ["It costs 3.5 dollars.", "Cheap."]),
    ("Pi is 3.14159 roughly", ["Pi is 3.14159 roughly"]),
    ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
    ("J.R.R. Tolkien wrote it.", ["J.R.R. Tolkien wrote it."]),
    ("I said... well, never mind. OK?", ["I said... well, never mind.", "OK?"]),
    ("Wait... What? Fine.", ["Wait... What?", "Fine."]),
    ("Wait\u2026 what", ["Wait\u2026 what"]),
    ("e.g. this one. And i.e. that one.", ["e.g. this one.", "And i.e. that one."]),
    ('"Stop!" he said. "Go." She went.', ['"Stop!" he said.', '"Go."', "She went."]),
    ("(Really?) Yes.", ["(Really?)", "Yes."]),
    ("line one\nline two", ["line one", "line two"]),
    ("one\r\ntwo\n\n\nthree", ["one", "two", "three"]),
    ("- item one\n- item two", ["- item one", "- item two"]),
    ("1. Buy milk\n2. Eat it. Done.", ["1. Buy milk", "2. Eat it.", "Done."]),
    ("No. 5 is good. No. It is not.", ["No. 5 is good.", "No.", "It is not."]),
    ("Call me at 3 p.m. Then leave.", ["Call me at 3 p.m.", "Then leave."]),
    ("Visit example.com now. Thanks.", ["Visit example.com now.", "Thanks."]),
    ("the end.", ["the end."]),
    ("lower. case next", ["lower. case next"]),
    ("Wow!!! Really?!", ["Wow!!!", "Really?!"]),
    ("!!! Hello.", ["!!! Hello."]),
    ("Hello. !!!", ["Hello.", "!!!"]),
    ("   padded   text.   ", ["padded   text."]),
    ("", []),
    ("   \n  ", []),
    ("Version 2.0. Next", ["Version 2.0.", "Next"]),
    ("In 1984. Then 1985.", ["In 1984.", "Then 1985."]),
    ("Ask St. Peter. He knows.", ["Ask St. Peter.", "He knows."]),
    ("U.S. is big. Yes.", ["U.S. is big.", "Yes."]),
    ("apples, pears, etc. Then more.", ["apples, pears, etc.", "Then more."]),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:30] or "<empty>" for c in CASES])
def test_split_sentences(text: str, expected: list[str]) -> None:
    segments = split_sentences(text)
    assert [s.text for s in segments] == expected
    for s in segments:
        assert text[s.start : s.end] == s.text


def test_clause_split_only_past_min_length() -> None:
    cfg = SegmenterConfig(max_chars=300, min_clause_chars=20)
    text = "short, clause; then a much longer clause follows here, and more: end"
    got = [s.text for s in split_sentences(text, cfg)]
    assert got == ["short, clause; then a much longer clause follows here,", "and more: end"]


def test_long_sentence_is_cut_at_clause_then_space_then_hard() -> None:
    cfg = SegmenterConfig(max_chars=40, min_clause_chars=40)
    text = "aaaa bbbb cccc dddd, eeee ffff gggg hhhh iiii jjjj kkkk"
    got = [s.text for s in split_sentences(text, cfg)]
    assert got == ["aaaa bbbb cccc dddd, eeee ffff gggg", "hhhh iiii jjjj kkkk"]
    assert [s.text for s in split_sentences("x" * 95, cfg)] == ["x" * 40, "x" * 40, "x" * 15]


def test_default_limits_hold_for_long_text() -> None:
    text = ("word " * 200).strip() + ". " + "clause, " * 100
    for s in split_sentences(text):
        assert 0 < len(s.text) <= 300


def test_push_after_flush_fails_loudly() -> None:
    seg = Segmenter()
    seg.push("Hi.")
    seg.flush()
    with pytest.raises(SegmenterClosedError):
        seg.push("more")
    with pytest.raises(SegmenterClosedError):
        seg.flush()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        SegmenterConfig(max_chars=1)
    with pytest.raises(ValueError):
        SegmenterConfig(max_chars=100, min_clause_chars=101)


def test_segments_arrive_as_soon_as_decidable() -> None:
    seg = Segmenter()
    assert seg.push("Hello there") == []
    assert seg.push(".") == []  # could be "there.5" or "there.com"
    assert seg.push(" ") == []  # next word may be lower case
    assert seg.push("W") == [TextSpan("Hello there.", 0, 12)]
    assert seg.push("orld\nNext") == [TextSpan("World", 13, 18)]
    assert seg.flush() == [TextSpan("Next", 19, 23)]


def _incremental(text: str, cuts: list[int], config: SegmenterConfig | None = None) -> list[TextSpan]:
    seg = Segmenter(config)
    out: list[TextSpan] = []
    prev = 0
    for cut in sorted(set(cuts)) + [len(text)]:
        out += seg.push(text[prev:cut])
        prev = cut
    return out + seg.flush()


LLM_TOKEN = re.compile(r" ?[A-Za-z]+| ?\d+|\s+|.", re.S)

INCREMENTAL_TEXTS = [c[0] for c in CASES] + [
    "The quick brown fox jumps over the lazy dog. " * 8 + "Done, really; done: yes.",
    "Dr. J. R. R. Tolkien, Ph.D., wrote 3.5 books... maybe! Who knows? Not me.\nNew line. ",
]


@pytest.mark.parametrize("text", INCREMENTAL_TEXTS)
def test_token_by_token_text_equals_whole_text(text: str) -> None:
    whole = split_sentences(text)
    tokens = LLM_TOKEN.findall(text)
    assert "".join(tokens) == text
    cuts = [sum(len(t) for t in tokens[:i]) for i in range(1, len(tokens))]
    assert _incremental(text, cuts) == whole
    assert _incremental(text, list(range(1, len(text)))) == whole  # character by character


FRAGMENT_ALPHABET = st.sampled_from(list("ab AB.!?,;:\n\"')3\u2026") + ["Dr", "e.g", " J.", "..."])


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.lists(FRAGMENT_ALPHABET, max_size=60).map("".join),
    st.lists(st.integers(min_value=0, max_value=200), max_size=20),
    st.sampled_from(
        [
            SegmenterConfig(),
            SegmenterConfig(max_chars=12, min_clause_chars=6),
            SegmenterConfig(max_chars=5, min_clause_chars=1),
        ]
    ),
)
@example("Dr. Smith. Hi", [3, 4], SegmenterConfig())
def test_any_fragmentation_equals_whole_text(text: str, cuts: list[int], config: SegmenterConfig) -> None:
    whole = split_sentences(text, config)
    assert _incremental(text, [c for c in cuts if c < len(text)], config) == whole
    covered: set[int] = set()
    last_end = 0
    for s in whole:
        assert s.text and s.text == text[s.start : s.end] and s.text == s.text.strip()
        assert s.start >= last_end and len(s.text) <= config.max_chars
        last_end = s.end
        covered.update(range(s.start, s.end))
    for k, ch in enumerate(text):
        if not ch.isspace():
            assert k in covered, f"{ch!r} at {k} dropped"


@settings(max_examples=100, deadline=None, database=None)
@given(st.text(max_size=120), st.lists(st.integers(min_value=0, max_value=120), max_size=10))
def test_arbitrary_unicode_text(text: str, cuts: list[int]) -> None:
    assert _incremental(text, [c for c in cuts if c < len(text)]) == split_sentences(text)
