"""The streamed encoders (uttera_server/audio/formats.py): chunked == one-shot, and every format decodes, with
FFmpeg's own decoders (not the encoders' libraries: LAME and libopus encode, FFmpeg's native mp3 and opus
decoders decode), to audio of the right rate, duration and content."""

import io

import av
import numpy as np
import pytest

from uttera_server.audio.formats import MEDIA_TYPES, PcmEncoder, open_encoder, output_rate
from uttera_server.speech_params import AudioFormat
from uttera_server.audio.wav import WAV_HEADER_BYTES

RATE = 22_050  # the default voice's rate; the encoders take any
CODECS = [AudioFormat.MP3, AudioFormat.OPUS, AudioFormat.FLAC, AudioFormat.AAC, AudioFormat.MULAW]


def speechlike(seconds: float, rate: int = RATE) -> np.ndarray:
    """A voiced, syllable-rate modulated signal: int16 `(seconds * rate,)`."""
    t = np.arange(int(seconds * rate)) / rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    return (6000 * voiced * envelope).astype(np.int16)


def encode_chunked(fmt: AudioFormat, pcm: np.ndarray, seed: int = 0) -> tuple[bytes, list[bytes]]:
    """(whole stream, the bytes each `encode` call returned) for random chunk sizes from 1 sample to 0.2 s."""
    rng = np.random.default_rng(seed)
    parts, i = [], 0
    with open_encoder(fmt, RATE) as enc:
        while i < len(pcm):
            n = int(rng.integers(1, RATE // 5))
            parts.append(enc.encode(pcm[i : i + n]))
            i += n
        tail = enc.flush()
    return b"".join(parts) + tail, parts


def encode_once(fmt: AudioFormat, pcm: np.ndarray) -> bytes:
    with open_encoder(fmt, RATE) as enc:
        return enc.encode(pcm) + enc.flush()


def decode(fmt: AudioFormat, data: bytes) -> tuple[np.ndarray, int]:
    """(int16 mono samples, sample rate) decoded by FFmpeg; raw mu-law needs its rate named."""
    options = {"sample_rate": "8000", "ch_layout": "mono"} if fmt is AudioFormat.MULAW else {}
    with av.open(io.BytesIO(data), "r", format="mulaw" if fmt is AudioFormat.MULAW else None, options=options) as c:
        resampler = av.AudioResampler(format="s16", layout="mono")
        frames = [f for frame in c.decode(audio=0) for f in resampler.resample(frame)]
        rate = c.streams.audio[0].codec_context.sample_rate
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]), rate


def resample(pcm: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    if from_rate == to_rate:
        return pcm
    frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = from_rate
    r = av.AudioResampler(format="s16", layout="mono", rate=to_rate)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in [*r.resample(frame), *r.resample(None)]])


def best_alignment(ref: np.ndarray, out: np.ndarray, max_lag: int = 4000) -> tuple[int, float]:
    """(lag of `out` behind `ref` in samples, within +-max_lag, normalized correlation at that lag), by FFT."""
    n = min(len(ref), len(out))
    a, b = ref[:n].astype(np.float64), out[:n].astype(np.float64)
    size = 1 << (2 * n - 1).bit_length()
    xc = np.fft.irfft(np.fft.rfft(b, size) * np.conj(np.fft.rfft(a, size)), size)  # xc[k] = sum a[i] b[i+k]
    lags = np.r_[np.arange(0, max_lag + 1), np.arange(-max_lag, 0)]
    lag = int(lags[np.argmax(xc[lags % size])])
    x, y = (a[: n - lag], b[lag:]) if lag >= 0 else (a[-lag:], b[: n + lag])
    return lag, float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-9))


@pytest.fixture(scope="module")
def signal() -> np.ndarray:
    return speechlike(10.0)


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_chunked_equals_one_shot(fmt, signal):
    chunked, parts = encode_chunked(fmt, signal)
    assert chunked == encode_once(fmt, signal)
    assert sum(1 for p in parts if p) > len(parts) // 4, "the encoder held back its output instead of streaming"


