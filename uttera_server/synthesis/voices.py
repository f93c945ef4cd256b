"""The voices of one model directory, as the server serves them, and the prompt each one gives the engine.

A multi-voice model (config.json's `voices` list, docs/model-format.md) speaks the voice whose token
replaces the prompt's first id (the bos id, `^`); a directory without the list is one voice,
`DEFAULT_VOICE`, whose prompts are the frontend's as they are. Every voice of a directory shares its
vocoder, so its `sample_rate`.
"""

from collections.abc import Mapping

from ..model_dir import VoiceEntry, VoiceModelConfig
from . import DEFAULT_VOICE, VoiceInfo


def served_voices(model: VoiceModelConfig, bos_id: int) -> tuple[dict[str, VoiceInfo], dict[str, int]]:
    """(the voices by id, first the default; each voice's prompt token by id). `bos_id`: the frontend's."""
    entries = model.voices or (
        VoiceEntry(
            DEFAULT_VOICE,
            bos_id,
            model.voice_name,
            model.language,
            model.description,
            model.random_weights,
            model.gender,
            model.teacher,
            model.license,
        ),
    )
    voices = {
        v.id: VoiceInfo(
            v.id, v.name, v.language, v.description, v.random_weights, model.sample_rate, v.gender, v.teacher, v.license
        )
        for v in entries
    }
    return voices, {v.id: v.voice_token for v in entries}


def accepted_voices(voices: Mapping[str, VoiceInfo]) -> dict[str, VoiceInfo]:
    """Every string a request may name a voice by: each voice's name and id (an id wins over another
    voice's equal name), and `DEFAULT_VOICE` for the first voice."""
    out = {v.name: v for v in voices.values()}
    out.update(voices)
    out[DEFAULT_VOICE] = next(iter(voices.values()))
    return out


def voice_prompt(phoneme_ids: list[int], voice_token: int) -> list[int]:
    """The engine prompt of one sentence in a voice: `phoneme_ids` (`[^, phonemes..., $]`) with its first
    id replaced by `voice_token` (the same length, so the pointer rules and timings are unchanged)."""
    return [voice_token, *phoneme_ids[1:]]
