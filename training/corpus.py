"""Offline English training text for the default voice, split into train and held-out eval sets.

Sources (Debian packages, fetched with `apt-get download` and unpacked with `dpkg -x` into
training/data/root, which is git-ignored):
  * `fortunes` + `fortunes-min`: fortune cookies (ascii-art, perl and code-like files skipped);
  * `dict-gcide`: the indented quotations of the 1913 Webster (`--Author.` lines cut off);
  * generated sentences (seeded) for numbers, dates, times, currency, abbreviations and questions.

Every text goes through the frontend (`uttera_server.frontend.prepare`); each resulting sentence's
`normalized` text is what the teacher reads. Kept: 3..30 words, at most 400 phonemes, letters and
common punctuation only, case-insensitive dedupe. The eval set (`training/eval_sentences.txt`,
committed, never trained on) is drawn first, with a fixed seed, as normalized sentences.

    python -m training.corpus [--n-train 12000] [--n-eval 200] [--seed 0]
Writes training/data/train_sentences.tsv (`normalized<TAB>space-separated phoneme ids`, so the GPU
host needs no frontend) and training/eval_sentences.txt (one normalized sentence a line).
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from training import text_frontend

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROOT = DATA / "root"
EVAL_FILE = HERE / "eval_sentences.txt"
TRAIN_FILE = DATA / "train_sentences.tsv"
PACKAGES = ("fortunes", "fortunes-min", "dict-gcide")
SKIP_FORTUNE_FILES = {"ascii-art", "perl", "linux", "linuxcookie", "debian", "translate-me", "art"}
ALLOWED = re.compile(r"^[A-Za-z0-9 ,.;:'\"!?$%&()\-]+$")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def fetch_packages() -> None:
    """Download and unpack the Debian packages into training/data/root (idempotent)."""
    if (ROOT / "usr/share/dictd/gcide.dict.dz").exists():
        return
    debs = DATA / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(ROOT)], check=True)


def _clean(text: str) -> str:
    text = text.replace("\t", " ").replace("``", '"').replace("''", '"')
    return re.sub(r"\s+", " ", text).strip()


def fortunes() -> Iterator[str]:
    folder = ROOT / "usr/share/games/fortunes"
    for path in sorted(folder.iterdir()):
        if path.suffix or path.name in SKIP_FORTUNE_FILES or not path.is_file():
            continue
        for entry in path.read_text(encoding="latin-1").split("\n%\n"):
            lines = [ln for ln in entry.splitlines() if not ln.strip().startswith("--")]
            if any(ln.startswith((" ", "\t")) and len(ln) - len(ln.lstrip()) > 4 for ln in lines):
                continue  # verse, dialogue layout or code: reads badly as prose
            yield from SENTENCE_SPLIT.split(_clean(" ".join(lines)))


def gcide_quotes() -> Iterator[str]:
    raw = gzip.open(ROOT / "usr/share/dictd/gcide.dict.dz").read().decode("utf-8", "replace")
    block: list[str] = []
    for line in raw.splitlines():
        if line.startswith("            ") and line.strip():
            block.append(line.strip())
            continue
        if block:
            text = " ".join(block)
            if "--" in text:
                text = text[: text.rindex("--")]
                text = text.replace(" . . .", ",").replace("...", ",")
                yield from SENTENCE_SPLIT.split(_clean(text))
            block = []


MONTHS = "January February March April May June July August September October November December".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
NAMES = "Alice Bob Carol David Emma Frank Grace Henry Irene Jack Laura Michael Nina Oscar Paula Sam".split()
THINGS = "tickets books apples chairs boxes emails pages files cups bottles songs cars".split()
PLACES = "Boston Chicago Denver Paris London Seattle Austin Toronto Dublin Madrid".split()


def generated(rng: random.Random, n: int) -> Iterator[str]:
    """Seeded template sentences: numbers, dates, times, currency, abbreviations, questions."""
    templates = [
        lambda: (
            f"{rng.choice(NAMES)} bought {rng.randint(2, 999)} {rng.choice(THINGS)} for ${rng.randint(1, 500)}.{rng.randint(10, 99)}."
        ),
        lambda: (
            f"The meeting is on {rng.choice(DAYS)}, {rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.randint(1950, 2035)} at {rng.randint(1, 12)}:{rng.randint(0, 59):02d} {rng.choice(['AM', 'PM'])}."
        ),
        lambda: f"Please call me at {rng.randint(1, 12)}:{rng.choice(['00', '15', '30', '45'])} tomorrow.",
        lambda: f"The population grew to {rng.randint(1000, 9999999):,} people in {rng.randint(1800, 2024)}.",
        lambda: f"It costs ${rng.randint(1, 99)},{rng.randint(100, 999)} or about {rng.randint(2, 95)}% of the budget.",
        lambda: (
            f"Dr. {rng.choice(NAMES)} lives on {rng.choice(['Main', 'Oak', 'Elm', 'Park'])} St. near {rng.choice(PLACES)}."
        ),
        lambda: (
            f"Mr. {rng.choice(NAMES)} and Mrs. {rng.choice(NAMES)} arrived at {rng.randint(1, 12)} {rng.choice(['a.m.', 'p.m.'])} on the {rng.randint(1, 28)}th."
        ),
        lambda: f"How many {rng.choice(THINGS)} did {rng.choice(NAMES)} bring to {rng.choice(PLACES)}?",
        lambda: f"Is the train to {rng.choice(PLACES)} leaving at {rng.randint(1, 12)}:{rng.randint(10, 59)}?",
        lambda: (
            f"Why did {rng.choice(NAMES)} pay {rng.randint(2, 90)} dollars for {rng.randint(2, 9)} {rng.choice(THINGS)}?"
        ),
        lambda: (
            f"The temperature dropped to {rng.randint(-20, 40)} degrees on {rng.choice(MONTHS)} {rng.randint(1, 30)}."
        ),
        lambda: (
            f"Room {rng.randint(100, 999)} is on the {rng.choice(['1st', '2nd', '3rd', '4th', '5th', '21st'])} floor, next to the U.S. office."
        ),
        lambda: (
            f"We need {rng.randint(2, 60)} kg of rice, {rng.randint(2, 20)} liters of milk and {rng.randint(2, 12)} eggs."
        ),
        lambda: (
            f"Flight {rng.choice('ABCDU')}{rng.choice('ALKX')} {rng.randint(100, 9999)} lands at {rng.randint(1, 12)}:{rng.randint(10, 59)} {rng.choice(['AM', 'PM'])}, right?"
        ),
        lambda: f"The score was {rng.randint(0, 9)} to {rng.randint(0, 9)} after {rng.randint(2, 120)} minutes.",
        lambda: (
            f"Chapter {rng.randint(1, 40)} starts on page {rng.randint(2, 900)} and ends on page {rng.randint(2, 900)}."
        ),
    ]
    for _ in range(n):
        yield rng.choice(templates)()


def candidates(seed: int, n_generated: int) -> list[tuple[str, str]]:
    """(source, raw text) pairs, deterministic order."""
    rng = random.Random(seed)
    out = [("fortunes", t) for t in fortunes()]
    # GCIDE's 1913 quotations outnumber the fortunes and read archaic: keep as many as fortunes.
    quotes = list(gcide_quotes())
    rng.shuffle(quotes)
    out += [("gcide", t) for t in quotes[: len(out)]]
    out += [("generated", t) for t in generated(rng, n_generated)]
    return out


def normalize_all(raw: list[tuple[str, str]]) -> list[tuple[str, str, tuple[int, ...]]]:
    """Frontend-normalize, split into sentences, filter and dedupe. -> [(source, normalized, ids)]."""
    seen: set[str] = set()
    kept = []
    for source, text in raw:
        if not ALLOWED.match(text) or not 3 <= len(text.split()) <= 40:
            continue
        try:
            sentences = text_frontend.prepare(text)
        except ValueError:
            continue
        for s in sentences:
            words = s.normalized.split()
            key = re.sub(r"[^a-z ]", "", s.normalized.lower())
            if not 3 <= len(words) <= 30 or key in seen or len(s.phoneme_ids) > 400:
                continue
            seen.add(key)
            kept.append((source, s.normalized, s.phoneme_ids))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=12000)
    parser.add_argument("--n-eval", type=int, default=200)
    parser.add_argument("--n-generated", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    fetch_packages()
    rng = random.Random(a.seed)
    raw = candidates(a.seed, a.n_generated)
    rng.shuffle(raw)
    # Normalizing everything is slow on 2 cores; normalize a generous shuffled slice.
    kept = normalize_all(raw[: int((a.n_train + a.n_eval) * 1.6)])
    if EVAL_FILE.exists():
        eval_set = EVAL_FILE.read_text().splitlines()
    else:
        eval_set = [t for _, t, _ in kept[: a.n_eval]]
        EVAL_FILE.write_text("\n".join(eval_set) + "\n")
    banned = {re.sub(r"[^a-z ]", "", t.lower()) for t in eval_set}
    train = [(t, ids) for _, t, ids in kept if re.sub(r"[^a-z ]", "", t.lower()) not in banned][: a.n_train]
    TRAIN_FILE.write_text("".join(f"{t}\t{' '.join(map(str, ids))}\n" for t, ids in train))
    by_source: dict[str, int] = {}
    for s, _, _ in kept:
        by_source[s] = by_source.get(s, 0) + 1
    print(
        f"candidates={len(raw)} kept={len(kept)} by_source={by_source} "
        f"train={len(train)} eval={len(eval_set)} backend={text_frontend.BACKEND}"
    )


if __name__ == "__main__":
    main()
