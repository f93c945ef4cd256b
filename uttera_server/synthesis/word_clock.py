"""Word timestamps of one sentence from the model's per-step phoneme pointer. Pure: no I/O, no engine.

Each decode step voices the prompt phoneme its pointer names and lasts `step_ms` of audio
(`frames_per_step * hop_length / sample_rate / speed`: `MelTimeScale` stretches time by 1/speed). The
pointer never moves back, so a word can be placed as soon as the pointer has moved past it:

    start(word) = (first step whose pointer >= the word's first phoneme) * step_ms
    end(word)   = (first step whose pointer >  the word's last phoneme)  * step_ms

A word the pointer skipped, or one with no phoneme of its own, gets a zero-length span where the
pointer crossed it; words not reached when the sentence ends end with the sentence. So every word of
`Sentence.words` gets exactly one timing, in order, and timings never decrease.
"""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WordTiming:
    """A word as the user wrote it, placed on an audio timeline: from the synthesizer, its synthesis's (ms
    from the first sample of the `Synthesizer.stream` call; span in the text given to it, plus `text_offset`);
    on the WebSocket (`timestamps` messages, `client.Timestamps`), its context's (whole ms from the
    context's first sample; span in the context's text, all its fragments concatenated, in code points)."""

    word: str
    start_ms: float
    end_ms: float
    char_start: int  # [char_start, char_end)
    char_end: int


class SentenceWordClock:
    """Feed the pointer of every step with `step(pointer)`, then `finish(audio_ms)`; each call returns the
    words it completed, with times relative to the sentence's first audio sample."""

    def __init__(self, phoneme_words: Sequence[int | None], words: Sequence[tuple[str, int, int]], step_ms: float):
        """`phoneme_words[k]`: index into `words` of the word prompt phoneme k voices (None for ^, $, gaps);
        `words`: (text, char_start, char_end) as written; `step_ms`: audio per decode step."""
        if step_ms <= 0:
            raise ValueError(f"step_ms must be positive, got {step_ms}")
        self.words = list(words)
        self.step_ms = float(step_ms)
        n = len(words)
        first: list[int | None] = [None] * n
        last: list[int | None] = [None] * n
        for k, w in enumerate(phoneme_words):
            if w is None:
                continue
            if not 0 <= w < n:
                raise ValueError(f"phoneme {k} names word {w}, but the sentence has {n} words")
            if first[w] is None:
                first[w] = k
            last[w] = k
        # A word without phonemes takes the place of the next word that has some (or the sentence end).
        self._lo, self._hi = [0] * n, [0] * n
        following = len(phoneme_words)
        for w in range(n - 1, -1, -1):
            lo, hi = first[w], last[w]
            if lo is None or hi is None:  # both or neither: `last` is set wherever `first` is
                self._lo[w], self._hi[w] = following, following - 1
            else:
                self._lo[w], self._hi[w] = lo, hi
                following = lo
        self._steps = 0
        self._next = 0  # first word not emitted yet
        self._start: float | None = None  # start (in steps) of word self._next, once known
        self._pointer = -1
        self._finished = False

    def step(self, pointer: int) -> list[WordTiming]:
        """The step that voices prompt phoneme `pointer` begins; returns the words that ended before it."""
        if self._finished:
            raise RuntimeError("SentenceWordClock.step() after finish()")
        if pointer < self._pointer:
            raise ValueError(f"the pointer moved back from {self._pointer} to {pointer}")
        self._pointer = pointer
        out: list[WordTiming] = []
        k = self._steps
        while self._next < len(self.words):
            w = self._next
            if self._start is None:
                if pointer < self._lo[w]:
                    break
                self._start = k
            if pointer <= self._hi[w]:
                break
            out.append(self._timing(w, self._start * self.step_ms, k * self.step_ms))
        self._steps += 1
        return out

    def finish(self, audio_ms: float | None = None) -> list[WordTiming]:
        """The sentence ended: the words still open end with it. `audio_ms` (the sentence's exact audio
        length, when known) caps every time, since resampling for speed rounds the length down."""
        if self._finished:
            raise RuntimeError("SentenceWordClock.finish() called twice")
        self._finished = True
        end = self._steps * self.step_ms if audio_ms is None else min(self._steps * self.step_ms, audio_ms)
        out: list[WordTiming] = []
        while self._next < len(self.words):
            start = end if self._start is None else min(self._start * self.step_ms, end)
            out.append(self._timing(self._next, start, end))
        return out

    def _timing(self, w: int, start_ms: float, end_ms: float) -> WordTiming:
        text, char_start, char_end = self.words[w]
        self._next += 1
        self._start = None
        return WordTiming(text, start_ms, end_ms, char_start, char_end)
