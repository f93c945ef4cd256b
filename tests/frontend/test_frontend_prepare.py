"""prepare(): segmentation + normalization + g2p, word spans, errors, phoneme budget, threads."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from uttera_server.frontend import (
    FrontendError,
    NothingToSpeakError,
    Sentence,
    en_us,
    normalize,
    phonemize,
    prepare,
    split_sentences,
    teacher_text,
)
from uttera_server.frontend import espeak


def _voiced(sentence: Sentence) -> list[str]:
    """Original words in the order their phonemes occur (deduplicated runs)."""
    out: list[str] = []
    for w in sentence.phoneme_words:
        if w is not None and (not out or out[-1] != sentence.words[w][0]):
            out.append(sentence.words[w][0])
    return out


def test_sentence_fields() -> None:
    text = "Dr. Smith paid $5. Then he left!"
    first, second = prepare(text)
    assert first.text == "Dr. Smith paid $5." and first.span == (0, 18)
    assert first.normalized == "Doctor Smith paid five dollars."
    assert [w[0] for w in first.words] == ["Dr.", "Smith", "paid", "$5"]
    assert first.words[3] == ("$5", 15, 17)
    assert text[15:17] == "$5"
    assert first.phoneme_ids[0] == en_us().bos_ids[0] and first.phoneme_ids[-1] == en_us().eos_ids[0]
    assert first.phoneme_words[0] is None and first.phoneme_words[-1] is None
    assert len(first.phoneme_ids) == len(first.phoneme_words)
    assert _voiced(first) == ["Dr.", "Smith", "paid", "$5"]
    # "five dollars." -> every phoneme of both words, and the period, maps to "$5"
    assert first.phoneme_words[-2] == 3 and en_us().id_map["."][0] == first.phoneme_ids[-2]
    assert second.span == (19, 32) and second.text == "Then he left!"
    assert teacher_text(second) == second.normalized == "Then he left!"


def test_glued_and_split_words_map_to_the_right_original_words() -> None:
    (s,) = prepare("Most of the iPhone users, a lot.")
    assert _voiced(s) == ["Most", "of", "the", "iPhone", "users", "a", "lot"]


def test_offset_shifts_spans() -> None:
    (s,) = prepare("Hi $5", offset=100)
    assert s.span == (100, 105) and s.words[-1] == ("$5", 103, 105)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "...", "!?!", "***", "--", "\u201c\u201d", "\U0001f600"])
def test_nothing_to_speak(text: str) -> None:
    with pytest.raises(NothingToSpeakError, match="nothing to speak"):
        prepare(text)
    assert issubclass(NothingToSpeakError, ValueError) and issubclass(NothingToSpeakError, FrontendError)
    assert prepare(text, allow_empty=True) == []


def test_symbols_alone_are_speakable() -> None:
    assert prepare("&")[0].normalized == "and"


def test_bad_budget() -> None:
    with pytest.raises(ValueError, match="max_phonemes"):
        prepare("hello", max_phonemes=5)


def test_long_sentences_are_cut_to_the_budget() -> None:
    text = "The value 1,234,567,890 is large, and so is 9,876,543,210, right? " * 3
    for budget in (400, 120, 48):
        sentences = prepare(text, budget)
        assert all(len(s.phoneme_ids) <= budget for s in sentences)
        spoken = " ".join(s.normalized for s in sentences).replace(",", "").replace("?", "")
        whole = " ".join(normalize(seg.text).text for seg in split_sentences(text))
        assert spoken.split() == whole.replace(",", "").replace("?", "").split()
        for a, b in zip(sentences, sentences[1:]):
            assert a.span[0] <= b.span[0]


def test_one_huge_word_is_split_too() -> None:
    sentences = prepare("x" * 200, max_phonemes=40)
    assert all(len(s.phoneme_ids) <= 40 for s in sentences)
    assert "".join(s.normalized.replace(" ", "") for s in sentences) == "x" * 200


def test_threads_get_the_same_answers() -> None:
    texts = [f"Sentence number {i} costs ${i}.{i:02d} at {i % 12 + 1}:15 pm." for i in range(40)]
    expected = [prepare(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(prepare, texts)) == expected


def test_espeak_lock_is_pipers() -> None:
    import piper.voice

    assert espeak.lock() is piper.voice._ESPEAK_PHONEMIZER_LOCK


def test_raw_phoneme_marker_is_refused() -> None:
    with pytest.raises(ValueError):
        espeak.sentence_phonemes("[[ a ]]", "en-us")
    assert "[" not in prepare("[[ hello ]]")[0].normalized


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
@example("\u0660\u00b2\u2167 \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629")
@example("a\u0300\u0301\u0302 \u1100\u1161 \U0001d400")
def test_arbitrary_text_gives_valid_prompts(text: str) -> None:
    for s in prepare(text, allow_empty=True, max_phonemes=64):
        assert 2 < len(s.phoneme_ids) <= 64
        assert len(s.phoneme_words) == len(s.phoneme_ids)
        assert phonemize(normalize(s.normalized)).espeak_sentences == 1
        assert len(espeak.sentence_phonemes(s.normalized, "en-us")) == 1
        labels = [w for w in s.phoneme_words if w is not None]
        assert labels == sorted(labels) and all(0 <= w < len(s.words) for w in labels)
        for word, start, end in s.words:
            assert text[start:end] == word
        assert text[s.span[0] : s.span[1]] == s.text