@pytest.mark.parametrize("fmt", CODECS)
def test_decodes_to_rate_duration_and_content(fmt, signal):
    data, _ = encode_chunked(fmt, signal, seed=1)
    decoded, rate = decode(fmt, data)
    assert rate == output_rate(fmt, RATE) == {AudioFormat.OPUS: 48_000, AudioFormat.MULAW: 8_000}.get(fmt, RATE)
    assert abs(len(decoded) / rate - len(signal) / RATE) <= 0.01 * len(signal) / RATE
    back = resample(decoded, rate, RATE)
    if fmt is AudioFormat.FLAC:
        assert np.array_equal(decoded, signal)  # lossless, sample for sample
        return
    lag, corr = best_alignment(signal, back)
    floor = {AudioFormat.MULAW: 0.98, AudioFormat.AAC: 0.95, AudioFormat.MP3: 0.95, AudioFormat.OPUS: 0.95}[fmt]
    assert corr > floor, f"{fmt}: correlation {corr:.3f} with the source (lag {lag})"
    assert 0 <= lag < 0.1 * RATE  # an encoder's delay, never ahead of the source


def test_wav_and_pcm_are_the_samples(signal):
    wav = encode_once(AudioFormat.WAV, signal)
    assert wav[WAV_HEADER_BYTES:] == encode_once(AudioFormat.PCM, signal) == signal.astype("<i2").tobytes()
    with av.open(io.BytesIO(wav)) as c:
        assert c.streams.audio[0].codec_context.sample_rate == RATE


def test_empty_stream_is_still_a_valid_header():
    assert len(PcmEncoder(RATE, wav=True).flush()) == WAV_HEADER_BYTES
    with open_encoder(AudioFormat.OPUS, RATE) as enc:
        assert enc.flush().startswith(b"OggS")


@pytest.mark.parametrize(
    "fmt, magic",
    [(AudioFormat.OPUS, b"OggS"), (AudioFormat.FLAC, b"fLaC"), (AudioFormat.MP3, b"\xff"), (AudioFormat.AAC, b"\xff")],
)
def test_stream_headers_come_first(fmt, magic, signal):
    """No ID3 or Xing placeholder: a stream of unknown length starts with its container header or a frame."""
    with open_encoder(fmt, RATE) as enc:
        first = b"".join(enc.encode(signal[i : i + 512]) for i in range(0, RATE, 512))
    assert first.startswith(magic)


def test_media_types_cover_every_format():
    assert set(MEDIA_TYPES) == set(AudioFormat)


def test_bad_rate_is_refused():
    with pytest.raises(ValueError, match="sample_rate"):
        open_encoder(AudioFormat.MP3, 0)


@pytest.mark.parametrize("fmt", [AudioFormat.MP3, AudioFormat.OPUS, AudioFormat.MULAW])
def test_libsndfile_decodes_the_stream(fmt, signal):
    """A decoder that shares no code with FFmpeg: libsndfile (libmpg123, libopus, its own G.711). Not FLAC:
    libsndfile 1.2 cannot open a FLAC stream whose STREAMINFO leaves the length unknown (it seeks to the
    end), which a streamed FLAC must; nor AAC, which it does not decode."""
    soundfile = pytest.importorskip("soundfile")
    data, _ = encode_chunked(fmt, signal, seed=2)
    raw = {"format": "RAW", "subtype": "ULAW", "samplerate": 8000, "channels": 1} if fmt is AudioFormat.MULAW else {}
    decoded, rate = soundfile.read(io.BytesIO(data), dtype="int16", **raw)
    assert rate == output_rate(fmt, RATE)
    assert abs(len(decoded) / rate - len(signal) / RATE) <= 0.01 * len(signal) / RATE
    lag, corr = best_alignment(signal, resample(decoded, rate, RATE))
    assert corr > 0.95 and -2 <= lag < 0.1 * RATE, (corr, lag)  # -2: rounding of the 48 kHz resampling
