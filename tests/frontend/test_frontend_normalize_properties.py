"""Property tests: normalization never raises, never silently drops letters or digits, and always
yields text that espeak-ng reads as one sentence."""

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from uttera_server.frontend import normalize
from uttera_server.frontend.lexicon import ABBREVIATIONS
from uttera_server.frontend.spoken_text import PAUSE_MARKS

FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

ASCIIISH = st.text(
    alphabet=st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789 .,;:!?'\"-/$%&@#()\u2019\u2014\u2026\n")
    ),
    max_size=80,
)


def _check_invariants(text: str) -> None:
    norm = normalize(text)
    covered = [False] * len(text)
    prev_start = -1
    for word in norm.words:
        start, end = word.source
        assert 0 <= start < end <= len(text)
        assert start >= prev_start
        prev_start = start
        assert word.text and not any(ch.isspace() for ch in word.text)
        assert not any(ch in PAUSE_MARKS or ch in "[]" for ch in word.text)
        for k in range(start, end):
            covered[k] = True
    for k, ch in enumerate(text):
        if ch.isalnum():
            assert covered[k], f"{ch!r} at {k} of {text!r} is not spoken"
    # at most one sentence mark, at the very end: espeak-ng sees one sentence
    inner = norm.text[:-1]
    assert not any(mark in inner for mark in ".!?"), norm.text
    assert "[[" not in norm.text
    assert norm.text == " ".join(w.text + w.punct for w in norm.words)
    for i, word in enumerate(norm.words):
        a, b = norm.offsets[i]
        assert norm.text[a:b] == word.text
        original = norm.source_words[norm.source_index[i]]
        assert original.start <= word.source[0] and word.source[1] <= original.end
    for original in norm.source_words:
        assert text[original.start : original.end] == original.text
    for left, right in zip(norm.source_words, norm.source_words[1:]):
        assert left.end <= right.start, (left, right)  # original words never overlap
    assert list(norm.source_index) == sorted(norm.source_index)


@FAST
@given(st.text(max_size=60))
@example("")
@example("\u0301\u0301")
@example("\ufdfa")
@example("\u00bd\u2167\u2460")
@example("x" * 100)
@example("[[ h\u0259l\u02c8o\u028a ]]")
def test_arbitrary_unicode_never_raises_and_keeps_every_letter(text: str) -> None:
    _check_invariants(text)


@FAST
@given(ASCIIISH)
@example("$5 at 3:30pm on 5/3/2024, e.g. Dr. Smith's 1st.")
def test_asciiish_text_keeps_every_letter(text: str) -> None:
    _check_invariants(text)


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10).filter(
    lambda w: w not in ABBREVIATIONS and w != "www"
)
SEPARATOR = st.sampled_from([" ", ", ", ". ", "! ", " - ", "/", "-", "'", "@", ".", " & ", "\u2014", "... "])


@FAST
@given(st.lists(st.tuples(WORD, SEPARATOR), min_size=1, max_size=8))
def test_ascii_letter_runs_survive(pieces: list[tuple[str, str]]) -> None:
    text = "".join(w + sep for w, sep in pieces)
    out = normalize(text).text.lower()
    compact = out.replace(" ", "")  # words over MAX_WORD_CHARS are cut into pieces
    for run in re.findall(r"[A-Za-z]+", text):
        if run.lower() not in ABBREVIATIONS and run.lower() != "www":
            assert run.lower() in compact, (run, text, out)


@FAST
@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_any_integer_is_spoken_without_digits(n: int) -> None:
    out = normalize(str(n)).text
    assert out and not any(ch.isdigit() for ch in out)
    grouped = normalize(f"{n:,}").text
    assert grouped and not any(ch.isdigit() for ch in grouped)
