"""docs/samples/: both voices through the running server beside their teachers, and a listening page.

    python docs/samples/make_samples.py [--model voices/default | --url http://127.0.0.1:8000]
        [--heart-python PYTHON]   # hibari's interpreter (default $UTTERA_HEART_PYTHON), for heart's teacher

Starts `python -m uttera_server serve --model DIR` on a free port (or uses `--url`) and sends each sentence
below as `POST /v1/audio/speech` with `response_format=flac` (lossless: exactly the PCM the server streamed,
no gain, no trimming, at the server's `x-sample-rate`), once per voice: `joe` (files `STEM.flac`) and
`heart` (`heart_STEM.flac`). The teacher clip of each sentence speaks the frontend's phoneme ids of the same
sentence, peak-normalized to 0.95, as the voices were trained: Piper `en_US-joe-medium`
(`training.evaluate.teacher_audio`, `teacher_STEM.flac`) and hibari heart (`benchmarks.heart_clips` in
`--heart-python`, `teacher_heart_STEM.flac`), FLAC through the server's own encoder. `index.html` puts the
pairs side by side. Greedy decoding: the same text gives the same audio.
"""

import argparse
import html
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SAMPLE_RATE = 22_050  # heart_clips writes 22,050 Hz, the served rate of both voices
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

SAMPLES = [  # (file stem, text as sent; the server normalizes it)
    ("01_question", "Could you tell me where the nearest train station is?"),
    ("02_currency", "Your total comes to $42.15, and the deposit is $1,250."),
    ("03_date_time", "The meeting is on March 3rd, 2025, at 9:30 a.m."),
    ("04_abbreviation", "Dr. Smith moved to the U.S. in the 1990s."),
    ("05_greeting", "Hello! This is the default voice of uttera, streaming as it speaks."),
]
VOICES = {  # voice id -> (file prefix, teacher as the page names it)
    "joe": ("", "Piper <code>en_US-joe-medium</code>"),
    "heart": ("heart_", "hibari-tts heart (Kokoro-82M <code>af_heart</code>)"),
}
PAGE_ROW = (
    '<tr><td>{text}</td><td>{spoken}</td><td><audio controls preload=none src="{ours}"></audio> '
    '{ours_s:.2f} s</td><td><audio controls preload=none src="{teacher}"></audio> {teacher_s:.2f} s</td></tr>'
)


def flac(pcm: np.ndarray, sr: int) -> bytes:
    """int16 mono PCM -> a FLAC file, through the server's own encoder (audio/formats.py)."""
    from uttera_server.audio.formats import open_encoder
    from uttera_server.speech_params import AudioFormat

    encoder = open_encoder(AudioFormat.FLAC, sr)
    return encoder.encode(pcm) + encoder.flush()


def ours(base_url: str, voice: str) -> dict[str, float]:
    import httpx

    prefix, seconds = VOICES[voice][0], {}
    with httpx.Client(base_url=base_url, timeout=300) as client:
        for stem, text in SAMPLES:
            body = {"model": "uttera", "input": text, "voice": voice, "response_format": "pcm"}
            r = client.post("/v1/audio/speech", json=body)
            r.raise_for_status()
            sr = int(r.headers["x-sample-rate"])
            (HERE / f"{prefix}{stem}.flac").write_bytes(flac(np.frombuffer(r.content, "<i2"), sr))
            seconds[stem] = len(r.content) / 2 / sr
            print(f"{prefix}{stem}.flac  {seconds[stem]:.2f} s  {text}")
    return seconds


def to_pcm(audio: np.ndarray) -> np.ndarray:
    """A teacher clip peak-normalized to 1.0 -> int16 at 0.95 of full scale, as the voices were trained."""
    return np.round(np.clip(0.95 * audio, -1.0, 1.0) * 32767).astype(np.int16)


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
        pcm = to_pcm(audio)
        (HERE / f"teacher_{stem}.flac").write_bytes(flac(pcm, sr))
        seconds[stem] = len(pcm) / sr
        spoken[stem] = " ".join(s.normalized for s in sentences)
        print(f"teacher_{stem}.flac  {seconds[stem]:.2f} s")
    return seconds, spoken


