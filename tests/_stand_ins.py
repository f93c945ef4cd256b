"""Stand-ins for the tests that drive the real app in-process (Starlette's TestClient)."""

from uttera_server.synthesis import VoiceInfo
from uttera_server.synthesis.mel_engine import EngineStats


class IdleSynthesizer:
    """Ready, with one voice; never asked to synthesize here."""

    sample_rate = 22050
    model_id = "uttera-test"
    max_input_chars = 1000
    voices = {"default": VoiceInfo("default", "test", "en-US", "", True, 22050)}
    sink = 0
    vocoder = "voice"

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    def is_failed(self) -> bool:
        return False

    def engine_stats(self) -> EngineStats:
        return EngineStats()

    def stream(self, *args, **kwargs):
        raise AssertionError("not used")
