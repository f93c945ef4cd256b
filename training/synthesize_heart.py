"""Teacher synthesis for the `heart` voice (hibari-tts 0.2.1), in synthesize.py's shard format.

Each worker process loads hibari's model with its duration output (`training/teachers/heart.py`), takes
every `n_workers`-th sentence and maps the FRONTEND's phoneme ids to hibari's misaki alphabet
(`training/teachers/heart_phonemes.py`), so the audio is exactly what our prompt describes. It also
phonemizes the normalized text with hibari's own G2P and stores whether the phones (spaces, stress
and punctuation ignored) agree (`piper_match`, the field's name kept so the format is unchanged).

Sample rate: hibari's 24 kHz audio is resampled to the vocoder's 22,050 Hz (`heart.resample`) and
peak-normalized to 1.0, as synthesize.py does for Piper. Durations: hibari gives units of 600 samples
(24 kHz) per hibari id; a group's units (the hibari ids one run of prompt phonemes maps to) are summed,
the cumulative group boundaries are converted to hop-256 frames at 22,050 Hz and rounded
(`heart.units_to_frames`: no drift), and a group's frames are split evenly over its prompt phonemes
(the remainder to the first ones). The audio is cropped or zero-padded to `sum(dur) * 256` samples
(< 128 samples either way). So `sum(dur) * 256 == len(audio)` as features.py requires.

Output: one shard per worker, `OUT/shard_{k:02d}.npz`, exactly as synthesize.py writes them (its
`save_items`): audio int16 22,050 Hz, audio_off, ids (our prompt ids), ids_off, dur (frames per prompt
phoneme), text, piper_match. Input lines: `normalized<TAB>ids` (corpus.py) or plain text.

    python -m training.synthesize_heart SENTENCES OUT_DIR [--workers 2] [--deadline-s 420] [--seed 0]
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training.synthesize import HOP, job_parser, run_workers, save_items, sentences_of

if TYPE_CHECKING:
    from training.teachers.heart import HeartTeacher
    from training.teachers.heart_phonemes import MappedPrompt

SAMPLE_RATE = 22_050
MAX_HIBARI_IDS = 510  # Kokoro's context is 512 positions


def split_frames(frames: int, n: int) -> list[int]:
    """`frames` split over `n` phonemes as evenly as possible, the remainder to the first ones."""
    base, extra = divmod(int(frames), n)
    return [base + (i < extra) for i in range(n)]


def prompt_frames(mapped: MappedPrompt, units: np.ndarray) -> np.ndarray:
    """Per-hibari-id units -> frames (hop 256, 22,050 Hz) per prompt phoneme (see the module docstring)."""
    from training.teachers.heart import units_to_frames

    group_units = np.zeros(len(mapped.groups), np.int64)
    np.add.at(group_units, np.asarray(mapped.hib_group), units)
    group_frames = units_to_frames(group_units, SAMPLE_RATE, HOP)
    dur = np.zeros(sum(len(g) for g in mapped.groups), np.int64)
    for positions, f in zip(mapped.groups, group_frames, strict=True):
        dur[list(positions)] = split_frames(int(f), len(positions))
    return dur


def make_item(
    teacher: HeartTeacher, own_g2p: Any, text: str, ids: list[int], table: dict[int, str], rng: np.random.Generator
) -> dict[str, Any]:
    """One utterance in synthesize.py's item layout. Raises ValueError (incl. UnmappableError) to skip it."""
    from training.teachers import heart
    from training.teachers.heart_phonemes import map_prompt, phones, prompt_symbols

    mapped = map_prompt(prompt_symbols(ids, table), teacher.vocab)
    if len(mapped.hib_ids) > MAX_HIBARI_IDS:
        raise ValueError(f"{len(mapped.hib_ids)} hibari ids > {MAX_HIBARI_IDS}")
    out = teacher.synthesize(list(mapped.hib_ids), rng)
    dur = prompt_frames(mapped, out.units)
    n = int(dur.sum()) * HOP
    audio = heart.resample(out.audio, heart.SAMPLE_RATE, SAMPLE_RATE)[:n]
    if len(audio) < n:
        audio = np.pad(audio, (0, n - len(audio)))
    peak = float(np.abs(audio).max())
    audio = audio / peak if peak > 1e-8 else audio * 0
    match = own_g2p is not None and phones(" ".join(own_g2p.phonemize(text))) == phones(mapped.hib_text)
    return {
        "audio": np.clip(audio * 32767, -32767, 32767).astype(np.int16),
        "ids": np.array(ids),
        "dur": dur.astype(np.int32),
        "text": text,
        "match": match,
    }


def _worker(args: tuple[Any, ...]) -> dict[str, float]:
    k, n_workers, sentences, out_dir, deadline, flush, seed = args
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from hibari import Hibari

    from training.teachers.heart import HeartTeacher
    from training.teachers.heart_phonemes import id_to_symbol

    teacher = HeartTeacher(threads=1)
    own_g2p = Hibari(threads=1)
    table = id_to_symbol()
    path = Path(out_dir) / f"shard_{k:02d}.npz"
    items: list[dict] = []
    stats: dict[str, float] = {"done": 0, "skipped": 0, "mismatch": 0, "seconds_audio": 0.0, "cpu_s": 0.0}
    for j in range(k, len(sentences), n_workers):
        if time.time() > deadline:
            break
        c0 = time.process_time()
        line = sentences[j]
        sents = sentences_of(line)
        if len(sents) != 1:
            stats["skipped"] += 1
            continue
        s = sents[0]
        try:
            item = make_item(
                teacher, own_g2p, s.normalized, list(s.phoneme_ids), table, np.random.default_rng([seed, j])
            )
        except ValueError as e:
            print(f"skipped #{j} ({e}): {s.normalized}", flush=True)
            stats["skipped"] += 1
            continue
        items.append(item)
        stats["done"] += 1
        stats["mismatch"] += int(not item["match"])
        stats["seconds_audio"] += len(item["audio"]) / SAMPLE_RATE
        stats["cpu_s"] += time.process_time() - c0
        if len(items) % flush == 0:
            save_items(path, items)
    save_items(path, items)
    return stats


def main() -> None:
    parser = job_parser(__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seeds hibari's noise component, per sentence")
    a = parser.parse_args()
    total, wall = run_workers(_worker, a, a.seed)
    print(
        f"synthesized {total['done']} utterances, {total['seconds_audio'] / 3600:.2f} h audio in {wall:.0f} s "
        f"({total['seconds_audio'] / wall:.1f}x real time; {total['seconds_audio'] / max(total['cpu_s'], 1e-9):.1f} "
        f"audio s per CPU s); skipped {total['skipped']}; hibari G2P / frontend phone mismatches "
        f"{total['mismatch']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
