"""A voice directory's phoneme table (`phonemes.json`, from training/export.py) is checked against the
frontend's at load: a voice trained on other ids is refused with a clear error, not served wrong."""

import json
import shutil
from importlib import resources

import pytest

from uttera_server.frontend.phoneme_table import TABLE_FILE
from uttera_server.model_dir import ModelDirectoryError, VoiceModelConfig

FRONTEND_TABLE = json.loads(resources.files("uttera_server.frontend").joinpath(TABLE_FILE).read_text())


@pytest.fixture
def voice(tiny_model_dir, tmp_path):
    d = tmp_path / "voice"
    shutil.copytree(tiny_model_dir, d)
    return d


def test_the_frontends_own_table_loads(voice):
    (voice / "phonemes.json").write_text(json.dumps(FRONTEND_TABLE))
    assert VoiceModelConfig.load(voice).path == voice


def test_no_table_loads(voice):
    (voice / "phonemes.json").unlink(missing_ok=True)
    assert VoiceModelConfig.load(voice).path == voice


def test_a_voice_trained_on_other_ids_is_refused(voice):
    other = json.loads(json.dumps(FRONTEND_TABLE))
    first = next(iter(other["phoneme_id_map"]))
    other["phoneme_id_map"][first] = [250]
    (voice / "phonemes.json").write_text(json.dumps(other))
    with pytest.raises(ModelDirectoryError, match="phoneme table other than the server's frontend"):
        VoiceModelConfig.load(voice)
    (voice / "phonemes.json").write_text("{not json")
    with pytest.raises(ModelDirectoryError, match="not a phoneme table"):
        VoiceModelConfig.load(voice)


def test_the_shipped_voices_name_their_speaker_teacher_and_license():
    """What /v1/audio/voices lists for the embedded voice (its model card: voices/default/README.md)."""
    from pathlib import Path

    voice = VoiceModelConfig.load(Path(__file__).resolve().parents[2] / "voices" / "default")
    assert (voice.language, voice.gender, voice.license, voice.sample_rate) == ("en-US", "male", "Apache-2.0", 22050)
    assert voice.teacher is not None and "en_US-joe-medium" in voice.teacher
    # Two voices in the one model: joe first (the default), heart by its voice token.
    joe, heart = voice.voices
    assert (joe.id, joe.voice_token, joe.gender, joe.license) == ("joe", 1, "male", "Apache-2.0")
    assert (heart.id, heart.voice_token, heart.gender, heart.license) == ("heart", 255, "female", "Apache-2.0")
    assert joe.teacher == voice.teacher and heart.teacher is not None and "af_heart" in heart.teacher


# --- config.json's `voices` list (one model directory, several voices) ---


def with_voices(voice, voices) -> None:
    file = voice / "config.json"
    cfg = json.loads(file.read_text())
    cfg["voices"] = voices
    file.write_text(json.dumps(cfg))


def entry(voice_id: str, token: int) -> dict:
    return {"id": voice_id, "voice_token": token, "name": voice_id, "language": "en-US", "gender": "female"}


def test_a_voices_list_loads_in_order_and_without_one_the_directory_is_one_voice(voice):
    assert VoiceModelConfig.load(voice).voices == ()  # served as "default", prompts unchanged
    with_voices(voice, [entry("joe", 1), entry("heart", 255)])
    voices = VoiceModelConfig.load(voice).voices
    assert [(v.id, v.voice_token, v.name, v.gender, v.teacher) for v in voices] == [
        ("joe", 1, "joe", "female", None),
        ("heart", 255, "heart", "female", None),
    ]


@pytest.mark.parametrize(
    ("voices", "message"),
    [
        ([entry("joe", 1), entry("joe", 255)], "lists the id 'joe' twice; ids must be unique"),
        ([entry("", 1)], "has an empty id"),
        ([entry("joe", 1), entry("heart", 1)], "voices 'joe' and 'heart' share voice_token 1; tokens must be unique"),
        ([entry("joe", 256)], r"voice 'joe' has voice_token 256, outside \[0, 256\)"),
        ([entry("joe", -1)], r"outside \[0, 256\)"),
        (
            [entry("joe", 20)],
            "voice_token 20, a phoneme id of the frontend's table; a voice token must be the bos id 1",
        ),
        ([entry("joe", 0)], "a phoneme id of the frontend's table"),  # the pad id
        ([{**entry("joe", 1), "voice_token": "1"}], r"voices\[0\].voice_token must be an integer, got '1'"),
        ([{"voice_token": 1}], r"voices\[0\].id must be a string"),
        ([], "'voices' must be a non-empty list"),
        ({"joe": 1}, "'voices' must be a non-empty list"),
    ],
)
def test_a_bad_voices_list_is_a_typed_error_that_names_the_problem(voice, voices, message):
    with_voices(voice, voices)
    with pytest.raises(ModelDirectoryError, match=message):
        VoiceModelConfig.load(voice)
