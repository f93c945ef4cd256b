"""The pointer rules of docs/model-format.md as one pure function, shared by the serving logits
processor, offline training inference and the plain-PyTorch benchmark baseline (no vLLM import)."""

from collections.abc import Sequence


def pointer_window(
    tokens: Sequence[int], n_phonemes: int, *, max_advance: int, max_dwell: int, offset: int = 0
) -> tuple[int, int, bool]:
    """Allowed next pointers `[lo, hi]` (empty when lo > hi) and whether STOP is allowed.

    `tokens` are the generated pointer tokens so far (pointer = token - offset). The first pointer is 0;
    then the pointer moves by 0..max_advance, never past the last phoneme, dwells at most `max_dwell`
    steps on one phoneme, and STOP is allowed only on the last phoneme (forced there once the dwell
    limit is reached).
    """
    last = n_phonemes - 1
    if not tokens:
        return 0, 0, False
    p = min(max(tokens[-1] - offset, 0), last)
    dwell = 0
    for token in reversed(tokens):
        if token != tokens[-1] or dwell >= max_dwell:
            break
        dwell += 1
    lo = p + 1 if dwell >= max_dwell else p
    hi = min(p + max_advance, last)
    if p == last:
        return (lo, hi, True) if lo <= hi else (1, 0, True)
    return min(lo, hi), hi, False
