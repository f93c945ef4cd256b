"""piper-tts 1.8.0's espeakbridge.get_phonemes leaks each clause tuple; our espeak calls must not
(docs/reliability.md, "Soak"). Measured with tracemalloc over many calls: memory still held afterwards."""

import gc
import sys
import tracemalloc

from piper import espeakbridge
from piper.phonemize_espeak import EspeakPhonemizer

from benchmarks.heap import mallinfo2
from uttera_server.frontend import espeak

WORDS = "the quick brown fox jumps over a lazy dog while seven sailors sing".split()
TEXT = "The quick brown fox, jumps over a lazy dog: while seven sailors sing. Twelve (sailors)? Yes!"


def _held_bytes_per_call(fn, calls: int = 500) -> float:
    fn()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            fn()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / calls
    finally:
        tracemalloc.stop()


def test_clause_tuples_are_held_by_their_list_alone():
    """Reaches `espeak._get_phonemes`, our wrapper round piper's leaking `espeakbridge.get_phonemes`, on
    purpose: the reference counts of the clause tuples it returns can only be read there (the public
    functions consume them); the public functions' memory is measured below."""
    with espeak.lock():
        espeak._phonemizer()
        espeakbridge.set_voice("en-us")  # espeak-ng crashes without a voice
        clauses = espeak._get_phonemes("the quick, brown fox.")
    assert len(clauses) == 2
    assert [sys.getrefcount(clauses[i]) for i in range(len(clauses))] == [2, 2]


def test_phonemizing_holds_no_memory_per_call():
    # before the fix: ~1,900 bytes per word_phonemes call of 13 words, ~300 per sentence_phonemes call
    assert _held_bytes_per_call(lambda: espeak.word_phonemes(WORDS, "en-us")) < 20
    assert _held_bytes_per_call(lambda: espeak.sentence_phonemes(TEXT, "en-us")) < 20


def test_sentence_phonemes_equal_pipers():
    with espeak.lock():
        expected = EspeakPhonemizer().phonemize("en-us", TEXT, vowel_clusters=None)
    if expected and not expected[-1]:
        expected.pop()
    assert espeak.sentence_phonemes(TEXT, "en-us") == expected


def _heap_in_use_bytes_per_call(fn, calls: int = 1000) -> float:
    """glibc's heap in use (mallinfo2) still held after `calls` calls, per call: what tracemalloc does not
    see (C allocations)."""
    fn()
    gc.collect()
    before = mallinfo2().uordblks
    for _ in range(calls):
        fn()
    gc.collect()
    return (mallinfo2().uordblks - before) / calls


def test_phonemizing_holds_no_c_heap_per_call():
    # before the fix: ~1,330 bytes per call (espeakbridge.set_voice, called on every phonemization)
    assert _heap_in_use_bytes_per_call(lambda: espeak.word_phonemes(WORDS, "en-us")) < 200
    assert _heap_in_use_bytes_per_call(lambda: espeak.sentence_phonemes(TEXT, "en-us")) < 200


def test_the_voice_still_changes_whoever_sets_it():
    us, gb = "təmˈeɪɾoʊ", "təmˈɑːtəʊ"  # "tomato", en-us and en (British)
    assert espeak.word_phonemes(["tomato"], "en-us") == [us]
    assert espeak.word_phonemes(["tomato"], "en") == [gb]
    assert espeak.word_phonemes(["tomato"], "en-us") == [us]
    with espeak.lock():  # Piper's own phonemizer sets the voice through the same bridge function
        assert "".join(EspeakPhonemizer().phonemize("en", "tomato")[0]) == gb
    assert espeak.word_phonemes(["tomato"], "en-us") == [us]
