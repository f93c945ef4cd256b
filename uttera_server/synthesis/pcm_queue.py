"""What a sentence's PCM queue carries, from the vocoder (`vocoder_worker`, or the engine's through
`pcm_receiver`) and the word clock to `Synthesizer._generate`: PCM arrays (float32 from a VocoderWorker,
int16 from the PCM channel), the sentence's word timings (`synthesizer._produce` puts them there, before
their audio), an exception when the stage failed, and None at the end of the sentence."""

import asyncio
from typing import TypeAlias

import numpy as np

from .word_clock import WordTiming

PcmItem: TypeAlias = np.ndarray | list[WordTiming] | BaseException | None
PcmQueue: TypeAlias = "asyncio.Queue[PcmItem]"
