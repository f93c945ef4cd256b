"""English text normalization: user text -> spoken words tied to the user's characters.

``normalize(text)`` scans ``text`` left to right. At each non-space position the rules of
:mod:`rules_numeric` / :mod:`rules_text` are tried in priority order; the first that applies emits a
:class:`~rules_common.Token`; otherwise one character is handled here (punctuation, symbols, quotes,
other numerals). Every spoken word keeps the span of the token that produced it.

Guarantees (checked by property tests): never raises on any ``str``; every letter or digit of the
input lies inside the source span of some spoken word; the output has at most one sentence mark
(. ! ?), at its very end, so espeak-ng reads it as ONE sentence. Feed it one sentence at a time (see
:mod:`segment`); sentence marks inside the text become commas.
"""

from __future__ import annotations

import unicodedata

from . import numbers as nw
from .lexicon import SYMBOLS
from .spoken_text import NormalizedText, SpokenWord
from .rules_common import CLOSERS, Rule, Token, ends_text
from .rules_numeric import NUMERIC_RULES
from .rules_text import TEXT_RULES

_RANK = {"": 0, ",": 1, ":": 2, ";": 2, ".": 3, "!": 3, "?": 4}
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
_PAUSING_BRACKETS = "()[]{}"
_SILENT = "\"'`*_~^|\\<>/#$€£¥₹¢" + CLOSERS + "\u201c\u2018\u00ab\u201e\u201a\u2039\u203a"
_NUMERIC_START = frozenset("-+.(\u2212'\u2019$€£¥₹")


def _rules_for(text: str, pos: int) -> tuple[Rule, ...]:
    ch = text[pos]
    if ch.isdigit() or ch in _NUMERIC_START:
        return NUMERIC_RULES if ch.isdigit() or pos + 1 < len(text) else ()
    if ch.isalpha():
        return TEXT_RULES
    return ()


def _numeral(ch: str) -> tuple[str, ...]:
    """A stand-alone numeric character that is not an ASCII-style digit: ½, ², Ⅻ, ①."""
    value = unicodedata.numeric(ch, None)
    if value is None:
        return ()
    if value == int(value):
        return tuple(nw.cardinal(int(value)))
    for den in range(2, 101):
        num = value * den
        if abs(num - round(num)) < 1e-9:
            return tuple(nw.fraction(int(round(num)), den))
    return ()


def _single(text: str, pos: int) -> Token:
    """One character no rule claimed: punctuation, a symbol, or something silent."""
    ch = text[pos]
    end = pos + 1
    prev_alnum = pos > 0 and text[pos - 1].isalnum()
    next_alnum = end < len(text) and text[end].isalnum()
    if ch == "." and text.startswith("..", end):
        while end < len(text) and text[end] == ".":
            end += 1
        return Token(pos, end, (), "…")
    if ch == "\u2026":
        return Token(pos, end, (), "…")
    if ch in ".!?":
        if ch == "." and prev_alnum and next_alnum:
            return Token(pos, end, ("dot",))
        return Token(pos, end, (), ch)
    if ch in ",;:":
        if prev_alnum and next_alnum:
            return Token(pos, end)
        return Token(pos, end, (), ch)
    if ch in _DASHES:
        if prev_alnum or next_alnum and not (pos > 0 and text[pos - 1].isspace()):
            return Token(pos, end)
        return Token(pos, end, (), ",")
    if ch in _PAUSING_BRACKETS:
        return Token(pos, end, (), ",")
    if ch == "/" and prev_alnum and next_alnum:
        return Token(pos, end, ("slash",))
    if ch == "#" and next_alnum and text[end].isdigit():
        return Token(pos, end, ("number",))
    if ch == "~" and next_alnum and text[end].isdigit():
        return Token(pos, end, ("about",))
    if ch in SYMBOLS:
        return Token(pos, end, SYMBOLS[ch])
    if ch in "\u00b2\u00b3" and prev_alnum and not text[pos - 1].isdigit():
        return Token(pos, end, ("squared",) if ch == "\u00b2" else ("cubed",))
    if ch.isalnum() or unicodedata.category(ch)[0] == "N":
        return Token(pos, end, _numeral(ch) or (ch,))
    return Token(pos, end)


def tokens(text: str) -> list[Token]:
    """Split ``text`` into tokens covering every non-space character, in order."""
    out: list[Token] = []
    pos = 0
    n = len(text)
    while pos < n:
        if text[pos].isspace():
            pos += 1
            continue
        token = None
        for rule in _rules_for(text, pos):
            token = rule(text, pos)
            if token is not None:
                break
        if token is None or token.end <= pos:
            token = _single(text, pos)
        out.append(token)
        pos = token.end
    return out


def _merge_punct(old: str, new: str) -> str:
    return new if _RANK[new] > _RANK[old] else old


def normalize(text: str, offset: int = 0) -> NormalizedText:
    """Normalize one sentence of English ``text`` into spoken words.

    ``offset``: added to every source span (the position of ``text`` in a longer document).
    Returns a :class:`NormalizedText` whose ``words`` may be empty (nothing speakable).
    Examples: "Dr. Smith paid $3.50." -> "Doctor Smith paid three dollars and fifty cents.";
    "It's 3:30 pm!" -> "It's three thirty PM!".
    """
    words: list[SpokenWord] = []
    puncts: list[str] = []
    for token in tokens(text):
        spans = token.spans or [(token.start, token.end)] * len(token.words)
        for spoken, (start, end) in zip(token.words, spans):
            words.append(SpokenWord(spoken, "", (start + offset, end + offset)))
            puncts.append("")
        if token.punct and puncts:
            punct = token.punct
            if punct == "…":
                punct = "." if ends_text(text, token.end) else ","
            puncts[-1] = _merge_punct(puncts[-1], punct)
    last = len(words) - 1
    out: list[SpokenWord] = []
    for i, (word, punct) in enumerate(zip(words, puncts)):
        if i != last and punct and punct in ".!?":
            punct = ","
        out.append(SpokenWord(word.text, punct, word.source) if punct else word)
    return NormalizedText.build(out, text, offset)
