"""Which rows of a step voiced their mel chunk (engine_patches/gpu_model_runner.py, `voiced`), and when the
engine runs with vLLM's async scheduling (`EngineConfig.async_scheduling`, `MelEngine.engine_args`).

The rule reads a request's generated tokens after the step's bookkeeping: this step's token last (vLLM's
-1 placeholder under async scheduling), the consumed one before it. The real engine runs the synchronous
case in every engine test (the CPU platform has no async scheduling); these cases pin the async one.
"""

import dataclasses

import pytest

from engine_patches.gpu_model_runner import voiced
from uttera_server.config import EngineConfig
from uttera_server.model_dir import VoiceModelConfig
from uttera_server.synthesis.mel_engine import MelEngine

STOP = 100
P0, P1, P2 = 10, 11, 12  # pointers (pointer_offset 10)


@pytest.mark.parametrize(
    ("outputs", "expected", "why"),
    [
        ([], False, "nothing sampled yet"),
        ([P0], False, "the first pointer consumed the prompt's last position"),
        ([P0, P1], True, "consumed the generated pointer P0"),
        ([P0, P1, STOP], True, "the step that samples STOP still voices the pointer it consumed"),
        ([P0, -1], True, "async: this step's token is a placeholder, the consumed one is known"),
        ([P0, P1, STOP, -1], False, "async: the extra step after STOP consumed STOP, not a pointer"),
        ([P0, P1, STOP, P2], False, "whatever it sampled, a row that consumed STOP is not speech"),
    ],
)
def test_a_row_voices_iff_it_consumed_a_generated_pointer(outputs, expected, why):
    assert voiced(outputs, STOP) is expected, why


@pytest.mark.parametrize(
    ("asked", "engine_vocoder", "expected"),
    [
        (None, False, None),  # vLLM's choice (on for CUDA, off on CPU)
        (None, True, False),  # off with the in-engine vocoder until measured there
        (True, True, True),
        (False, False, False),
    ],
)
def test_async_scheduling_reaches_vllm_as_resolved(tiny_model_dir, tmp_path, asked, engine_vocoder, expected):
    from engine_patches.engine_vocoder import EngineVocoderConfig

    voc = EngineVocoderConfig(sink_base=f"ipc://{tmp_path}/pcm") if engine_vocoder else None
    config = dataclasses.replace(EngineConfig(), async_scheduling=asked)
    args = MelEngine(VoiceModelConfig.load(tiny_model_dir), config, engine_vocoder=voc).engine_args()
    assert args.async_scheduling is expected
