"""Serialized access to espeak-ng through piper-tts, exactly as Piper calls it.

espeak-ng is one global C library per process (one current voice, non-reentrant), and piper-tts
already guards its own calls with the module lock ``piper.voice._ESPEAK_PHONEMIZER_LOCK``. We take
that same lock and share Piper's ``EspeakPhonemizer`` singleton, so that our calls and a
``PiperVoice`` in the same process (the training teacher) never interleave and espeak-ng is
initialized once. Importing piper-tts imports onnxruntime (~0.3 s) but loads no model.

piper-tts 1.8.0's ``espeakbridge.get_phonemes`` leaks every clause tuple it returns (``PyList_Append(list,
Py_BuildValue(...))`` keeps the tuple's own reference): ~150 bytes per clause, ~3 KB per request, held
forever (docs/reliability.md, "Soak"). All our calls go through `_get_phonemes`, which gives back the
extra reference, so we do not call Piper's ``EspeakPhonemizer.phonemize`` (it would leak) but repeat its
loop for the case we use (no vowel clusters).

``espeakbridge.set_voice`` also leaks, in C (~1.3 KB of heap per call, glibc's in-use heap; no Python
object): two calls per request, the rest of the soak's growth (docs/reliability.md, "Soak"). Piper and
we called it before every phonemization; this module replaces the bridge's ``set_voice`` with one that
calls espeak-ng only when the voice changes (and ``initialize`` with one that forgets the voice), so
Piper's calls through the module go through it too.
"""

from __future__ import annotations

import ctypes
import re
import sys
import threading
import unicodedata

import piper.voice as _piper_voice
from piper import espeakbridge
from piper.phonemize_espeak import ESPEAK_DATA_DIR, EspeakPhonemizer

_LANG_FLAG = re.compile(r"\([^)]+\)")
_LOCK: threading.Lock = getattr(_piper_voice, "_ESPEAK_PHONEMIZER_LOCK", None) or threading.Lock()


_bridge_set_voice = getattr(espeakbridge.set_voice, "__wrapped__", espeakbridge.set_voice)
_bridge_initialize = getattr(espeakbridge.initialize, "__wrapped__", espeakbridge.initialize)
_voice: list[str | None] = [None]  # the voice espeak-ng has now, as set through `_set_voice`


def _set_voice(voice: str) -> None:
    """``espeakbridge.set_voice``, skipped when espeak-ng already has `voice` (caller holds _LOCK)."""
    if _voice[0] != voice:
        _voice[0] = None  # unknown until the call succeeds
        _bridge_set_voice(voice)
        _voice[0] = voice


def _initialize(data_dir: str) -> None:
    _voice[0] = None
    _bridge_initialize(data_dir)


# The originals, where `_bridge_set_voice`/`_bridge_initialize` above look for them if this module is
# imported again (setattr: mypy's callable types have no `__wrapped__`).
setattr(_set_voice, "__wrapped__", _bridge_set_voice)
setattr(_initialize, "__wrapped__", _bridge_initialize)
espeakbridge.set_voice = _set_voice  # Piper calls it through the module attribute
espeakbridge.initialize = _initialize


def lock() -> threading.Lock:
    """The process-wide espeak-ng lock (Piper's own). Hold it for any direct espeakbridge call."""
    return _LOCK


def _phonemizer() -> EspeakPhonemizer:
    # Caller holds _LOCK.
    current = getattr(_piper_voice, "_ESPEAK_PHONEMIZER", None)
    if current is None:
        current = EspeakPhonemizer(ESPEAK_DATA_DIR)
        _piper_voice._ESPEAK_PHONEMIZER = current
    return current


def _get_phonemes(text: str) -> list[tuple[str, str, bool]]:
    """``espeakbridge.get_phonemes(text)`` (caller holds _LOCK): (phonemes, terminator, ends a sentence)
    per clause, without the reference piper-tts 1.8.0 leaks on each tuple. A tuple held by the fresh list
    alone has a reference count of 2 here (the list's and getrefcount's argument); only one with more is
    released, so a fixed espeakbridge is left alone."""
    clauses = espeakbridge.get_phonemes(text)
    for i in range(len(clauses)):
        if sys.getrefcount(clauses[i]) > 2:
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(clauses[i]))
    return clauses


def sentence_phonemes(text: str, voice: str) -> list[list[str]]:
    """Phonemes of ``text`` grouped by espeak-ng sentence, as ``PiperVoice.phonemize`` returns them
    for an espeak voice without vowel clusters: code points after NFD, clause punctuation kept
    (", " ": " "; " get a trailing space), a trailing empty sentence removed.

    ``text`` must not contain Piper's raw-phoneme marker ``[[``; normalized text never does.
    """
    if "[[" in text:
        raise ValueError("text contains '[[', which Piper reads as raw phonemes")
    with _LOCK:
        _phonemizer()
        espeakbridge.set_voice(voice)
        clauses = _get_phonemes(text)
    # EspeakPhonemizer.phonemize(voice, text, vowel_clusters=None), on clauses that do not leak
    sentences: list[list[str]] = []
    current: list[str] = []
    for phonemes, terminator, end_of_sentence in clauses:
        phonemes = _LANG_FLAG.sub("", phonemes) + terminator
        if terminator in (",", ":", ";"):
            phonemes += " "
        current.extend(unicodedata.normalize("NFD", phonemes))
        if end_of_sentence:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    if sentences and not sentences[-1]:
        sentences.pop()
    return sentences


def word_phonemes(words: list[str], voice: str) -> list[str]:
    """Phoneme string of each word spoken on its own (NFD, language flags removed).

    Used only to align a sentence's phonemes with its words; one espeak-ng call for all words (as
    comma-separated clauses), falling back to one call per word when clauses and words disagree.
    """
    if not words:
        return []
    with _LOCK:
        _phonemizer()
        espeakbridge.set_voice(voice)
        clauses = _get_phonemes(", ".join(words))
        if len(clauses) != len(words):
            clauses = [(" ".join(p for p, _, _ in _get_phonemes(w)), "", True) for w in words]
    return [unicodedata.normalize("NFD", _LANG_FLAG.sub("", p)).strip() for p, _, _ in clauses]
