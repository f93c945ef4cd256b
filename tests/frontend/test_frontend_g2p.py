"""g2p: prompt layout, pads, and the word behind each phoneme."""

import time

from uttera_server.frontend import en_us, normalize, phonemize, strip_pads, with_pads


def test_layout_is_bos_phonemes_eos_without_pads() -> None:
    result = phonemize(normalize("Hello, world."))
    table = en_us()
    assert result.phoneme_ids[0] == table.bos_ids[0] and result.phoneme_ids[-1] == table.eos_ids[0]
    assert table.pad_ids[0] not in result.phoneme_ids
    assert "".join(result.phonemes[1:-1]) == "həlˈoʊ, wˈɜːld."
    assert [table.id_map[p][0] for p in result.phonemes] == result.phoneme_ids
    assert result.espeak_sentences == 1


def test_pads_round_trip() -> None:
    ids = phonemize(normalize("Testing one two three.")).phoneme_ids
    padded = with_pads(ids)
    assert len(padded) == 2 * len(ids) - 1
    assert padded[1::2] == [en_us().pad_ids[0]] * (len(ids) - 1)
    assert strip_pads(padded) == ids


def test_word_of_each_phoneme() -> None:
    norm = normalize("I paid $5, ok?")
    result = phonemize(norm)
    words = [w.text for w in norm.source_words]
    assert words == ["I", "paid", "$5", "ok"]
    by_word: dict[str, str] = {}
    for ph, w in zip(result.phonemes, result.phoneme_words):
        if w is not None:
            by_word[words[w]] = by_word.get(words[w], "") + ph
    assert by_word["$5"] == "fˈaɪv dˈɑːlɚz,".replace(" ", "")
    assert by_word["ok"].endswith("?")
    spaces = [w for p, w in zip(result.phonemes, result.phoneme_words) if p == " "]
    assert spaces and all(w is None for w in spaces)


def test_phonemize_is_fast() -> None:
    norm = normalize("The quick brown fox jumps over the lazy dog, and then it runs far away.")
    phonemize(norm)
    start = time.perf_counter()
    for _ in range(20):
        phonemize(norm)
    per_call = (time.perf_counter() - start) / 20
    assert per_call < 0.05  # ~1 ms here; generous for a shared CI machine
