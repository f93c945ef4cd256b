"""One context of a speech WebSocket: text in, ordered segments, audio and words out. Pure: no I/O.

Text goes through a `TextChunker`; each chunk becomes a `Segment`, synthesized in order. Up to
`ContextConfig.pipeline_depth` segments run at once, so the next segment's engine request starts while
the previous one's audio still streams; the audio and words of a segment that is not at the head are
held until every segment before it has finished, so a context's audio never overlaps or reorders.
Word timings of the leading segment are gathered and sent as one `timestamps` message right before its
next audio frame (the engine is ahead of the vocoder, so a word is always sent with or before its audio),
or when the segment finishes. `flush` places a mark in the same ordered work list: `flushed` goes out
when everything before the mark has been sent. `end` finishes the context with `done` once its work
list is empty.

Audio goes out in the context's format through its `StreamEncoder` (audio/formats.py): PCM as it comes,
codecs in whole frames, so up to one codec frame of a flushed text's audio leaves only with later audio or
with `done` (the encoder is flushed, and the stream ended, only then). Timings count PCM, not encoded bytes.

Times are seconds of a monotonic clock, passed in by the caller.
"""

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, auto

import numpy as np

from . import messages as wire
from ..audio.formats import open_encoder
from .playout import PlayoutClock
from ..speech_params import AudioFormat
from .text_chunker import Chunk, ChunkerConfig, TextChunker
from ..audio.wav import duration_s
from ..synthesis import VoiceInfo
from ..synthesis.word_clock import WordTiming
from .actions import Action, SendAudio, SendMessage, Segment, StartSynthesis, StopSynthesis, Underrun


class ContextState(Enum):
    OPEN = auto()  # accepting text
    ENDING = auto()  # `end` received: synthesizing what is left, then `done`
    FINISHED = auto()  # `done` emitted, or stopped (cancel, error, disconnect): no more events


class SegmentState(Enum):
    QUEUED = auto()
    RUNNING = auto()  # StartSynthesis emitted
    DONE = auto()  # the synthesizer finished it (its audio may still be held)


@dataclass(frozen=True, slots=True)
class ContextConfig:
    sample_rate: int  # Hz of the PCM the synthesizer yields
    chunking: ChunkerConfig = field(default_factory=ChunkerConfig)
    pipeline_depth: int = 2  # segments of one context synthesized at once

    def __post_init__(self) -> None:
        if self.pipeline_depth < 1:
            raise ValueError(f"pipeline_depth must be >= 1, got {self.pipeline_depth}")


@dataclass(slots=True)
class _Work:
    """A segment in the context's ordered work list."""

    segment: Segment
    state: SegmentState = SegmentState.QUEUED
    held: list[bytes] = field(default_factory=list)  # audio received before it led
    held_bytes: int = 0
    words: list[WordTiming] = field(default_factory=list)  # timings not sent yet
    base_bytes: int | None = None  # audio bytes of the context before this segment; set when it leads

    def move(self, expected: SegmentState, to: SegmentState) -> None:
        if self.state is not expected:
            raise RuntimeError(
                f"segment {self.segment.id}: expected {expected.name} to move to {to.name}, but it is {self.state.name}"
            )
        self.state = to


class _FlushMark:
    """Answer `flushed` once everything before this mark has been sent."""


