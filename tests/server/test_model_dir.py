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


def test_the_shipped_voice_names_its_speaker_teacher_and_license():
    """What /v1/audio/voices lists for the embedded voice (its model card: voices/default/README.md)."""
    from pathlib import Path

    voice = VoiceModelConfig.load(Path(__file__).resolve().parents[2] / "voices" / "default")
    assert (voice.language, voice.gender, voice.license, voice.sample_rate) == ("en-US", "male", "Apache-2.0", 22050)
    assert voice.teacher is not None and "en_US-joe-medium" in voice.teacher
