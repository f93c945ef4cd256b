"""The result of text normalization: spoken words, each tied to the characters it speaks.

``NormalizedText.text`` is the exact string fed to espeak-ng (and to the Piper teacher in training):
spoken words joined by single spaces, each followed by at most one pause mark (, ; : . ! ?).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

PAUSE_MARKS = ",;:.!?"
"""Punctuation that survives normalization; espeak-ng turns each into a phoneme of the same name."""

SENTENCE_MARKS = ".!?"

_CONNECTORS = frozenset("-\u2010\u2011'\u2019/._")
"""Characters that glue two spoken spans into one original word ("and/or", "J.R.R.", "x-ray")."""


@dataclass(frozen=True, slots=True)
class SpokenWord:
    """One word as spoken.

    ``text``: the spoken token, no whitespace ("five"). ``punct``: "" or one of ``PAUSE_MARKS``
    written right after it. ``source``: ``(start, end)`` character span, end exclusive, in the
    ORIGINAL text of the characters this word speaks ("$5" -> both "five" and "dollars").
    """

    text: str
    punct: str
    source: tuple[int, int]

    def __post_init__(self) -> None:
        if not self.text or any(ch.isspace() for ch in self.text):
            raise ValueError(f"spoken word must be non-empty without spaces, got {self.text!r}")
        if self.punct and self.punct not in PAUSE_MARKS:
            raise ValueError(f"punct must be one of {PAUSE_MARKS!r}, got {self.punct!r}")


class SourceWord(NamedTuple):
    """A word as the user wrote it: ``text == original[start:end]`` (a plain 3-tuple)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class NormalizedText:
    """Spoken words plus their rendering and their grouping into original words.

    ``text``: rendered string. ``offsets[i]``: ``(start, end)`` of ``words[i].text`` inside ``text``.
    ``source_words``: original words, in order. ``source_index[i]``: index in ``source_words`` of
    the original word that ``words[i]`` speaks.
    """

    words: tuple[SpokenWord, ...]
    text: str
    offsets: tuple[tuple[int, int], ...]
    source_words: tuple[SourceWord, ...]
    source_index: tuple[int, ...]

    @staticmethod
    def build(words: tuple[SpokenWord, ...] | list[SpokenWord], original: str, offset: int = 0) -> "NormalizedText":
        """Render ``words`` and group their sources into original words.

        ``original`` is the text the sources point into, shifted by ``offset`` characters
        (``source`` spans are ``offset``-based, so ``original[s - offset:e - offset]``).
        Consecutive spoken words with the same span, or spans joined by nothing or by one
        connector character (- ' / . _), belong to one original word.
        """
        words = tuple(words)
        parts: list[str] = []
        offsets: list[tuple[int, int]] = []
        pos = 0
        for word in words:
            if parts:
                parts.append(" ")
                pos += 1
            offsets.append((pos, pos + len(word.text)))
            parts.append(word.text + word.punct)
            pos += len(word.text) + len(word.punct)
        groups: list[list[int]] = []
        index: list[int] = []
        prev_source: tuple[int, int] | None = None
        for word in words:
            start, end = word.source
            if groups:
                group_end = groups[-1][1]
                gap = original[group_end - offset : start - offset]
                same = word.source == prev_source
                joined = start >= group_end and (gap == "" or (len(gap) == 1 and gap in _CONNECTORS))
                if same or joined:
                    groups[-1][1] = max(group_end, end)
                    index.append(len(groups) - 1)
                    prev_source = word.source
                    continue
            groups.append([start, end])
            index.append(len(groups) - 1)
            prev_source = word.source
        source_words = tuple(SourceWord(original[s - offset : e - offset], s, e) for s, e in groups)
        return NormalizedText(words, "".join(parts), tuple(offsets), source_words, tuple(index))
