"""Reading a voice model directory (docs/model-format.md) on the serving side."""

import json
from typing import Any
from dataclasses import dataclass
from pathlib import Path

ARCHITECTURE = "UtteraTTSForCausalLM"


class ModelDirectoryError(ValueError):
    """The model directory is missing files or has an invalid config.json."""


@dataclass(frozen=True, slots=True)
class VoiceEntry:
    """One voice of a multi-voice model: an entry of config.json's `voices` list. The model speaks it
    when its prompt starts with `voice_token` in place of the phoneme table's bos id (`^`)."""

    id: str  # what a request names in `voice`
    voice_token: int  # the prompt's first id, in [0, n_phoneme_tokens)
    name: str
    language: str  # BCP 47, e.g. "en-US"
    description: str
    random_weights: bool
    gender: str | None = None
    teacher: str | None = None
    license: str | None = None


@dataclass(frozen=True, slots=True)
class VoiceModelConfig:
    """What the server needs to know about a model directory (the vLLM side reads config.json itself)."""

    path: Path
    sample_rate: int  # Hz
    hop_length: int  # samples per mel frame
    n_mels: int
    frames_per_step: int  # mel frames per decode step
    n_phoneme_tokens: int
    max_phonemes: int  # longest prompt, in phonemes
    pointer_offset: int
    stop_token_id: int
    max_steps_per_phoneme: int
    max_position_embeddings: int
    voice_name: str
    language: str
    description: str
    random_weights: bool
    gender: str | None = None  # of the speaker, as the voice's model card gives it
    teacher: str | None = None  # the model the voice was distilled from
    license: str | None = None  # SPDX id of the weights' license
    # config.json's `voices` list, in order (the first is the default); () without one: the directory is
    # one voice, the `voice` block, whose prompts keep the bos id
    voices: tuple[VoiceEntry, ...] = ()

    def __post_init__(self) -> None:
        if self.stop_token_id != self.pointer_offset + self.max_phonemes:
            raise ModelDirectoryError(f"{self.path}: stop_token_id must be pointer_offset + max_phonemes")
        if min(self.sample_rate, self.hop_length, self.n_mels, self.frames_per_step) <= 0:
            raise ModelDirectoryError(f"{self.path}: audio parameters must be positive")
        _check_voices(self.path, self.voices, self.n_phoneme_tokens)

    @property
    def frame_ms(self) -> float:
        return 1000.0 * self.hop_length / self.sample_rate

    def max_steps(self, n_phonemes: int) -> int:
        """Upper bound on decode steps for a prompt of `n_phonemes` (the pointer rules guarantee it)."""
        return n_phonemes * self.max_steps_per_phoneme + 1

    @classmethod
    def load(cls, path: str | Path) -> "VoiceModelConfig":
        path = Path(path)
        file = path / "config.json"
        try:
            raw = json.loads(file.read_text())
        except FileNotFoundError:
            raise ModelDirectoryError(f"no config.json in model directory {path}") from None
        except json.JSONDecodeError as e:
            raise ModelDirectoryError(f"{file} is not valid JSON: {e}") from None
        if ARCHITECTURE not in raw.get("architectures", []):
            raise ModelDirectoryError(f"{file}: architectures must include {ARCHITECTURE}")
        for required in ("model.safetensors", "vocoder/config.json", "vocoder/model.safetensors"):
            if not (path / required).is_file():
                raise ModelDirectoryError(f"model directory {path} lacks {required}")
        _check_phoneme_table(path)
        voice = raw.get("voice", {})
        try:
            return cls(
                path=path,
                sample_rate=int(raw["sample_rate"]),
                hop_length=int(raw["hop_length"]),
                n_mels=int(raw["n_mels"]),
                frames_per_step=int(raw["frames_per_step"]),
                n_phoneme_tokens=int(raw["n_phoneme_tokens"]),
                max_phonemes=int(raw["max_phonemes"]),
                pointer_offset=int(raw["pointer_offset"]),
                stop_token_id=int(raw["stop_token_id"]),
                max_steps_per_phoneme=int(raw.get("max_steps_per_phoneme", 10)),
                max_position_embeddings=int(raw["max_position_embeddings"]),
                voice_name=str(voice.get("name", path.name)),
                **_card(voice),
                voices=_voice_entries(file, raw.get("voices")),
            )
        except KeyError as e:
            raise ModelDirectoryError(f"{file} lacks the key {e.args[0]!r}") from None


