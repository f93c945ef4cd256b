"""The streaming WAV header and PCM byte layout."""

import io
import wave

import numpy as np
import pytest

from _speech_client import parse_wav_header
from uttera_server.audio.wav import WAV_HEADER_BYTES, duration_s, pcm_bytes, streaming_wav_header


def test_header_fields_and_unknown_sizes():
    header = streaming_wav_header(22050)
    assert len(header) == WAV_HEADER_BYTES == 44
    assert parse_wav_header(header) == {
        "riff_size": 0xFFFFFFFF, "fmt_size": 16, "audio_format": 1, "channels": 1, "sample_rate": 22050,
        "byte_rate": 44100, "block_align": 2, "bits": 16, "data_size": 0xFFFFFFFF,
    }  # fmt: skip


def test_stdlib_wave_reads_a_streamed_file():
    pcm = np.array([0, 1000, -1000, 32767, -32768], np.int16)
    with wave.open(io.BytesIO(streaming_wav_header(16000) + pcm_bytes(pcm))) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        assert np.array_equal(np.frombuffer(w.readframes(100), "<i2"), pcm)


def test_pcm_is_little_endian_int16():
    assert pcm_bytes(np.array([1, -2], np.int16)) == b"\x01\x00\xfe\xff"
    assert pcm_bytes(np.array([1], ">i2")) == b"\x01\x00"
    assert duration_s(44100, 22050) == 1.0


def test_bad_rate_is_refused():
    with pytest.raises(ValueError):
        streaming_wav_header(0)
