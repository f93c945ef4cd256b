"""Normalized text -> the model's prompt: Piper phoneme ids with the word each phoneme voices.

The ids are exactly what the Piper teacher (``PiperVoice.phonemize`` + ``phonemes_to_ids``) produces
for the same text, minus pads. Piper's layout interleaves the pad id after BOS and after every
phoneme: ``^ _ p1 _ p2 _ ... pn _ $``; ours is ``^ p1 p2 ... pn $`` (:func:`with_pads` restores
Piper's). Phonemes missing from the id map are skipped, as Piper skips them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from . import espeak
from .align import phoneme_word_labels
from .spoken_text import NormalizedText
from .phoneme_table import PhonemeTable, en_us

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Phonemized:
    """``phoneme_ids``: ``[bos, phonemes..., eos]`` without pads. ``phoneme_words[k]``: index into
    ``NormalizedText.source_words`` of the word that id ``k`` voices (None for ^, $ and spaces;
    a pause mark belongs to the word before it). ``phonemes[k]``: the symbol behind id ``k``.
    ``espeak_sentences``: how many sentences espeak-ng saw (1 for normalized text; more would mean
    Piper synthesizes several chunks, and their phonemes are concatenated here).
    ``spoken_words[k]``: like ``phoneme_words`` but indexing ``NormalizedText.words``."""

    phoneme_ids: list[int]
    phoneme_words: list[int | None]
    phonemes: list[str]
    espeak_sentences: int
    spoken_words: list[int | None]


def phonemize(normalized: NormalizedText, table: PhonemeTable | None = None) -> Phonemized:
    """Phoneme ids of ``normalized.text`` and the original word behind each id.

    Thread-safe (espeak-ng calls are serialized, see :mod:`espeak`); ~0.6 ms per typical sentence
    on one CPU core, ~0.5 ms of it inside the espeak-ng lock (two calls: the sentence, then its
    words alone for the alignment).
    """
    table = table or en_us()
    sentences = espeak.sentence_phonemes(normalized.text, table.espeak_voice)
    phonemes = [ph for sentence in sentences for ph in sentence]
    solo = espeak.word_phonemes([w.text for w in normalized.words], table.espeak_voice)
    spoken = phoneme_word_labels(phonemes, solo)
    ids: list[int] = list(table.bos_ids)
    words: list[int | None] = [None] * len(ids)
    spoken_ids: list[int | None] = [None] * len(ids)
    symbols: list[str] = [table.bos] * len(ids)
    for ph, label in zip(phonemes, spoken):
        ph_ids = table.id_map.get(ph)
        if ph_ids is None:
            _LOGGER.debug("phoneme %r is not in the id map; skipped as Piper does", ph)
            continue
        source = None if label is None else normalized.source_index[label]
        ids.extend(ph_ids)
        words.extend([source] * len(ph_ids))
        spoken_ids.extend([label] * len(ph_ids))
        symbols.extend([ph] * len(ph_ids))
    ids.extend(table.eos_ids)
    words.extend([None] * len(table.eos_ids))
    spoken_ids.extend([None] * len(table.eos_ids))
    symbols.extend([table.eos] * len(table.eos_ids))
    return Phonemized(ids, words, symbols, len(sentences), spoken_ids)


def with_pads(phoneme_ids: list[int], table: PhonemeTable | None = None) -> list[int]:
    """Piper's layout from ours: a pad after every id except the final EOS."""
    pad = list((table or en_us()).pad_ids)
    out: list[int] = []
    for k, i in enumerate(phoneme_ids):
        out.append(i)
        if k != len(phoneme_ids) - 1:
            out.extend(pad)
    return out


def strip_pads(piper_ids: list[int], table: PhonemeTable | None = None) -> list[int]:
    """Our layout from Piper's: drop the pad after BOS and after each phoneme (inverse of
    :func:`with_pads`; positional, so a phoneme that shares the pad id survives)."""
    pad = list((table or en_us()).pad_ids)
    out: list[int] = []
    k = 0
    while k < len(piper_ids):
        out.append(piper_ids[k])
        k += 1
        if piper_ids[k : k + len(pad)] == pad and k < len(piper_ids) - 1:
            k += len(pad)
    return out
