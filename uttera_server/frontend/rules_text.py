"""Normalization rules for text that starts with a letter: URLs, e-mail addresses, abbreviations,
acronyms, initials and plain words.

Each rule is ``rule(text, pos) -> Token | None`` (see :mod:`rules_common`); :data:`TEXT_RULES`
lists them in priority order. Letters are never dropped: URLs and addresses are spelled out piece by
piece, unknown words pass through for espeak-ng to pronounce.
"""

from __future__ import annotations

import re
import unicodedata

from . import numbers as nw
from .lexicon import ABBREVIATIONS, MONTH_BY_NAME, MONTH_PATTERN, MONTHS, TLDS, URL_SYMBOLS
from .rules_common import Rule, Token, final_period, next_word_capitalized

MAX_WORD_CHARS = 24
"""Longer letter runs are cut into pieces of this many characters, so that one spoken word stays
well under the phoneme budget of a sentence even when espeak-ng spells it letter by letter."""

_URL_TAIL = r"[^\s<>\"'()\[\]{}]*[^\s<>\"'()\[\]{}.,;:!?]"
_TLD = "|".join(TLDS)
_URL = re.compile(
    rf"(?:(?:https?|ftp)://|www\.){_URL_TAIL}"
    rf"|(?i:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.(?:{_TLD}))"
    rf"(?![\w@])(?:/{_URL_TAIL})?",
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]*[A-Za-z0-9]@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w.@-]*\w)")
_URL_PART = re.compile(r"[A-Za-z]+|\d+|.", re.S)
_SPECIAL = {
    "C++": ("C", "plus", "plus"),
    "C#": ("C", "sharp"),
    "F#": ("F", "sharp"),
    "and/or": ("and", "or"),
    "w/o": ("without",),
}
_SPECIAL_RE = re.compile(r"(?:C\+\+|C#|F#|and/or|w/o)(?![\w#+])")
_MONTH_DAY = re.compile(rf"({MONTH_PATTERN})(\.?\s+)(\d{{1,2}})(?:st|nd|rd|th)?(?![\w:/]|[.,]\d)")
_DOTTED = re.compile(r"[^\W\d_]+(?:\.[^\W\d_]+)*\.?")
_ACRONYM = re.compile(r"(?:[^\W\d_]\.){2,}|(?:[^\W\d_]\.)+[^\W\d_](?![\w.])")


def _spell_address(piece: str) -> list[str]:
    words: list[str] = []
    for part in _URL_PART.findall(piece):
        if part.isalpha():
            words += ["w", "w", "w"] if part.lower() == "www" else [part]
        elif part.isdigit():
            words += nw.integer(part) if len(part) <= 4 and part[0] != "0" else nw.digits(part)
        elif part in URL_SYMBOLS:
            words.append(URL_SYMBOLS[part])
        elif part.isalnum():
            words.append(part)
    return words


def url(text: str, pos: int) -> Token | None:
    """https://www.example.com/a -> h t t p s colon slash slash w w w dot example dot com slash a."""
    if pos and (text[pos - 1].isalnum() or text[pos - 1] in "@."):
        return None
    m = _URL.match(text, pos)
    if not m:
        return None
    found = m[0]
    words: list[str] = []
    scheme, sep, rest = found.partition("://")
    if sep:
        words += [*scheme.lower(), "colon", "slash", "slash"]
        found = rest
    words += _spell_address(found)
    return Token(pos, m.end(), tuple(words))


def email(text: str, pos: int) -> Token | None:
    """john.doe@example.com -> john dot doe at example dot com."""
    if pos and (text[pos - 1].isalnum() or text[pos - 1] in "._%+-"):
        return None
    m = _EMAIL.match(text, pos)
    if not m:
        return None
    return Token(pos, m.end(), tuple(_spell_address(m[0])))


def special(text: str, pos: int) -> Token | None:
    """C++, C#, F#, and/or, w/o."""
    if pos and text[pos - 1].isalnum():
        return None
    m = _SPECIAL_RE.match(text, pos)
    return Token(pos, m.end(), _SPECIAL[m[0]]) if m else None