def heart_teacher(python: str) -> dict[str, float]:
    """hibari heart speaking the frontend's ids of each sentence, through benchmarks.heart_clips in `python`."""
    from training import text_frontend

    with tempfile.TemporaryDirectory() as tmp:
        items = [
            {
                "key": stem,
                "sentences": [list(s.phoneme_ids) for s in text_frontend.prepare(text)],
                "path": f"{tmp}/{stem}.npy",
            }
            for stem, text in SAMPLES
        ]
        src, dst = Path(tmp) / "items.json", Path(tmp) / "clips.json"
        src.write_text(json.dumps(items))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([python, "-m", "benchmarks.heart_clips", str(src), str(dst)], check=True, cwd=ROOT, env=env)
        errors = [r for r in json.loads(dst.read_text()) if "error" in r]
        if errors:
            raise SystemExit(f"hibari could not speak: {errors}")
        seconds = {}
        for item in items:
            pcm = to_pcm(np.load(item["path"]))
            (HERE / f"teacher_heart_{item['key']}.flac").write_bytes(flac(pcm, SAMPLE_RATE))
            seconds[item["key"]] = len(pcm) / SAMPLE_RATE
            print(f"teacher_heart_{item['key']}.flac  {seconds[item['key']]:.2f} s")
    return seconds


def page(ours_s: dict, teacher_s: dict, spoken: dict[str, str]) -> None:
    tables = []
    for voice, (prefix, teacher_name) in VOICES.items():
        rows = "\n".join(
            PAGE_ROW.format(
                text=html.escape(text),
                spoken=html.escape(spoken[stem]) if spoken[stem] != text else "(same)",
                ours=f"{prefix}{stem}.flac",
                ours_s=ours_s[voice][stem],
                teacher=f"teacher_{prefix}{stem}.flac",
                teacher_s=teacher_s[voice][stem],
            )
            for stem, text in SAMPLES
        )
        tables.append(
            f"<h2><code>{voice}</code>, taught by {teacher_name}</h2>\n"
            "<table>\n<tr><th>text sent</th><th>the frontend's spoken form</th><th>ours</th><th>teacher</th></tr>\n"
            f"{rows}\n</table>\n"
        )
    (HERE / "index.html").write_text(
        "<!doctype html>\n<meta charset=utf-8>\n<title>uttera: both voices beside their teachers</title>\n"
        "<style>body{font:15px system-ui,sans-serif;margin:2em}td,th{padding:.4em;border-bottom:1px solid #ddd;"
        "text-align:left;vertical-align:middle}</style>\n"
        "<h1>Both voices beside their teachers</h1>\n"
        "<p>Ours: <code>voices/default</code> through the running server (<code>POST /v1/audio/speech</code>), "
        "lossless, served at half scale (6 dB of headroom). Teachers: the same phonemes, peak-normalized to 0.95. "
        "Made by <code>docs/samples/make_samples.py</code>; judged figures in <code>benchmarks/RESULTS.md</code> "
        "and <code>voices/default/README.md</code>.</p>\n" + "".join(tables)
    )
    print("index.html")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--url", help="use a running server at this base URL instead of starting one")
    p.add_argument("--heart-python", default=os.environ.get("UTTERA_HEART_PYTHON"), help="hibari's interpreter")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the server we started
    from benchmarks.quality_teachers import check_heart_python
    from benchmarks.server import started_server, wait_healthy

    if not a.heart_python:
        raise SystemExit("heart's teacher needs --heart-python (or $UTTERA_HEART_PYTHON): hibari's interpreter")
    check_heart_python(a.heart_python)
    if a.url:
        wait_healthy(a.url.rstrip("/"))
        ours_s = {v: ours(a.url.rstrip("/"), v) for v in VOICES}
    else:
        with started_server(a.model) as base:
            ours_s = {v: ours(base, v) for v in VOICES}
    joe_s, spoken = teacher()
    page(ours_s, {"joe": joe_s, "heart": heart_teacher(a.heart_python)}, spoken)


if __name__ == "__main__":
    main()
