"""Teacher synthesis (Piper `en_US-joe-medium`) with exact per-phoneme frame durations.

Each worker process loads the voice with its alignment output (the ONNX `w_ceil` tensor, needs the
`onnx` package), takes every `n_workers`-th sentence, and feeds the FRONTEND's phoneme ids (pads
re-inserted) straight to the model, so the audio is exactly what our prompt describes. It also
phonemizes the normalized text with Piper's own espeak path and counts disagreements (reported,
and stored per utterance as `piper_match`).

Durations: Piper gives samples per model input id (`^ _ p1 _ ... pn _ $`, multiples of 256); each
pad is merged into the phoneme before it, giving frames per prompt phoneme (`^ p1 ... pn $`) with
`sum(dur) * 256 == len(audio)`. Audio is peak-normalized as `PiperVoice.synthesize` does.

Output: one shard per worker, `OUT/shard_{k:02d}.npz` with
  audio int16 (N,), audio_off int64 (U+1,)   22,050 Hz PCM, concatenated
  ids int16 (M,), ids_off int64 (U+1,)        prompt phoneme ids, concatenated
  dur int32 (M,)                              frames (hop 256) per prompt phoneme
  text str (U,), piper_match bool (U,)
Shards are rewritten every `--flush` utterances, so a `--deadline` stop keeps what was made.

Input lines are either `normalized<TAB>ids` (corpus.py) or plain text (run through the frontend).

    python -m training.synthesize SENTENCES OUT_DIR [--workers 16] [--deadline-s 420] [--seed 0]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np

HOP = 256


def merge_pads(id_samples: np.ndarray, hop: int = HOP) -> np.ndarray:
    """Samples per padded model input (2P-1,) -> frames per prompt phoneme (P,)."""
    frames = np.asarray(id_samples, dtype=np.int64) // hop
    merged = frames[0::2].copy()
    merged[:-1] += frames[1::2]
    return merged


def save_items(path: Path, items: list[dict]) -> None:
    tmp = path.with_suffix(".tmp.npz")
    audio = [it["audio"] for it in items]
    ids = [it["ids"] for it in items]
    np.savez(
        tmp,
        audio=np.concatenate(audio) if audio else np.zeros(0, np.int16),
        audio_off=np.cumsum([0] + [len(a) for a in audio]).astype(np.int64),
        ids=np.concatenate(ids).astype(np.int16) if ids else np.zeros(0, np.int16),
        ids_off=np.cumsum([0] + [len(i) for i in ids]).astype(np.int64),
        dur=np.concatenate([it["dur"] for it in items]).astype(np.int32) if items else np.zeros(0, np.int32),
        text=np.array([it["text"] for it in items], dtype=str),
        piper_match=np.array([it["match"] for it in items], dtype=bool),
    )
    os.replace(tmp, path)


def sentences_of(line: str) -> list:
    """One input line's sentences: `normalized<TAB>ids` (corpus.py, ids precomputed by the frontend) or
    plain text run through the frontend."""
    from training import text_frontend

    if "\t" in line:
        text, ids_str = line.split("\t")
        return [text_frontend.Sentence(text, tuple(int(x) for x in ids_str.split()))]
    return text_frontend.prepare(line)


def job_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every teacher's synthesis script takes (this one's, training/synthesize_heart.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sentences")
    parser.add_argument("out")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--deadline-s", type=float, default=1e9, help="stop starting new sentences after this")
    parser.add_argument("--flush", type=int, default=200)
    parser.add_argument("--limit", type=int, default=0)
    return parser


def run_workers(worker, a: argparse.Namespace, *extra: object) -> tuple[dict, float]:
    """Run `worker((k, n_workers, sentences, out_dir, deadline, flush, *extra))` in `a.workers` spawned
    processes, each taking every n-th sentence into its own shard; (summed stats, wall seconds)."""
    sentences = [ln.strip("\n") for ln in Path(a.sentences).read_text().splitlines() if ln.strip()]
    if a.limit:
        sentences = sentences[: a.limit]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [(k, a.workers, sentences, str(out), t0 + a.deadline_s, a.flush, *extra) for k in range(a.workers)]
    with mp.get_context("spawn").Pool(a.workers) as pool:
        results = pool.map(worker, jobs)
    return {key: sum(r[key] for r in results) for key in results[0]}, time.time() - t0


def _worker(args: tuple) -> dict:
    k, n_workers, sentences, out_dir, deadline, flush = args
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import onnxruntime
    from piper import PiperVoice

    from training import text_frontend

    model, cfg = text_frontend.teacher_paths()
    # One single-threaded session per worker (n_workers processes already fill the cores), with the
    # alignment output patched in as PiperVoice.load(include_alignments=True) does.
    import json

    import onnx
    from piper.config import PiperConfig
    from piper.patch_voice_with_alignment import add_alignment_output

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    proto = onnx.load(str(model))
    add_alignment_output(proto)
    session = onnxruntime.InferenceSession(
        proto.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
    )
    voice = PiperVoice(session=session, config=PiperConfig.from_dict(json.loads(Path(cfg).read_text())))
    path = Path(out_dir) / f"shard_{k:02d}.npz"
    items: list[dict] = []
    stats = {"done": 0, "skipped": 0, "mismatch": 0, "seconds_audio": 0.0}
    for line in sentences[k::n_workers]:
        if time.time() > deadline:
            break
        sents = sentences_of(line)
        if len(sents) != 1:
            stats["skipped"] += 1
            continue
        s = sents[0]
        ids = list(s.phoneme_ids)
        piper_ids = text_frontend.piper_prompt_ids(s.normalized)
        match = len(piper_ids) == 1 and piper_ids[0] == ids
        stats["mismatch"] += int(not match)
        audio, id_samples = voice.phoneme_ids_to_audio(text_frontend.with_pads(ids), include_alignments=True)
        if id_samples is None or len(id_samples) != 2 * len(ids) - 1:
            stats["skipped"] += 1
            continue
        dur = merge_pads(id_samples)
        n = int(dur.sum()) * HOP
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)[:n]
        if len(audio) != n:
            audio = np.pad(audio, (0, n - len(audio)))
        peak = float(np.abs(audio).max())
        audio = audio / peak if peak > 1e-8 else audio * 0
        items.append(
            {
                "audio": np.clip(audio * 32767, -32767, 32767).astype(np.int16),
                "ids": np.array(ids),
                "dur": dur,
                "text": s.normalized,
                "match": match,
            }
        )
        stats["done"] += 1
        stats["seconds_audio"] += n / 22050
        if len(items) % flush == 0:
            save_items(path, items)
    save_items(path, items)
    return stats


def main() -> None:
    a = job_parser(__doc__.splitlines()[0]).parse_args()
    total, wall = run_workers(_worker, a)
    print(
        f"synthesized {total['done']} utterances, {total['seconds_audio'] / 3600:.2f} h audio in {wall:.0f} s "
        f"({total['seconds_audio'] / wall:.1f}x real time); skipped {total['skipped']}; "
        f"frontend/piper phoneme mismatches {total['mismatch']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
