"""User text -> per-sentence model prompts: ``prepare(text)`` = segment -> normalize -> g2p.

``Sentence.normalized`` is exactly the text training feeds to the Piper teacher: for it, Piper
produces one sentence whose ids, pads removed, equal ``Sentence.phoneme_ids`` (see
:func:`teacher_text`, :func:`g2p.with_pads`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .errors import NothingToSpeakError
from .g2p import Phonemized, phonemize
from .normalize import normalize
from .spoken_text import NormalizedText, SourceWord, SpokenWord
from .phoneme_table import en_us
from .segment import TextSpan, SegmenterConfig, split_sentences

MIN_PHONEMES = 32
"""Smallest accepted ``max_phonemes``: one spoken word (<= 24 characters) must fit."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """One model prompt.

    ``text``: the original text of ``span``; ``span``: ``(start, end)`` in the caller's text
    (plus ``offset``), end exclusive, Python str indices. ``normalized``: what is spoken, and what
    the teacher reads. ``phoneme_ids``: ``[^, phonemes..., $]`` (Piper ids, no pads).
    ``phoneme_words[k]``: index into ``words`` voiced by id ``k``; None for ^, $ and word gaps.
    ``words``: original words ``(text, start, end)`` in caller coordinates, in order.
    """

    text: str
    span: tuple[int, int]
    normalized: str
    phoneme_ids: list[int]
    phoneme_words: list[int | None]
    words: list[SourceWord]

    def __post_init__(self) -> None:
        if len(self.phoneme_ids) != len(self.phoneme_words):
            raise ValueError("phoneme_ids and phoneme_words must have the same length")


def teacher_text(sentence: Sentence) -> str:
    """The text to give the Piper teacher for ``sentence`` (its ``normalized`` field)."""
    return sentence.normalized


def prepare(
    text: str,
    max_phonemes: int = 400,
    *,
    offset: int = 0,
    allow_empty: bool = False,
    segmenter: SegmenterConfig | None = None,
) -> list[Sentence]:
    """Split ``text`` into sentences ready for the model.

    Each sentence has at most ``max_phonemes`` ids (^ and $ included); longer ones are cut at a
    clause mark, else between words, and re-phonemized. ``offset`` shifts every span (use the
    ``TextSpan.start`` of a streamed segment). Sentences espeak-ng finds no phoneme for are
    dropped. Raises :class:`NothingToSpeakError` when nothing is speakable, unless
    ``allow_empty`` (then returns ``[]``); ``ValueError`` when ``max_phonemes < MIN_PHONEMES``.
    """
    sentences = [s for part in prepare_segments(text, max_phonemes, offset=offset, segmenter=segmenter) for s in part]
    if not sentences and not allow_empty:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise NothingToSpeakError(f"nothing to speak in {shown!r}: send text with at least one letter or digit")
    return sentences


def prepare_segments(
    text: str, max_phonemes: int = 400, *, offset: int = 0, segmenter: SegmenterConfig | None = None
) -> Iterator[list[Sentence]]:
    """`prepare`, one segment at a time: each segment's sentences (empty when it has nothing to speak),
    normalized and phonemized only when asked for, so a caller can start on the first sentence while the
    rest of a long text is still to do. Raises ``ValueError`` when ``max_phonemes < MIN_PHONEMES``."""
    if max_phonemes < MIN_PHONEMES:
        raise ValueError(f"max_phonemes must be >= {MIN_PHONEMES}, got {max_phonemes}")
    return _segments(text, max_phonemes, offset, segmenter)


def _segments(text: str, max_phonemes: int, offset: int, segmenter: SegmenterConfig | None) -> Iterator[list[Sentence]]:
    for segment in split_sentences(text, segmenter):
        norm = normalize(segment.text, offset + segment.start)
        if not norm.words:
            yield []
            continue
        parts = _fit(list(norm.words), segment, offset, max_phonemes)
        yield [s for s in _sentences(parts, segment, offset) if _has_phonemes(s)]


def _has_phonemes(sentence: Sentence) -> bool:
    """False for letters espeak-ng has no pronunciation for (the prompt would be just ^ $)."""
    table = en_us()
    return len(sentence.phoneme_ids) > len(table.bos_ids) + len(table.eos_ids)


def _fit(
    words: list[SpokenWord], segment: TextSpan, offset: int, max_phonemes: int
) -> list[tuple[NormalizedText, Phonemized]]:
    norm = NormalizedText.build(words, segment.text, offset + segment.start)
    result = phonemize(norm)
    if len(result.phoneme_ids) <= max_phonemes:
        return [(norm, result)]
    if len(words) == 1:
        word = words[0]
        if len(word.text) < 2:
            raise NothingToSpeakError(f"cannot fit {word.text!r} into {max_phonemes} phonemes")
        half = len(word.text) // 2
        words = [SpokenWord(word.text[:half], "", word.source), SpokenWord(word.text[half:], word.punct, word.source)]
        cut = 1
    else:
        cut = _cut(words, result, max_phonemes)
    return _fit(words[:cut], segment, offset, max_phonemes) + _fit(words[cut:], segment, offset, max_phonemes)


def _cut(words: list[SpokenWord], result: Phonemized, budget: int) -> int:
    """How many leading words to keep: prefer the last clause mark that fits, then the last
    original-word boundary that fits, then any word boundary that fits (at least one word)."""
    prefix = [0] * (len(words) + 1)  # prefix[c]: ids voicing words[:c]
    for label in result.spoken_words:
        if label is not None:
            prefix[label + 1] += 1
    for c in range(1, len(prefix)):
        prefix[c] += prefix[c - 1]
    slack = 8  # ^, $, a pause mark and context changes at the cut; re-checked by _fit anyway
    candidates = [c for c in range(1, len(words)) if prefix[c] + slack <= budget] or [1]
    preferences: tuple[Callable[[int], bool], ...] = (
        lambda c: words[c - 1].punct in ",;:" and words[c - 1].punct != "",
        lambda c: words[c - 1].source != words[c].source,
    )
    for wanted in preferences:
        good = [c for c in candidates if wanted(c)]
        if good:
            return good[-1]
    return candidates[-1]


def _sentences(parts: list[tuple[NormalizedText, Phonemized]], segment: TextSpan, offset: int) -> list[Sentence]:
    base = offset + segment.start
    out: list[Sentence] = []
    for i, (norm, result) in enumerate(parts):
        start = base if i == 0 else norm.source_words[0].start
        if i == len(parts) - 1:
            end = base + len(segment.text)
        else:
            end = max(parts[i + 1][0].source_words[0].start, norm.source_words[-1].end)
            end = start + len(segment.text[start - base : end - base].rstrip())
        out.append(
            Sentence(
                text=segment.text[start - base : end - base],
                span=(start, end),
                normalized=norm.text,
                phoneme_ids=result.phoneme_ids,
                phoneme_words=result.phoneme_words,
                words=list(norm.source_words),
            )
        )
    return out