class ContextStream:
    def __init__(
        self,
        context_id: str,
        voice: VoiceInfo,
        speed: float,
        config: ContextConfig,
        new_segment_id: Callable[[], int],
        audio_format: AudioFormat = AudioFormat.PCM,
    ):
        self.id = context_id
        self.audio_format = audio_format
        self.encoder = open_encoder(audio_format, config.sample_rate)
        self.voice = voice
        self.speed = speed
        self.config = config
        self.state = ContextState.OPEN
        self.characters = 0  # text received, in characters
        self.audio_bytes = 0  # PCM sent
        self.any_segment = False  # some non-blank text was cut into a segment
        self._new_segment_id = new_segment_id
        self._chunker = TextChunker(config.chunking)
        self._work: deque[_Work | _FlushMark] = deque()
        self._playout = PlayoutClock()

    @property
    def format_name(self) -> str:
        """The `format` of the `started` message: `pcm_s16le` for raw PCM, else the format's name."""
        return wire.PCM_FORMAT if self.audio_format is AudioFormat.PCM else self.audio_format.value

    # --- queries ------------------------------------------------------------------------------------

    @property
    def audio_s(self) -> float:
        return duration_s(self.audio_bytes, self.config.sample_rate)

    @property
    def audio_ms(self) -> int:
        return round(1000 * self.audio_s)

    @property
    def unspoken_chars(self) -> int:
        """Text received that has not been synthesized to the end yet."""
        queued = sum(
            len(w.segment.text) for w in self._work if isinstance(w, _Work) and w.state is not SegmentState.DONE
        )
        return self._chunker.pending_chars + queued

    @property
    def synthesizing(self) -> bool:
        return any(isinstance(w, _Work) and w.state is SegmentState.RUNNING for w in self._work)

    def lead_s(self, now: float) -> float:
        """Audio sent to the client and not yet played, in seconds (a real-time player from the first frame)."""
        return self._playout.lead(now)

    def deadline(self) -> float | None:
        """When `tick` must run (the chunker's max wait), or None."""
        return self._chunker.deadline() if self.state is ContextState.OPEN else None

    def holds_too_much(self, segment_id: int, limit_bytes: int) -> bool:
        """True while the segment is not at the head and holds more than `limit_bytes` of audio."""
        work = self._find(segment_id)
        return work is not None and work.base_bytes is None and work.held_bytes > limit_bytes

    # --- client input -------------------------------------------------------------------------------

    def text(self, fragment: str, now: float) -> list[Action]:
        self._expect(ContextState.OPEN, "text")
        self.characters += len(fragment)
        return self._enqueue(self._chunker.push(fragment, now), now)

    def tick(self, now: float) -> list[Action]:
        if self.state is not ContextState.OPEN:
            return []
        return self._enqueue(self._chunker.tick(now), now)

    def flush(self, now: float) -> list[Action]:
        if self.state is ContextState.FINISHED:
            raise RuntimeError(f"context {self.id!r}: flush after it finished")
        chunks = self._chunker.flush() if self.state is ContextState.OPEN else []
        self._work.extend(self._segments(chunks))
        self._work.append(_FlushMark())
        return self._advance(now)

    def end(self, now: float) -> list[Action]:
        """Finish after what is buffered; the caller checks `any_segment` first (nothing to speak is an error)."""
        self._expect(ContextState.OPEN, "end")
        self._work.extend(self._segments(self._chunker.flush()))
        self.state = ContextState.ENDING
        return self._advance(now)

    def stop(self) -> list[Action]:
        """Cancel, error or disconnect: abort the running segments; nothing more is emitted."""
        running = [w.segment for w in self._work if isinstance(w, _Work) and w.state is SegmentState.RUNNING]
        self._work.clear()
        self.state = ContextState.FINISHED
        self.encoder.close()
        return [StopSynthesis(s) for s in running]

    # --- synthesis events ---------------------------------------------------------------------------

    def audio(self, segment_id: int, pcm: bytes, now: float) -> list[Action]:
        work = self._running(segment_id)
        if work.base_bytes is None:
            work.held.append(pcm)
            work.held_bytes += len(pcm)
            return []
        return self._send_audio(work, pcm, now)

    def words(self, segment_id: int, words: list[WordTiming]) -> list[Action]:
        self._running(segment_id).words += words  # sent with the segment's next audio, or at its end
        return []

    def segment_done(self, segment_id: int, now: float) -> list[Action]:
        self._running(segment_id).move(SegmentState.RUNNING, SegmentState.DONE)
        return self._advance(now)

    # --- helpers ------------------------------------------------------------------------------------

    def _expect(self, state: ContextState, what: str) -> None:
        if self.state is not state:
            raise RuntimeError(f"context {self.id!r}: {what} expects state {state.name}, it is {self.state.name}")

    def _find(self, segment_id: int) -> _Work | None:
        return next((w for w in self._work if isinstance(w, _Work) and w.segment.id == segment_id), None)

    def _running(self, segment_id: int) -> _Work:
        work = self._find(segment_id)
        if work is None or work.state is not SegmentState.RUNNING:
            raise RuntimeError(f"context {self.id!r}: segment {segment_id} is not running")
        return work

    def _segments(self, chunks: list[Chunk]) -> list[_Work]:
        out = []
        for c in chunks:
            out.append(
                _Work(
                    Segment(
                        self._new_segment_id(),
                        self.id,
                        c.text,
                        self.voice,
                        self.speed,
                        text_offset=c.start,
                        since=c.since,
                    )
                )
            )
            self.any_segment = True
        return out

    def _enqueue(self, chunks: list[Chunk], now: float) -> list[Action]:
        if not chunks:
            return []
        self._work.extend(self._segments(chunks))
        return self._advance(now)

    def _advance(self, now: float) -> list[Action]:
        """Send what the head allows, start segments up to the pipeline depth, finish an ending context."""
        actions: list[Action] = []
        while self._work:
            head = self._work[0]
            if isinstance(head, _FlushMark):
                self._work.popleft()
                actions.append(SendMessage(wire.flushed(self.id)))
                continue
            if head.base_bytes is None:  # it leads now: release what it holds
                head.base_bytes = self.audio_bytes
                for pcm in head.held:
                    actions += self._send_audio(head, pcm, now)
                head.held.clear()
                head.held_bytes = 0
            if head.state is not SegmentState.DONE:
                break
            actions += self._timestamps(head)
            self._work.popleft()
        running = sum(1 for w in self._work if isinstance(w, _Work) and w.state is SegmentState.RUNNING)
        for work in self._work:
            if running >= self.config.pipeline_depth:
                break
            if isinstance(work, _Work) and work.state is SegmentState.QUEUED:
                work.move(SegmentState.QUEUED, SegmentState.RUNNING)
                actions.append(StartSynthesis(work.segment))
                running += 1
        if not self._work and self.state is ContextState.ENDING:
            self.state = ContextState.FINISHED
            tail = self.encoder.flush()  # the codec's last frame and the container's end
            if tail:
                actions.append(SendAudio(self.id, wire.encode_audio_frame(self.id, tail)))
            actions.append(SendMessage(wire.done(self.id, self.audio_ms, self.characters)))
        return actions

    def _send_audio(self, work: _Work, pcm: bytes, now: float) -> list[Action]:
        actions: list[Action] = self._timestamps(work)
        if self._playout.sent(duration_s(len(pcm), self.config.sample_rate), now, work.segment.since):
            actions.append(Underrun(self.id))
        self.audio_bytes += len(pcm)
        encoded = self.encoder.encode(np.frombuffer(pcm, dtype="<i2"))
        if encoded:
            actions.append(SendAudio(self.id, wire.encode_audio_frame(self.id, encoded)))
        return actions

    def _timestamps(self, work: _Work) -> list[Action]:
        """The leading segment's gathered word timings as one message (none if there are none)."""
        if not work.words:
            return []
        assert work.base_bytes is not None  # the leading segment's
        base_ms = 1000 * duration_s(work.base_bytes, self.config.sample_rate)
        words = [
            WordTiming(w.word, round(base_ms + w.start_ms), round(base_ms + w.end_ms), w.char_start, w.char_end)
            for w in work.words
        ]
        work.words.clear()
        return [SendMessage(wire.timestamps(self.id, words))]
