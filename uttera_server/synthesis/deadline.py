"""When a stream's client runs out of audio: the deadline that orders engine requests and vocoder batches."""

from dataclasses import dataclass


@dataclass(slots=True)
class PlaybackDeadline:
    """When the client of one `stream()` runs out of audio, for ordering engine requests and vocoder
    batches (`EngineConfig.scheduling`): before its first audio, at arrival plus the audio it already
    had buffered (`lead_s`); after, at its first audio plus the audio generated so far."""

    arrival: float
    lead_s: float
    first_audio: float | None = None
    generated_s: float = 0.0  # audio of the sentences whose generation has ended

    def at(self) -> float:
        start = self.arrival + self.lead_s
        if self.first_audio is not None:
            start = max(start, self.first_audio)
        return start + self.generated_s
