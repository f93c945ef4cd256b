"""The WAVs in docs/samples/: the default voice through the running server, and one teacher clip.

    python docs/samples/make_samples.py [--model voices/default | --url http://127.0.0.1:8000]

Starts `python -m uttera_server serve --model DIR` on a free port (or uses `--url`), sends each sentence
below as `POST /v1/audio/speech` with `response_format=pcm`, and writes the s16le mono PCM as it came
(no gain, no trimming) into a WAV with a proper length header, at the server's `x-sample-rate`. The
teacher clip is Piper `en_US-joe-medium` on the frontend's phoneme ids of the same sentence
(`training.evaluate.teacher_audio`, peak-normalized to 0.95). Greedy decoding: the same text gives the
same audio, so re-running rewrites identical files.
"""

import argparse
import signal
import sys
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = [  # (file stem, text as sent; the server normalizes it)
    ("01_question", "Could you tell me where the nearest train station is?"),
    ("02_currency", "Your total comes to $42.15, and the deposit is $1,250."),
    ("03_date_time", "The meeting is on March 3rd, 2025, at 9:30 a.m."),
    ("04_abbreviation", "Dr. Smith moved to the U.S. in the 1990s."),
    ("05_greeting", "Hello! This is the default voice of uttera, streaming as it speaks."),
]
TEACHER = "03_date_time"  # the sentence also written as the teacher's clip


def write_wav(path: Path, pcm: bytes, sr: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm)


def ours(base_url: str) -> None:
    import httpx

    with httpx.Client(base_url=base_url, timeout=300) as client:
        for stem, text in SAMPLES:
            body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
            r = client.post("/v1/audio/speech", json=body)
            r.raise_for_status()
            sr = int(r.headers.get("x-sample-rate", "22050"))
            write_wav(HERE / f"{stem}.wav", r.content, sr)
            print(f"{stem}.wav  {len(r.content) / 2 / sr:.2f} s  {text}")


def teacher() -> None:
    import numpy as np
    from piper import PiperVoice

    from training import text_frontend
    from training.evaluate import teacher_audio, wav_bytes

    m, c = text_frontend.teacher_paths()
    voice = PiperVoice.load(m, config_path=c, include_alignments=True)
    text = dict(SAMPLES)[TEACHER]
    audio = np.concatenate([teacher_audio(voice, list(s.phoneme_ids))[0] for s in text_frontend.prepare(text)])
    sr = voice.config.sample_rate
    (HERE / f"teacher_piper_joe_{TEACHER}.wav").write_bytes(wav_bytes(0.95 * audio, sr))
    print(f"teacher_piper_joe_{TEACHER}.wav  {len(audio) / sr:.2f} s  {text}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--url", help="use a running server at this base URL instead of starting one")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the server we started
    from benchmarks.server import started_server, wait_healthy

    if a.url:
        wait_healthy(a.url.rstrip("/"))
        ours(a.url.rstrip("/"))
    else:
        with started_server(a.model) as base:
            ours(base)
    teacher()


if __name__ == "__main__":
    main()
