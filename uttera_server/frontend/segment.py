"""Sentence and clause segmentation of text that arrives in pieces (pure: no I/O, no espeak-ng).

``Segmenter.push(fragment)`` accepts any fragments (LLM tokens, partial words) and returns the
segments completed so far; ``flush()`` returns the rest. A boundary is decided only once the text it
depends on has arrived, so any split of the input into fragments gives exactly the segments of
``split_sentences(whole_text)``.

Boundaries, in order of preference:
- sentence end: . ! ? (runs, then closing quotes/brackets) followed by whitespace and a next word
  that does not start with a lower-case letter; not after a title abbreviation ("Dr."), an initial
  ("J."), a list marker at the start of a segment ("1. Buy milk"), inside a number ("3.5") or at
  an ellipsis ("..." / "…" never ends a sentence);
- newline: always;
- clause: , ; : followed by whitespace once the segment is ``min_clause_chars`` long;
- length: at ``max_chars`` the segment is cut at its last clause mark (in its second half), else
  its last space, else hard.
A segment is only closed by a sentence, newline or clause boundary once it holds a letter or digit,
so stray punctuation joins the next segment.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import SegmenterClosedError
from .lexicon import ABBREVIATIONS
from .rules_common import CLOSERS

_TERMINATORS = ".!?\u2026"
_CLAUSE_MARKS = ",;:"
_NEWLINES = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


@dataclass(frozen=True, slots=True)
class SegmenterConfig:
    """``max_chars``: longest segment, in characters (Python str indices); 300 keeps ordinary
    English under ~400 phonemes. ``min_clause_chars``: a segment at least this long is closed at
    the next clause mark (, ; :)."""

    max_chars: int = 300
    min_clause_chars: int = 200

    def __post_init__(self) -> None:
        if self.max_chars < 2:
            raise ValueError(f"max_chars must be >= 2, got {self.max_chars}")
        if not 1 <= self.min_clause_chars <= self.max_chars:
            raise ValueError(
                f"min_clause_chars must be in 1..max_chars ({self.max_chars}), got {self.min_clause_chars}"
            )


@dataclass(frozen=True, slots=True)
class TextSpan:
    """``text == whole[start:end]``, ``whole`` being all the text pushed: a stripped, non-empty piece of it
    (str indices)."""

    text: str
    start: int
    end: int


class SegmenterState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class _Wait(Exception):
    """The decision at the scan position needs characters that have not arrived yet."""


class Segmenter:
    """Incremental segmenter; see the module docstring. Not thread-safe (one per text, e.g. per WebSocket context)."""

    def __init__(self, config: SegmenterConfig | None = None) -> None:
        self.config = config or SegmenterConfig()
        self.state = SegmenterState.OPEN
        self._buf = ""  # text from absolute offset self._base on
        self._base = 0
        self._start = 0  # absolute start of the open segment (first non-space char)
        self._pos = 0  # absolute scan position
        self._alnum = False  # the open segment holds a letter or digit
        self._final = False

    def push(self, fragment: str) -> list[TextSpan]:
        """Append ``fragment``; return the segments it completed, in order."""
        if self.state is SegmenterState.CLOSED:
            raise SegmenterClosedError("push() after flush(): start a new Segmenter for new text")
        self._buf += fragment
        return self._scan()

    def flush(self) -> list[TextSpan]:
        """End of the text: return all remaining segments. The segmenter is closed afterwards."""
        if self.state is SegmenterState.CLOSED:
            raise SegmenterClosedError("flush() called twice")
        self._final = True
        out = self._scan()
        out += self._emit(self._base + len(self._buf), self._base + len(self._buf))
        self.state = SegmenterState.CLOSED
        return out

    # -- scanning ---------------------------------------------------------------------------

    def _ch(self, pos: int) -> str:
        """Character at absolute ``pos``; "" at the end of finished text; raises _Wait if
        more text may still bring it."""
        k = pos - self._base
        if k < len(self._buf):
            return self._buf[k]
        if self._final:
            return ""
        raise _Wait

    def _emit(self, end: int, next_start: int) -> list[TextSpan]:
        text = self._buf[self._start - self._base : end - self._base].rstrip()
        seg = [TextSpan(text, self._start, self._start + len(text))] if text.strip() else []
        self._buf = self._buf[next_start - self._base :]
        self._base = self._start = self._pos = next_start
        self._alnum = False
        return seg

    def _scan(self) -> list[TextSpan]:
        out: list[TextSpan] = []
        cfg = self.config
        while True:
            try:
                ch = self._ch(self._pos)
            except _Wait:
                return out
            if ch == "":
                return out
            pos = self._pos
            if pos == self._start and ch.isspace():
                rest = self._buf[pos - self._base :]
                skip = len(rest) - len(rest.lstrip())
                self._start = self._pos = self._base = pos + skip
                self._buf = rest[skip:]
                continue
            if pos - self._start >= cfg.max_chars:
                cut, resume = self._cut_point(pos)
                out += self._emit(cut, resume)
                continue
            try:
                step = self._decide(pos, ch)
            except _Wait:
                return out
            limit = self._start + cfg.max_chars
            if (isinstance(step, tuple) and step[0] > limit) or (isinstance(step, int) and step > limit):
                cut, resume = self._cut_point(limit)  # a long run of marks crossed the limit
                out += self._emit(cut, resume)
            elif step is None:
                self._alnum = self._alnum or ch.isalnum()
                self._pos = pos + 1
            elif isinstance(step, tuple):
                out += self._emit(*step)
            else:
                self._pos = step

    def _decide(self, pos: int, ch: str) -> tuple[int, int] | int | None:
        """A boundary ``(segment end, next start)``, a position to skip to, or None (next char)."""
        if ch in _NEWLINES:
            return (pos, pos + 1) if self._alnum else None
        if ch in _TERMINATORS:
            return self._terminator(pos)
        if ch in _CLAUSE_MARKS and self._alnum and pos + 1 - self._start >= self.config.min_clause_chars:
            nxt = self._ch(pos + 1)
            if nxt == "" or nxt.isspace():
                return (pos + 1, pos + 1)
        return None

    def _terminator(self, pos: int) -> tuple[int, int] | int:
        # Each look-ahead loop gives up past the length limit (returning a skip beyond it, which
        # _scan turns into a length cut), so a flood of marks or spaces is never buffered whole.
        limit = self._start + self.config.max_chars
        run_end = pos
        while run_end <= limit and (c := self._ch(run_end)) and c in _TERMINATORS:
            run_end += 1
        close_end = run_end
        while close_end <= limit and (c := self._ch(close_end)) and c in CLOSERS:
            close_end += 1
        if close_end > limit:
            return close_end
        after = self._ch(close_end)
        if after == "" or not after.isspace():
            return close_end
        nxt_pos = close_end
        while nxt_pos <= limit and (c := self._ch(nxt_pos)) and c.isspace() and c not in _NEWLINES:
            nxt_pos += 1
        if nxt_pos > limit:
            return nxt_pos
        nxt = self._ch(nxt_pos)
        if not self._alnum or not self._ends_sentence(pos, run_end, nxt):
            return close_end
        return (close_end, close_end)

    def _ends_sentence(self, pos: int, run_end: int, nxt: str) -> bool:
        run = self._buf[pos - self._base : run_end - self._base]
        if nxt == "" or nxt in _NEWLINES:
            return True
        if nxt.islower():
            return False
        if "!" in run or "?" in run:
            return True
        if run != ".":
            return False  # ellipsis
        word_start = pos
        while word_start > self._start and not self._buf[word_start - 1 - self._base].isspace():
            word_start -= 1
        word = self._buf[word_start - self._base : pos - self._base].lstrip("\"'([{\u201c\u2018")
        if word.isdigit() and word_start == self._start:
            return False  # a list marker: "1. Buy milk"
        entry = ABBREVIATIONS.get(word.lower().rstrip("."))
        if entry is not None and entry.title and (not entry.before_digit or nxt.isdigit()):
            return False
        letters = word.replace(".", "")
        if letters.isalpha() and all(len(p) == 1 for p in word.split(".")) and letters[-1].isupper():
            return False  # initials: J. / J.R.R.
        return True

    def _cut_point(self, pos: int) -> tuple[int, int]:
        """Where to cut a segment that reached ``max_chars`` at absolute ``pos``."""
        text = self._buf[self._start - self._base : pos - self._base]
        half = len(text) // 2
        for k in range(len(text) - 1, half - 1, -1):
            if text[k] in _CLAUSE_MARKS and k + 1 < len(text) and text[k + 1].isspace():
                return self._start + k + 1, self._start + k + 1
        k = max(text.rfind(" "), text.rfind("\t"))
        if k > 0:
            return self._start + k, self._start + k
        return pos, pos


def split_sentences(text: str, config: SegmenterConfig | None = None) -> list[TextSpan]:
    """All segments of ``text`` (the offline form of :class:`Segmenter`)."""
    segmenter = Segmenter(config)
    return segmenter.push(text) + segmenter.flush()
