"""The phoneme -> id table of the teacher voice (Piper en_US-joe-medium), shipped as plain data.

``phonemes_en_us.json`` is a verbatim copy of the voice config's ``espeak.voice`` and
``phoneme_id_map``, so serving needs neither the joe voice package nor its ONNX model.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Mapping

TABLE_FILE = "phonemes_en_us.json"


@dataclass(frozen=True, slots=True)
class PhonemeTable:
    """``id_map``: phoneme (one Unicode code point after NFD) -> ids, as in Piper's config.
    ``espeak_voice``: espeak-ng voice name ("en-us"). ``pad``/``bos``/``eos``: Piper's symbols."""

    espeak_voice: str
    id_map: Mapping[str, tuple[int, ...]]
    pad: str = "_"
    bos: str = "^"
    eos: str = "$"

    def __post_init__(self) -> None:
        for symbol in (self.pad, self.bos, self.eos, " "):
            if symbol not in self.id_map:
                raise ValueError(f"phoneme table lacks the {symbol!r} symbol Piper requires")

    @property
    def pad_ids(self) -> tuple[int, ...]:
        return self.id_map[self.pad]

    @property
    def bos_ids(self) -> tuple[int, ...]:
        return self.id_map[self.bos]

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.id_map[self.eos]

    @property
    def num_ids(self) -> int:
        """One more than the largest id: the size of the phoneme vocabulary the table needs."""
        return 1 + max(i for ids in self.id_map.values() for i in ids)

    @staticmethod
    def from_dict(data: Mapping[str, object]) -> "PhonemeTable":
        """From our JSON layout, or from a Piper voice config (``espeak.voice`` + ``phoneme_id_map``)."""
        voice = data.get("espeak_voice")
        if voice is None:
            espeak = data["espeak"]
            if not isinstance(espeak, Mapping):
                raise TypeError(f"'espeak' must be an object, got {espeak!r}")
            voice = espeak["voice"]
        raw = data["phoneme_id_map"]
        if not isinstance(raw, Mapping):
            raise TypeError(f"'phoneme_id_map' must be an object, got {type(raw).__name__}")
        id_map = {str(k): tuple(int(i) for i in v) for k, v in raw.items()}
        return PhonemeTable(
            str(voice),
            MappingProxyType(id_map),
            str(data.get("pad", "_")),
            str(data.get("bos", "^")),
            str(data.get("eos", "$")),
        )


@functools.cache
def en_us() -> PhonemeTable:
    """The shipped en-US table (loaded once; immutable)."""
    text = resources.files(__package__).joinpath(TABLE_FILE).read_text(encoding="utf-8")
    return PhonemeTable.from_dict(json.loads(text))
