"""English text frontend: user text -> per-sentence Piper phoneme-id prompts with word spans.

    prepare(text) -> [Sentence]          # segment -> normalize -> g2p, the one call the server needs
    prepare_segments(text) -> iterator   # the same, one segment's [Sentence] at a time (lazily)
    Segmenter().push(fragment) / flush() # streaming sentence/clause segmentation (pure)
    normalize(sentence) -> NormalizedText
    phonemize(normalized) -> Phonemized  # ids identical to the Piper teacher's, pads removed

Streaming use: feed LLM tokens to a Segmenter; for each TextSpan call
``prepare(seg.text, offset=seg.start, allow_empty=True)`` (spans then index the whole text).
Training: ``teacher_text(sentence)`` (== ``sentence.normalized``) is what Piper must read.
"""

from .errors import FrontendError, NothingToSpeakError, SegmenterClosedError
from .g2p import Phonemized, phonemize, strip_pads, with_pads
from .normalize import normalize
from .spoken_text import NormalizedText, SourceWord, SpokenWord
from .phoneme_table import PhonemeTable, en_us
from .prepare import MIN_PHONEMES, Sentence, prepare, prepare_segments, teacher_text
from .segment import TextSpan, Segmenter, SegmenterConfig, split_sentences

__all__ = [
    "FrontendError",
    "MIN_PHONEMES",
    "NormalizedText",
    "NothingToSpeakError",
    "PhonemeTable",
    "Phonemized",
    "TextSpan",
    "Segmenter",
    "SegmenterConfig",
    "Sentence",
    "SourceWord",
    "SpokenWord",
    "SegmenterClosedError",
    "en_us",
    "normalize",
    "phonemize",
    "prepare",
    "prepare_segments",
    "split_sentences",
    "strip_pads",
    "teacher_text",
    "with_pads",
]
