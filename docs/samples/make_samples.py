"""docs/samples/: the default voice through the running server beside its teacher, and a listening page.

    python docs/samples/make_samples.py [--model voices/default | --url http://127.0.0.1:8000]

Starts `python -m uttera_server serve --model DIR` on a free port (or uses `--url`) and sends each sentence
below as `POST /v1/audio/speech` with `response_format=flac` (lossless: exactly the PCM the server streamed,
no gain, no trimming, at the server's `x-sample-rate`). The teacher clip of each sentence is Piper
`en_US-joe-medium` on the frontend's phoneme ids of the same sentence (`training.evaluate.teacher_audio`,
peak-normalized to 0.95, as the voice was trained), FLAC through the server's own encoder. `index.html`
puts the pairs side by side. Greedy decoding: the same text gives the same audio.
"""

import argparse
import html
import signal
import sys
from pathlib import Path

import numpy as np

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
PAGE_ROW = (
    '<tr><td>{text}</td><td>{spoken}</td><td><audio controls preload=none src="{stem}.flac"></audio> '
    '{ours_s:.2f} s</td><td><audio controls preload=none src="teacher_{stem}.flac"></audio> {teacher_s:.2f} s</td></tr>'
)


def flac(pcm: np.ndarray, sr: int) -> bytes:
    """int16 mono PCM -> a FLAC file, through the server's own encoder (audio/formats.py)."""
    from uttera_server.audio.formats import open_encoder
    from uttera_server.speech_params import AudioFormat

    encoder = open_encoder(AudioFormat.FLAC, sr)
    return encoder.encode(pcm) + encoder.flush()


def ours(base_url: str) -> dict[str, float]:
    import httpx

    seconds = {}
    with httpx.Client(base_url=base_url, timeout=300) as client:
        for stem, text in SAMPLES:
            body = {"model": "uttera", "input": text, "voice": "default", "response_format": "pcm"}
            r = client.post("/v1/audio/speech", json=body)
            r.raise_for_status()
            sr = int(r.headers["x-sample-rate"])
            (HERE / f"{stem}.flac").write_bytes(flac(np.frombuffer(r.content, "<i2"), sr))
            seconds[stem] = len(r.content) / 2 / sr
            print(f"{stem}.flac  {seconds[stem]:.2f} s  {text}")
    return seconds


def teacher() -> tuple[dict[str, float], dict[str, str]]:
    from piper import PiperVoice

    from training import text_frontend
    from training.evaluate import teacher_audio

    m, c = text_frontend.teacher_paths()
    voice = PiperVoice.load(m, config_path=c, include_alignments=True)
    sr = voice.config.sample_rate
    seconds, spoken = {}, {}
    for stem, text in SAMPLES:
        sentences = text_frontend.prepare(text)
        audio = np.concatenate([teacher_audio(voice, list(s.phoneme_ids))[0] for s in sentences])
        pcm = np.round(np.clip(0.95 * audio, -1.0, 1.0) * 32767).astype(np.int16)
        (HERE / f"teacher_{stem}.flac").write_bytes(flac(pcm, sr))
        seconds[stem] = len(pcm) / sr
        spoken[stem] = " ".join(s.normalized for s in sentences)
        print(f"teacher_{stem}.flac  {seconds[stem]:.2f} s")
    return seconds, spoken


def page(ours_s: dict[str, float], teacher_s: dict[str, float], spoken: dict[str, str]) -> None:
    rows = "\n".join(
        PAGE_ROW.format(
            text=html.escape(text),
            spoken=html.escape(spoken[stem]) if spoken[stem] != text else "(same)",
            stem=stem,
            ours_s=ours_s[stem],
            teacher_s=teacher_s[stem],
        )
        for stem, text in SAMPLES
    )
    (HERE / "index.html").write_text(
        "<!doctype html>\n<meta charset=utf-8>\n<title>uttera: the default voice beside its teacher</title>\n"
        "<style>body{font:15px system-ui,sans-serif;margin:2em}td,th{padding:.4em;border-bottom:1px solid #ddd;"
        "text-align:left;vertical-align:middle}</style>\n"
        "<h1>The default voice beside its teacher</h1>\n"
        "<p>Ours: <code>voices/default</code> through the running server (<code>POST /v1/audio/speech</code>), "
        "lossless. Teacher: Piper <code>en_US-joe-medium</code> speaking the same phonemes. Made by "
        "<code>docs/samples/make_samples.py</code>; judged figures in <code>benchmarks/RESULTS.md</code>.</p>\n"
        "<table>\n<tr><th>text sent</th><th>the frontend's spoken form</th><th>ours</th><th>teacher</th></tr>\n"
        f"{rows}\n</table>\n"
    )
    print("index.html")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--url", help="use a running server at this base URL instead of starting one")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the server we started
    from benchmarks.server import started_server, wait_healthy

    if a.url:
        wait_healthy(a.url.rstrip("/"))
        ours_s = ours(a.url.rstrip("/"))
    else:
        with started_server(a.model) as base:
            ours_s = ours(base)
    teacher_s, spoken = teacher()
    page(ours_s, teacher_s, spoken)


if __name__ == "__main__":
    main()