def _card(voice: dict[str, Any]) -> dict[str, Any]:
    """The fields a voice block and a `voices` entry share, beside its name (config.json)."""
    return {
        "language": str(voice.get("language", "en-US")),
        "description": str(voice.get("description", "")),
        "random_weights": bool(voice.get("random_weights", False)),
        "gender": _optional_str(voice, "gender"),
        "teacher": _optional_str(voice, "teacher"),
        "license": _optional_str(voice, "license"),
    }


def _voice_entries(file: Path, raw: Any) -> tuple[VoiceEntry, ...]:
    """config.json's `voices` list (training/export.py writes it) as typed entries; None: no list."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ModelDirectoryError(f"{file}: 'voices' must be a non-empty list of voice objects")
    entries = []
    for i, v in enumerate(raw):
        if not isinstance(v, dict):
            raise ModelDirectoryError(f"{file}: voices[{i}] must be an object, got {v!r}")
        token = v.get("voice_token")
        if not isinstance(token, int) or isinstance(token, bool):
            raise ModelDirectoryError(f"{file}: voices[{i}].voice_token must be an integer, got {token!r}")
        if not isinstance(v.get("id"), str):
            raise ModelDirectoryError(f"{file}: voices[{i}].id must be a string, got {v.get('id')!r}")
        entries.append(
            VoiceEntry(
                id=v["id"],
                voice_token=token,
                name=str(v.get("name", v["id"])),
                **_card(v),
            )
        )
    return tuple(entries)


def _check_voices(path: Path, voices: tuple[VoiceEntry, ...], n_phoneme_tokens: int) -> None:
    """Ids unique and non-empty; tokens unique, in [0, n_phoneme_tokens), and either the frontend's bos id
    or an id its phoneme table does not use (a phoneme's id would change what the model hears)."""
    from .frontend.phoneme_table import en_us

    table = en_us()
    used = {i for ids in table.id_map.values() for i in ids} - set(table.bos_ids)
    ids: set[str] = set()
    tokens: dict[int, str] = {}
    for v in voices:
        if not v.id.strip():
            raise ModelDirectoryError(f"{path}: a voice in config.json's 'voices' has an empty id")
        if v.id in ids:
            raise ModelDirectoryError(f"{path}: config.json's 'voices' lists the id {v.id!r} twice; ids must be unique")
        ids.add(v.id)
        if not 0 <= v.voice_token < n_phoneme_tokens:
            raise ModelDirectoryError(
                f"{path}: voice {v.id!r} has voice_token {v.voice_token}, outside [0, {n_phoneme_tokens}) "
                "(n_phoneme_tokens)"
            )
        if v.voice_token in used:
            raise ModelDirectoryError(
                f"{path}: voice {v.id!r} has voice_token {v.voice_token}, a phoneme id of the frontend's table; "
                f"a voice token must be the bos id {table.bos_ids[0]} or an id the table does not use"
            )
        if v.voice_token in tokens:
            raise ModelDirectoryError(
                f"{path}: voices {tokens[v.voice_token]!r} and {v.id!r} share voice_token {v.voice_token}; "
                "tokens must be unique"
            )
        tokens[v.voice_token] = v.id


def _optional_str(voice: dict[str, Any], key: str) -> str | None:
    value = voice.get(key)
    return None if value is None else str(value)


def _check_phoneme_table(path: Path) -> None:
    """A voice's `phonemes.json` (written by training/export.py: the ids it was trained on) must be the
    frontend's table: other ids would make the model speak the wrong sounds, without an error."""
    from .frontend.phoneme_table import PhonemeTable, en_us

    file = path / "phonemes.json"
    if not file.is_file():
        return
    try:
        table = PhonemeTable.from_dict(json.loads(file.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ModelDirectoryError(f"{file} is not a phoneme table: {e}") from None
    if table != en_us():
        raise ModelDirectoryError(
            f"{file}: the voice was trained on a phoneme table other than the server's "
            "frontend (uttera_server/frontend/phonemes_en_us.json); serve it with the "
            "frontend it was trained with"
        )
