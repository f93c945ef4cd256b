"""`--vocoder hifigan-universal` and `voice-hifigan` for real: HiFi-GAN V1 (UNIVERSAL, and a voice's own
`hifigan/` folder) run on windows (vocoder/windowed.py) in the engine's worker, PCM over the PCM channel. Each utterance's PCM must equal `HifiGan.forward` on the
mel the same engine gives the same prompt as a plain request (temperature 0), within 1 LSB; the
server refuses the vocoder where it cannot run it, before it listens."""

import asyncio
import json
import shutil

import numpy as np
import pytest
import torch

from tests.engine.helpers import prompt
from tests.engine.test_engine_vocoder import (
    assert_pcm_equal,
    engine_config,
    mel_of,
    pcm_of,
    start_vocoding_engine,
    stop_vocoding_engine,
)
from uttera_server.errors import ConfigError
from vocoder import hifigan
from vocoder.hifigan import HifiGan


@pytest.fixture(scope="module")
def voice_with_hifigan(tiny_model_dir, tmp_path_factory):
    """The tiny voice with its own `hifigan/`: UNIVERSAL with its last conv halved, so that serving the
    package's generator instead would fail the comparison."""
    voice = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("hifigan") / "voice")
    net = HifiGan.from_package("hifigan-universal")
    with torch.no_grad():
        net.conv_post.weight.mul_(0.5)
    net.save(voice / hifigan.VOICE_DIR)
    return voice


@pytest.fixture(scope="module", params=["hifigan-universal", "voice-hifigan"])
async def hifigan_engine(request, tiny_model_dir, voice_with_hifigan):
    voice = voice_with_hifigan if request.param == "voice-hifigan" else tiny_model_dir
    v = await start_vocoding_engine(voice, engine_config(max_num_seqs=4), vocoder=request.param)
    yield v, hifigan.load(request.param, voice)
    await stop_vocoding_engine(v)


async def test_concurrent_utterances_equal_offline_hifigan(hifigan_engine):
    v, net = hifigan_engine
    prompts = [prompt(6 + 7 * i, seed=70 + i) for i in range(4)]
    mels, results = await asyncio.gather(
        asyncio.gather(*(mel_of(v.engine, ids) for ids in prompts)),
        asyncio.gather(*(pcm_of(v, ids, f"hifigan-{i}", read_delay=0.02 * i) for i, ids in enumerate(prompts))),
    )
    for i, (mel, (frames, pcm, _)) in enumerate(zip(mels, results)):
        assert frames == mel.shape[0], i
        with torch.inference_mode():
            audio = net(torch.from_numpy(np.ascontiguousarray(mel.T[None])))[0].numpy()
        assert_pcm_equal(pcm, (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16), f"utterance {i}")


def test_hifigan_needs_the_engine_process_and_a_matching_mel(tiny_model_dir, tmp_path):
    from uttera_server.synthesis.synthesizer import Synthesizer

    with pytest.raises(ConfigError, match="engine's worker only"):
        engine_config(vocoder="hifigan-universal", vocoder_process="frontend")
    other = shutil.copytree(tiny_model_dir, tmp_path / "voice")
    config = json.loads((other / "config.json").read_text())
    config["f_max"] = 11025.0  # a mel UNIVERSAL was not trained on
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="f_max"):
        Synthesizer(other, engine_config(vocoder="hifigan-universal"))
    with pytest.raises(ConfigError, match="ships no HiFi-GAN"):
        Synthesizer(tiny_model_dir, engine_config(vocoder="voice-hifigan"))
