"""Incremental text of one WebSocket context -> chunks to synthesize. Pure: no I/O; time is passed in.

Fragments may split words anywhere (LLM tokens). A chunk is cut:
- at a sentence or clause boundary, as the frontend's streaming `Segmenter` decides it (a clause mark
  closes a chunk once it is `min_chunk_chars` long; a sentence end always does; `max_chars` cuts at the
  last clause mark or space);
- when the oldest unspoken character has waited `max_wait_ms`: all of it if it ends a sentence (the
  segmenter only waits for the next word to rule out "Dr." or "3.5"), else up to the last word boundary
  if at least `min_chunk_chars` of complete words are there (a partial last word stays for later);
- on `flush()`: everything buffered.

Chunk offsets index the context's whole text (all fragments concatenated), so word timestamps can
point back into what the client sent.
"""

from collections import deque
from dataclasses import dataclass

from ..frontend import Segmenter, SegmenterConfig, TextSpan

_SENTENCE_ENDS = tuple(".!?\u2026") + tuple(f"{end}{close}" for end in ".!?\u2026" for close in "\"')]\u201d\u2019")


@dataclass(frozen=True, slots=True)
class ChunkerConfig:
    """max_wait_ms: longest time text may sit unspoken before a word-boundary cut, in ms.
    min_chunk_chars: shortest chunk cut at a clause mark or by the max wait (sentences may be shorter).
    max_chars: longest chunk, in characters."""

    max_wait_ms: float = 300.0
    min_chunk_chars: int = 20
    max_chars: int = 300

    def __post_init__(self) -> None:
        if self.max_wait_ms <= 0:
            raise ValueError(f"max_wait_ms must be positive, got {self.max_wait_ms}")
        if not 1 <= self.min_chunk_chars <= self.max_chars:
            raise ValueError(f"need 1 <= min_chunk_chars <= max_chars, got {self.min_chunk_chars}, {self.max_chars}")


@dataclass(frozen=True, slots=True)
class Chunk:
    """`text == whole_text[start:end]`, stripped and non-blank. `since`: when its oldest character arrived."""

    text: str
    start: int
    end: int
    since: float


class TextChunker:
    """One context's incoming text; `now` is a `time.monotonic()`-like clock in seconds."""

    def __init__(self, config: ChunkerConfig):
        self.config = config
        self._segmenter_config = SegmenterConfig(max_chars=config.max_chars, min_clause_chars=config.min_chunk_chars)
        self._segmenter = Segmenter(self._segmenter_config)
        self._origin = 0  # where the current segmenter's text starts in the whole text
        self._pending = ""  # text from self._done on that no chunk took yet
        self._done = 0  # end of the last chunk (or of skipped whitespace) in the whole text
        self._arrivals: deque[tuple[int, float]] = deque()  # (end offset, time) of pending fragments
        self._overdue = False  # max wait passed but no cut was possible: retry on every push

    @property
    def pending_chars(self) -> int:
        """Characters received that no chunk has taken yet."""
        return len(self._pending)

    @property
    def received_chars(self) -> int:
        return self._done + len(self._pending)

    def deadline(self) -> float | None:
        """When `tick` should be called next (the max wait of the oldest pending text), or None."""
        since = self._oldest()
        if since is None or self._overdue:
            return None
        return since + self.config.max_wait_ms / 1000.0

    def push(self, fragment: str, now: float) -> list[Chunk]:
        if not fragment:
            return []
        self._pending += fragment
        self._arrivals.append((self.received_chars, now))
        chunks = self._take(self._segmenter.push(fragment))
        if self._overdue:
            chunks += self.tick(now)
        return chunks

    def tick(self, now: float) -> list[Chunk]:
        """Cut at the last word boundary if the oldest pending text has waited `max_wait_ms`."""
        since = self._oldest()
        if since is None or now < since + self.config.max_wait_ms / 1000.0:
            return []
        pending = self._pending
        if pending.rstrip().endswith(_SENTENCE_ENDS):
            cut = len(pending.rstrip())  # a finished sentence whose next word is late: speak it whole
        else:
            cut = max(pending.rfind(c) for c in " \t\n\r")
            if cut < 0 or len(pending[:cut].strip()) < self.config.min_chunk_chars:
                self._overdue = True
                return []
        head = pending[:cut]
        start = self._done + len(head) - len(head.lstrip())
        text = head.strip()
        chunk = Chunk(text, start, start + len(text), since)
        self._skip(cut)
        self._origin = self._done  # a new segmenter for the rest: the old one saw text that is gone now
        self._segmenter = Segmenter(self._segmenter_config)
        return [chunk] + self._take(self._segmenter.push(self._pending))

    def flush(self) -> list[Chunk]:
        """Everything buffered, as chunks (the segmenter still splits it at its boundaries)."""
        chunks = self._take(self._segmenter.flush())
        if self._pending.strip():
            raise RuntimeError(f"TextChunker: Segmenter.flush() left text behind: {self._pending!r}")
        self._skip(len(self._pending))
        self._origin = self._done
        self._segmenter = Segmenter(self._segmenter_config)
        return chunks

    def _take(self, segments: list[TextSpan]) -> list[Chunk]:
        chunks = []
        for seg in segments:
            start, end = self._origin + seg.start, self._origin + seg.end
            if start < self._done:
                raise RuntimeError(f"TextChunker: a segment at {start} overlaps text already cut (up to {self._done})")
            since = self._oldest()
            assert since is not None  # a segment is non-blank pending text
            chunks.append(Chunk(seg.text, start, end, since))
            self._skip(end - self._done)
        return chunks

    def _oldest(self) -> float | None:
        """Arrival time of the oldest non-blank pending character; None when nothing is pending."""
        stripped = self._pending.lstrip()
        if not stripped:
            return None
        first = self.received_chars - len(stripped)
        while self._arrivals[0][0] <= first:
            self._arrivals.popleft()
        return self._arrivals[0][1]

    def _skip(self, n: int) -> None:
        self._pending = self._pending[n:]
        self._done += n
        self._overdue = False
        while self._arrivals and self._arrivals[0][0] <= self._done:
            self._arrivals.popleft()