def month_day(text: str, pos: int) -> Token | None:
    """March 5 / Jan. 5th -> March fifth / January fifth (the year, if any, is read on its own)."""
    if pos and text[pos - 1].isalnum():
        return None
    m = _MONTH_DAY.match(text, pos)
    if not m or not 1 <= int(m[3]) <= 31:
        return None
    month = MONTHS[MONTH_BY_NAME[m[1].lower()] - 1]
    day = nw.ordinal(int(m[3]))
    month_end = m.end(1) + (1 if m[2].startswith(".") else 0)
    spans = ((pos, month_end),) + ((m.start(3), m.end()),) * len(day)
    return Token(pos, m.end(), (month, *day), final_period(text, m.end()), spans)


def abbreviation(text: str, pos: int) -> Token | None:
    """Dr. Smith -> Doctor Smith, Main St. -> Main Street, e.g. -> for example, vs -> versus."""
    if pos and text[pos - 1].isalnum():
        return None
    m = _DOTTED.match(text, pos)
    if not m:
        return None
    found = m[0]
    key = found.rstrip(".").lower()
    entry = ABBREVIATIONS.get(key)
    if entry is None:
        return None
    has_period = found.endswith(".")
    end = m.end()
    if not has_period and (not entry.bare or (end < len(text) and text[end] in ".'\u2019-")):
        return None
    rest = text[end:].lstrip(" \t")
    if entry.before_digit and not (rest[:1].isdigit()):
        return None
    words = entry.words
    if entry.alt is not None and not next_word_capitalized(text, end):
        if not has_period:
            return None
        words = entry.alt
    if entry.title and not has_period and not next_word_capitalized(text, end) and key != "vs":
        return None
    return Token(pos, end, words, final_period(text, end))


def acronym(text: str, pos: int) -> Token | None:
    """U.S.A. -> U S A; J. (an initial) -> J, its period dropped unless it ends the text."""
    if pos and text[pos - 1].isalnum():
        return None
    m = _ACRONYM.match(text, pos)
    if m:
        letters = [ch.upper() for ch in m[0] if ch != "."]
        return Token(pos, m.end(), tuple(letters), final_period(text, m.end()))
    ch = text[pos]
    if ch.isupper() and text[pos + 1 : pos + 2] == "." and text[pos + 2 : pos + 3] in (" ", "\t"):
        if next_word_capitalized(text, pos + 2):
            return Token(pos, pos + 2, (ch,))
    return None


def _is_word_char(ch: str) -> bool:
    return ch.isalpha() or unicodedata.category(ch)[0] == "M"


def word(text: str, pos: int) -> Token | None:
    """A run of letters (with combining marks, inner apostrophes and hyphens), NFKC-folded;
    runs over ``MAX_WORD_CHARS`` are cut into several spoken words."""
    if not text[pos].isalpha():
        return None
    end = pos + 1
    n = len(text)
    while end < n:
        ch = text[end]
        if _is_word_char(ch):
            end += 1
        elif ch in "'\u2019-\u2010\u2011" and end + 1 < n and text[end + 1].isalpha():
            end += 1
        else:
            break
    folded = unicodedata.normalize("NFKC", text[pos:end]).replace("\u2019", "'")
    folded = "".join(ch for ch in folded if _is_word_char(ch) or ch in "'-")
    folded = folded.replace("\u2010", "-").replace("\u2011", "-").strip("'-")
    if not folded:
        folded = text[pos]
    if folded.lower() == "vs":
        return Token(pos, end, ("versus",))
    return Token(pos, end, tuple(_cut_long(folded)))


def _cut_long(folded: str) -> list[str]:
    """Pieces of at most MAX_WORD_CHARS: whole hyphen parts where possible, else hard cuts."""
    if len(folded) <= MAX_WORD_CHARS:
        return [folded]
    pieces: list[str] = []
    for part in folded.split("-"):
        part = part.strip("'")
        if pieces and len(pieces[-1]) + 1 + len(part) <= MAX_WORD_CHARS:
            pieces[-1] += "-" + part
        else:
            pieces += [part[i : i + MAX_WORD_CHARS] for i in range(0, len(part), MAX_WORD_CHARS)]
    return [piece for piece in pieces if piece] or [folded[:MAX_WORD_CHARS]]


TEXT_RULES: tuple[Rule, ...] = (url, email, special, month_day, abbreviation, acronym, word)
"""Tried in this order at a position whose character is a letter or digit."""
