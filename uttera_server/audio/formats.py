"""Streamed audio encoders: int16 mono PCM in, the bytes of one response format out, chunk by chunk.

Sans-I/O: `encode(pcm) -> bytes` takes the next samples of one stream and returns the bytes that are
ready (possibly none: codecs work on whole frames); `flush() -> bytes` ends the stream (the encoder's last
frame, padding, the container's trailer). One encoder per stream; it holds the codec's and the container's
state, so `with open_encoder(...) as enc:` releases it. Encoded in chunks, the output equals the one-shot
encoding of the same samples wherever the codec is deterministic (every format here, see the tests):
frames are cut by the resampler's FIFO, not by chunk boundaries, so chunking adds no gap or click.

Compressed formats use FFmpeg through PyAV, written to a non-seekable sink, so every container is
written as a stream of unknown length: MP3 without a Xing/ID3 header, Ogg pages of one 20 ms Opus packet
each, FLAC with 0 (unknown) total samples, AAC in ADTS frames, raw mu-law at 8 kHz.
"""

from dataclasses import dataclass

import av
import numpy as np

from ..speech_params import AudioFormat
from .wav import pcm_bytes, streaming_wav_header


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """How one format is encoded with FFmpeg."""

    container: str  # FFmpeg muxer
    codec: str  # FFmpeg encoder
    media_type: str
    rate: int | None = None  # output sample rate in Hz; None = the source's
    bit_rate: int | None = None  # bits/s for lossy codecs
    codec_options: tuple[tuple[str, str], ...] = ()
    muxer_options: tuple[tuple[str, str], ...] = ()


SPECS: dict[AudioFormat, CodecSpec] = {
    AudioFormat.MP3: CodecSpec(
        "mp3", "libmp3lame", "audio/mpeg", bit_rate=64_000, muxer_options=(("id3v2_version", "0"), ("write_xing", "0"))
    ),
    # Opus runs at 48 kHz (22.05 kHz is not one of its rates); one 20 ms packet per Ogg page so each
    # packet leaves as soon as it is encoded.
    AudioFormat.OPUS: CodecSpec(
        "ogg",
        "libopus",
        "audio/ogg",
        rate=48_000,
        bit_rate=32_000,
        codec_options=(("frame_duration", "20"), ("application", "audio")),
        muxer_options=(("page_duration", "20000"),),
    ),
    # 1024-sample blocks (46 ms at 22.05 kHz) rather than FFmpeg's 4608, for time to first byte.
    AudioFormat.FLAC: CodecSpec("flac", "flac", "audio/flac", codec_options=(("frame_size", "1024"),)),
    AudioFormat.AAC: CodecSpec("adts", "aac", "audio/aac", bit_rate=64_000),
    AudioFormat.MULAW: CodecSpec("mulaw", "pcm_mulaw", "audio/basic", rate=8_000),
}
MEDIA_TYPES: dict[AudioFormat, str] = {
    AudioFormat.WAV: "audio/wav",
    AudioFormat.PCM: "audio/pcm",
    **{f: s.media_type for f, s in SPECS.items()},
}


def output_rate(fmt: AudioFormat, sample_rate: int) -> int:
    """Sample rate in Hz of `fmt`'s audio when the source is `sample_rate` Hz."""
    spec = SPECS.get(fmt)
    return sample_rate if spec is None or spec.rate is None else spec.rate


class StreamEncoder:
    """Base: `encode` and `flush` as described in the module docstring; `close` frees codec state."""

    format: AudioFormat
    sample_rate: int  # Hz of the encoded audio

    def encode(self, pcm: np.ndarray) -> bytes:
        """`pcm`: int16 samples `(n,)` at the source rate -> the bytes ready now."""
        raise NotImplementedError

    def flush(self) -> bytes:
        """End of the stream: the bytes still held. No `encode` may follow."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "StreamEncoder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PcmEncoder(StreamEncoder):
    """Raw PCM s16le mono, or (`wav=True`) a streaming WAV header before it."""

    def __init__(self, sample_rate: int, wav: bool = False):
        self.format = AudioFormat.WAV if wav else AudioFormat.PCM
        self.sample_rate = sample_rate
        self._head = streaming_wav_header(sample_rate) if wav else b""

    def encode(self, pcm: np.ndarray) -> bytes:
        head, self._head = self._head, b""
        return head + pcm_bytes(pcm)

    def flush(self) -> bytes:
        head, self._head = self._head, b""
        return head  # an empty stream still has its header


class _Sink:
    """A write-only file for PyAV: no `seek`, so muxers write for a stream of unknown length."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buf += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


class CodecEncoder(StreamEncoder):
    """One stream of a format in `SPECS`, encoded by FFmpeg's encoder and muxer."""

    def __init__(self, fmt: AudioFormat, sample_rate: int):
        spec = SPECS[fmt]
        self.format = fmt
        self.source_rate = sample_rate
        self.sample_rate = spec.rate or sample_rate
        self._sink = _Sink()
        # flush_packets: the muxer hands each packet to the sink at once instead of filling a 32 KiB buffer;
        # bitexact: no random Ogg serial number, no version string, so equal input gives equal bytes.
        self._container = av.open(
            self._sink,
            "w",
            format=spec.container,
            options={"flush_packets": "1", "fflags": "+bitexact", **dict(spec.muxer_options)},
        )
        av_stream = self._container.add_stream(
            spec.codec, rate=self.sample_rate, layout="mono", options={"flags": "+bitexact", **dict(spec.codec_options)}
        )
        if not isinstance(av_stream, av.AudioStream):
            raise TypeError(f"{spec.codec} is not an audio codec")
        self._av_stream = av_stream  # PyAV's stream of the container
        ctx = self._av_stream.codec_context
        if spec.bit_rate:
            ctx.bit_rate = spec.bit_rate
        ctx.open()  # now ctx.frame_size is the codec's (0 for PCM codecs: any frame size)
        self._resampler = av.AudioResampler(
            format=ctx.format, layout="mono", rate=self.sample_rate, frame_size=ctx.frame_size or None
        )
        self._container.start_encoding()  # the header, returned by the first `encode` or `flush`
        self._pts = 0  # samples at the source rate fed so far
        self._closed = False

    def encode(self, pcm: np.ndarray) -> bytes:
        samples = np.ascontiguousarray(pcm, dtype=np.int16).reshape(1, -1)
        if samples.shape[1] == 0:
            return b""
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self.source_rate
        frame.pts = self._pts
        self._pts += samples.shape[1]
        return self._mux(self._resampler.resample(frame))

    def flush(self) -> bytes:
        out = self._mux(self._resampler.resample(None))
        for packet in self._av_stream.encode(None):
            self._container.mux(packet)
        self.close()
        return out + self._sink.take()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._container.close()  # writes the trailer (to the sink) when the header was written

    def _mux(self, frames: list[av.AudioFrame]) -> bytes:
        for frame in frames:
            for packet in self._av_stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()


def open_encoder(fmt: AudioFormat, sample_rate: int) -> StreamEncoder:
    """An encoder for one stream of `fmt` from int16 mono PCM at `sample_rate` Hz."""
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    if fmt in (AudioFormat.WAV, AudioFormat.PCM):
        return PcmEncoder(sample_rate, wav=fmt is AudioFormat.WAV)
    return CodecEncoder(fmt, sample_rate)
