"""Phoneme-to-word alignment (pure; no espeak-ng)."""

from uttera_server.frontend.align import phoneme_word_labels


def _labels(sentence: str, solo: list[str]) -> list:
    return phoneme_word_labels(list(sentence), solo)


def test_one_to_one_words() -> None:
    got = _labels("ab cd.", ["ab", "cd"])
    assert got == [0, 0, None, 1, 1, 1]


def test_glued_words_split_by_code_point() -> None:
    # espeak says "of the" as one word "ʌvðə"
    got = _labels("ʌvðə pˈiːpəl", ["ʌv", "ðə", "pˈiːpəl"])
    assert got[:4] == [0, 0, 1, 1]
    assert got[4] is None and set(got[5:]) == {2}


def test_one_word_spoken_as_two() -> None:
    got = _labels("ðə ˈaɪ fˈoʊn", ["ðə", "ˈaɪ fˈoʊn"])
    assert got == [0, 0, None, 1, 1, 1, None, 1, 1, 1, 1, 1]


def test_context_changes_map_in_order() -> None:
    # "a" is "ɐ" in a sentence but "ˈeɪ" alone; equal counts map one to one
    got = _labels("ɐ kˈæt", ["ˈeɪ", "kˈæt"])
    assert got == [0, None, 1, 1, 1, 1]


def test_silent_word_is_skipped() -> None:
    got = _labels("hɛloʊ wɜːld", ["hɛloʊ", "", "wɜːld"])
    assert got[:5] == [0] * 5 and got[6:] == [2] * 5


def test_extra_sentence_word_joins_a_neighbour() -> None:
    got = _labels("wʌn tuː θɹiː", ["wʌn", "θɹiː"])
    assert None not in got[:3] and got[-1] == 1
    labels = [x for x in got if x is not None]
    assert labels == sorted(labels)


def test_punctuation_belongs_to_previous_word_and_leading_one_to_none() -> None:
    got = _labels(", ab, cd; ", ["ab", "cd"])
    assert got == [None, None, 0, 0, 0, None, 1, 1, 1, None]


def test_no_solo_phonemes_at_all() -> None:
    assert _labels("ab cd", ["", ""]) == [0, 0, None, 0, 0]


def test_labels_never_decrease_on_disagreement() -> None:
    got = _labels("xyz abc def ghi", ["ghi", "def", "abc", "xyz"])
    labels = [x for x in got if x is not None]
    assert labels == sorted(labels)
