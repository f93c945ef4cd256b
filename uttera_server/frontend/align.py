"""Which word each phoneme of a sentence belongs to.

espeak-ng's phoneme string separates words by spaces, but not one-to-one with the input: it glues
words ("of the" -> "ʌvðə") and splits others ("iPhone" -> "ˈaɪ fˈoʊn"). We therefore align the
sentence's phoneme words with the phonemes of each word spoken alone: equal stretches map directly
(difflib), unequal stretches are aligned code point by code point. Pure functions, no espeak-ng.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from .spoken_text import PAUSE_MARKS

_STRESS = str.maketrans("", "", "ˈˌ")


def _runs(phonemes: list[str]) -> list[list[int]]:
    """Indices of each phoneme word: maximal runs without spaces or pause marks."""
    runs: list[list[int]] = []
    current: list[int] = []
    for i, ph in enumerate(phonemes):
        if ph == " " or ph in PAUSE_MARKS:
            if current:
                runs.append(current)
                current = []
        else:
            current.append(i)
    if current:
        runs.append(current)
    return runs


def _align_chars(s_chars: list[str], t_chars: list[str], t_labels: list[int]) -> list[int]:
    """Label for each of ``s_chars`` from the code-point alignment with ``t_chars``."""
    if not t_chars:
        return [-1] * len(s_chars)
    labels = [-1] * len(s_chars)
    matcher = SequenceMatcher(None, s_chars, t_chars, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            labels[a + k] = t_labels[b + k]
    if all(label < 0 for label in labels):
        n, m = len(s_chars), len(t_chars)
        return [t_labels[k * m // n] for k in range(n)]
    first = next(label for label in labels if label >= 0)
    prev = first
    for k, label in enumerate(labels):
        if label < 0:
            labels[k] = prev
        else:
            prev = label
    return labels


def phoneme_word_labels(phonemes: list[str], solo: list[str]) -> list[int | None]:
    """For each phoneme of a sentence, the index of the spoken word it voices.

    ``phonemes``: the sentence's phonemes (code points, spaces and pause marks included).
    ``solo[i]``: phoneme string of spoken word ``i`` said alone (may be "" or contain spaces).
    Spaces map to None; a pause mark maps to the word before it (None if there is none). Labels
    never decrease along the sentence.
    """
    runs = _runs(phonemes)
    s_keys = ["".join(phonemes[i] for i in run).translate(_STRESS) for run in runs]
    t_words: list[str] = []
    t_owner: list[int] = []
    for index, text in enumerate(solo):
        for piece in text.split():
            t_words.append(piece)
            t_owner.append(index)
    t_keys = [w.translate(_STRESS) for w in t_words]
    char_label: dict[int, int] = {}
    matcher = SequenceMatcher(None, s_keys, t_keys, autojunk=False)
    for op, s0, s1, t0, t1 in matcher.get_opcodes():
        if op == "equal" or (op == "replace" and s1 - s0 == t1 - t0):
            for s, t in zip(range(s0, s1), range(t0, t1)):
                for i in runs[s]:
                    char_label[i] = t_owner[t]
        elif op == "replace":
            s_idx = [i for run in runs[s0:s1] for i in run]
            t_chars = [ch for t in range(t0, t1) for ch in t_words[t]]
            t_labels = [t_owner[t] for t in range(t0, t1) for _ in t_words[t]]
            for i, label in zip(s_idx, _align_chars([phonemes[i] for i in s_idx], t_chars, t_labels)):
                char_label[i] = label
    return _finish(phonemes, runs, char_label)


def _finish(phonemes: list[str], runs: list[list[int]], char_label: dict[int, int]) -> list[int | None]:
    """Fill unaligned phonemes from their neighbours, make labels monotone, label punctuation."""
    word_chars = [i for run in runs for i in run]
    known = [char_label.get(i, -1) for i in word_chars]
    first = next((label for label in known if label >= 0), 0)
    best = first
    for k, label in enumerate(known):
        best = max(best, label)
        known[k] = best
    filled = dict(zip(word_chars, known))
    out: list[int | None] = []
    last: int | None = None
    for i, ph in enumerate(phonemes):
        if i in filled:
            last = filled[i]
            out.append(last)
        elif ph == " ":
            out.append(None)
        else:
            out.append(last)
    return out
