"""What a normalization rule returns, and helpers shared by the rule modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

CLOSERS = "\"')]}\u201d\u2019\u00bb"


@dataclass(frozen=True, slots=True)
class Token:
    """Characters ``[start, end)`` of the input and how they are spoken.

    ``words``: spoken words, possibly empty (silent characters). ``punct``: a pause mark that
    follows them ("" for none); "…" marks an ellipsis (a comma inside a sentence, a period at its end).
    ``spans``: optional ``(start, end)`` per word when words speak different parts of the token
    ("March 5" -> "March" from "March", "fifth" from "5"); empty means every word speaks all of it.
    """

    start: int
    end: int
    words: tuple[str, ...] = ()
    punct: str = ""
    spans: tuple[tuple[int, int], ...] = ()


Rule = Callable[[str, int], Optional[Token]]
"""``rule(text, pos)`` -> the token starting at ``pos``, or None when the rule does not apply."""


def ends_text(text: str, pos: int) -> bool:
    """True when only closing quotes/brackets and whitespace follow ``pos``."""
    return text[pos:].strip().strip(CLOSERS).strip() == ""


def final_period(text: str, end: int) -> str:
    """ "." if the token ending at ``end`` consumed a period that also ends the text, else ""."""
    return "." if end and text[end - 1] == "." and ends_text(text, end) else ""


def next_word_capitalized(text: str, pos: int) -> bool:
    """True when, after spaces, the next character is an upper-case letter."""
    rest = text[pos:].lstrip(" \t")
    return bool(rest) and rest[0].isupper()
