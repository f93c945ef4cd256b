"""`Synthesizer` has every member of the `SpeechSynthesizer` seam the server is typed against.

The engine is constructed on the tiny model but never started: the check is structural (isinstance on a
`runtime_checkable` Protocol looks for each member).
"""

from uttera_server.config import EngineConfig
from uttera_server.synthesis import SpeechSynthesizer
from uttera_server.synthesis.synthesizer import Synthesizer


def test_synthesizer_satisfies_the_protocol(tiny_model_dir):
    synth = Synthesizer(tiny_model_dir, EngineConfig(vocoder_process="frontend"), max_input_chars=1000)
    assert isinstance(synth, SpeechSynthesizer)
    assert synth.sink == 0 and synth.max_input_chars == 1000 and "default" in synth.voices
    assert not synth.is_ready() and not synth.is_failed()
