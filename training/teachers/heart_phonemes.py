"""Our frontend's phonemes (joe's Piper / espeak-ng `en-us` IPA ids) -> hibari's misaki (Kokoro) alphabet.

The heart voice is prompted with OUR phoneme ids (the served model reads `uttera_server.frontend`), so
the teacher must speak exactly those phonemes: each prompt is tokenized greedily, longest match first,
into groups of our symbols, and each group becomes zero or more hibari symbols (`RULES`). A group that
maps to nothing (a length mark, a glide, a syllabic mark, ...) joins the group before it, so every
prompt phoneme belongs to exactly one group and every group has at least one hibari id to take its
duration from. `^` and `$` become hibari's leading and trailing 0 pads (their silence becomes the
durations of `^` and `$`, as Piper's pads are merged into the phonemes of the joe voice).

Symbols that are spelled the same in both alphabets (most consonants, ə ɪ ɛ æ ʌ ʊ ɐ ᵻ ɹ ŋ θ ð ʃ ʒ, stress
marks, space and punctuation) map to themselves when hibari's vocabulary has them.
"""

from __future__ import annotations

from dataclasses import dataclass

# our symbols -> hibari symbols. Longest key wins. Comments say why for each non-identity entry.
RULES: dict[str, str] = {
    "^": "",  # -> leading pad (handled in `map_prompt`)
    "$": "",  # -> trailing pad
    # misaki writes the five English diphthongs as single capital letters
    "aɪ": "I",  # price
    "eɪ": "A",  # face
    "aʊ": "W",  # mouth
    "ɔɪ": "Y",  # choice
    "oʊ": "O",  # goat (US; misaki's British goat is Q = əʊ)
    # affricates are single letters in misaki
    "tʃ": "ʧ",
    "dʒ": "ʤ",
    # r-coloured vowels: misaki spells them vowel + ɹ
    "ɚ": "əɹ",  # letter (espeak's single rhotic schwa)
    "ɚɹ": "əɹ",  # history (hˈɪstɚɹi): espeak's ɚ before a syllable-initial ɹ; misaki has one ɹ (hˈɪstəɹi)
    "ɜːɹ": "ɜɹ",  # furry: espeak's ɜː already carries the r, the ɹ after it is the next syllable's onset
    "ɜː": "ɜɹ",  # nurse (espeak en-us writes bird as bˈɜːd)
    # US misaki has no length marks: the long vowels are the bare letters
    "iː": "i",
    "uː": "u",
    "ɑː": "ɑ",
    "ɔː": "ɔ",  # thought
    "oː": "ɔ",  # espeak's rare oː (before ɹ) is misaki's north/force ɔɹ
    "ː": "",  # any other length mark: no misaki equivalent (joins the vowel before it)
    "ɔ": "ɔ",  # espeak's short ɔ: misaki has ɔ in cost, long, off but ɑ in want, beyond; ɔ matched more often on eval_sentences.txt (phone edit rate 5.23 % vs 5.59 % with ɑ)
    "ɾ": "T",  # flap (better, city): misaki's US flap letter is T, not ɾ (hibari never emits ɾ)
    "ʔ": "t",  # glottal stop before syllabic n (button bˈʌʔn̩): misaki writes bˈʌtn
    "̩": "",  # syllabic mark (n̩): misaki has none
    "ʲ": "",  # espeak's palatal glide after iː before a vowel (me at: mˌiːʲ æt): misaki has none
    "x": "k",  # loch: misaki (US) has no velar fricative and says k
    "e": "A",  # a bare e (rare outside eɪ): closest misaki vowel is face
    "o": "O",  # a bare o (rare outside oʊ): goat
    "r": "ɹ",  # a trilled r from a foreign-word rule: English approximant
    "ɬ": "l",  # lateral fricative (Welsh ll): l
    "-": "",  # hyphen: hibari's vocabulary has no hyphen (its g2p drops it); joins the phoneme before
    "'": "",  # apostrophe: likewise
}


@dataclass(frozen=True, slots=True)
class MappedPrompt:
    """hibari ids (0 pads at both ends) and, per hibari id, the index of the prompt phoneme group it voices.

    `groups[g]` = the prompt positions (indices into our ids) of group g; `hib_group[j]` = group of hibari
    id j. Every prompt position is in exactly one group, every group has >= 1 hibari id.
    """

    hib_ids: tuple[int, ...]
    hib_group: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    hib_text: str


class UnmappableError(ValueError):
    """A prompt symbol with no rule and no identical symbol in hibari's vocabulary."""


def map_prompt(symbols: list[str], vocab: dict[str, int]) -> MappedPrompt:
    """Our prompt phoneme symbols (`^ ... $`) -> hibari ids and the group alignment."""
    if len(symbols) < 2 or symbols[0] != "^" or symbols[-1] != "$":
        raise UnmappableError("a prompt is ^ ... $")
    longest = max(len(k) for k in RULES)
    hib_ids: list[int] = [0]
    hib_group: list[int] = [0]
    groups: list[list[int]] = [[0]]
    text: list[str] = []
    i = 1
    while i < len(symbols) - 1:
        for n in range(min(longest, len(symbols) - 1 - i), 0, -1):
            key = "".join(symbols[i : i + n])
            if key in RULES and key not in ("^", "$"):
                out = RULES[key]
                break
        else:
            n, key = 1, symbols[i]
            if key not in vocab:
                raise UnmappableError(f"no rule for {key!r} (U+{ord(key[0]):04X})")
            out = key
        positions = list(range(i, i + n))
        if out:
            groups.append(positions)
            for ch in out:
                hib_ids.append(vocab[ch])
                hib_group.append(len(groups) - 1)
            text.append(out)
        else:  # nothing to voice: the symbols join the group before them
            groups[-1].extend(positions)
        i += n
    groups.append([len(symbols) - 1])
    hib_ids.append(0)
    hib_group.append(len(groups) - 1)
    return MappedPrompt(
        hib_ids=tuple(hib_ids),
        hib_group=tuple(hib_group),
        groups=tuple(tuple(g) for g in groups),
        hib_text="".join(text),
    )


def prompt_units(mapped: MappedPrompt, units: list[int] | tuple[int, ...]) -> list[float]:
    """Per-hibari-id duration units -> per-prompt-phoneme units (floats: a group's units are split evenly)."""
    per_group = [0] * len(mapped.groups)
    for g, u in zip(mapped.hib_group, units, strict=True):
        per_group[g] += int(u)
    n_prompt = sum(len(g) for g in mapped.groups)
    out = [0.0] * n_prompt
    for g, positions in enumerate(mapped.groups):
        for p in positions:
            out[p] = per_group[g] / len(positions)
    return out


def id_to_symbol() -> dict[int, str]:
    """Our prompt id -> phoneme symbol (the frontend's shipped table, joe's Piper phoneme_id_map)."""
    from uttera_server.frontend.phoneme_table import en_us

    return {ids[0]: sym for sym, ids in en_us().id_map.items() if len(ids) == 1}


def prompt_symbols(ids: list[int] | tuple[int, ...], table: dict[int, str] | None = None) -> list[str]:
    table = table if table is not None else id_to_symbol()
    return [table[int(i)] for i in ids]


PHONE_SKIP = frozenset(' ˈˌ.,;:!?—…"()“”')


def phones(hib_text: str) -> list[str]:
    """The phones of a misaki string: spaces, stress marks and punctuation removed."""
    return [c for c in hib_text if c not in PHONE_SKIP]
