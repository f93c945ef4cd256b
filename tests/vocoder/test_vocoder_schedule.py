"""The vocoder worker's deadline policy, pure (uttera_server/synthesis/vocoder_schedule.py): what happened and
a fake time in, plans out. The worker running these plans with the real vocoder: test_worker_priority.py."""

import math

import pytest

from uttera_server.synthesis.vocoder_schedule import Backlog, Pass, Plan, VocoderSchedule

RATE, HOP, LAG = 22050, 256, 896  # the vocoder's analysis: samples/s, samples per frame, samples held back


def schedule(**policy) -> VocoderSchedule:
    """A first chunk of 8 frames, chunks up to 32."""
    return VocoderSchedule(
        sample_rate=RATE, hop_length=HOP, lag_samples=LAG, first_chunk_frames=8, chunk_frames=32, **policy
    )


def opened(s: VocoderSchedule, deadlines: dict) -> VocoderSchedule:
    for uid, deadline in deadlines.items():
        s.open(uid, deadline)
    return s


def everything(uids, frames=24, finish=True) -> tuple[dict, list]:
    """Each utterance's frames (ready: the chunk schedule waits for nothing more), and its finish."""
    return {uid: Backlog(new=frames) for uid in uids}, list(uids) if finish else []


# --- urgency ---
def test_urgent_utterances_get_a_pass_of_their_own_ahead_of_the_others():
    s = opened(schedule(urgent_margin_s=0.05), {"ahead-1": 105.0, "new": 100.0, "ahead-2": 103.0})
    plan = s.plan(100.0, *everything(["ahead-1", "new", "ahead-2"]))
    assert plan == Plan(
        (
            Pass(("new",), ("new",), frozenset({"new"})),
            Pass(("ahead-1", "ahead-2"), ("ahead-1", "ahead-2"), frozenset()),
        )
    )
    assert s.split_passes == 1


@pytest.mark.parametrize("slack", [0.0, 10.0])
def test_no_split_when_all_utterances_are_alike(slack):
    s = opened(schedule(), {"a": 100.0 + slack, "b": 100.0 + slack})
    (only,) = s.plan(100.0, *everything("ab")).passes
    assert only.utterances == ("a", "b") and only.finish == ("a", "b") and s.split_passes == 0
    assert only.eager == (frozenset({"a", "b"}) if slack == 0 else frozenset())


def test_fcfs_vocodes_everything_in_one_batch():
    s = opened(schedule(deadline_first=False, max_relaxed_frames=8), {"a": 105.0, "b": 100.0})
    assert s.plan(100.0, *everything("ab")) == Plan((Pass(("a", "b"), ("a", "b"), frozenset()),))
    assert s.split_passes == 0 and s.deferred_passes == 0


def test_nothing_new_plans_nothing():
    s = opened(schedule(), {"a": 100.0})
    assert s.plan(100.0, {"a": Backlog(held=4, to_next_chunk=4)}) == Plan()


def test_an_utterance_due_now_is_urgent():
    s = opened(schedule(urgent_margin_s=0.05), {"a": 100.0})
    assert s.urgent(100.0, {"a": Backlog(new=8)}) == {"a"}  # a new utterance's first chunk: no slack at all
    assert s.urgent(100.0, {"unknown": Backlog(new=8)}) == {"unknown"}  # no deadline: due now


def test_urgency_weighs_slack_against_the_wait_for_the_next_scheduled_chunk():
    s = opened(schedule(urgent_margin_s=0.05), {"slow": 100.5, "fast": 100.5})  # 0.5 s of slack each
    for t in (99.0, 99.1):
        s.pushed("slow", 1, t)  # 10 frames/s
        s.pushed("fast", 20, t)  # 200 frames/s
    waiting = Backlog(held=8, to_next_chunk=8)  # the schedule waits for 8 more frames
    # 8 frames at 10 frames/s: 0.8 s > 0.5 s of slack; at 200 frames/s 0.04 s + margin < 0.5 s
    assert s.urgent(100.0, {"slow": waiting, "fast": waiting}) == {"slow"}
    assert s.urgent(100.0, {"slow": Backlog(held=8), "fast": Backlog(held=8)}) == set()  # both ready now


def test_recent_passes_widen_the_margin():
    s = opened(schedule(urgent_margin_s=0.05), {"a": 100.1})
    assert s.urgent(100.0, {"a": Backlog(new=8)}) == set()
    for _ in range(50):
        s.passed(0.1)  # two passes of ~0.1 s: the margin outgrows the slack
    assert s.urgent(100.0, {"a": Backlog(new=8)}) == {"a"}


def test_an_urgent_utterance_gets_its_held_frames_vocoded_at_once():
    """An utterance running out of audio does not wait for its next chunk to fill up: its frames held back by
    the chunk schedule go out eagerly with the next pass, though it brought nothing new."""
    s = opened(schedule(), {"low": 100.0, "other": 130.0})
    utterances = {"other": Backlog(new=4, to_next_chunk=4), "low": Backlog(held=4, to_next_chunk=4)}
    assert s.plan(90.0, utterances) == Plan((Pass(("other",), (), frozenset()),))  # low can wait
    plan = s.plan(100.0, utterances)  # now low's client is about to run out
    assert plan == Plan((Pass(("low",), (), frozenset({"low"})), Pass(("other",), (), frozenset())))
    nothing_held = {**utterances, "low": Backlog(to_next_chunk=8)}
    assert [p.utterances for p in s.plan(100.0, nothing_held).passes] == [("other",)]


# --- deadlines ---
def test_an_utterance_gains_slack_with_the_audio_it_delivers():
    s = opened(schedule(), {"late": 100.0, "early": 100.0})
    s.delivered("late", 0, 101.0)  # no audio: its client has not started
    assert s.deadline("late") == 100.0
    s.delivered("late", RATE // 2, 102.0)  # its first audio, 2 s late: its client starts playing now
    assert s.deadline("late") == 102.5
    s.delivered("late", RATE, 102.1)
    assert s.deadline("late") == 103.5
    s.delivered("early", RATE, 99.0)  # delivered before it was due: its client plays from its deadline
    assert s.deadline("early") == 101.0
    s.close("late")
    assert s.deadline("late") is None and s.deadline("never") is None
    s.delivered("late", RATE, 103.0)  # a closed utterance: nothing to track
    s.pushed("late", 8, 103.0)
    assert s.deadline("late") is None


# --- the first chunk ---
def test_the_first_chunk_grows_to_outlast_a_slow_step():
    s = opened(schedule(), {"s": 0.0})
    t = 0.0
    for _ in range(16):
        s.pushed("s", 4, t := t + 1.0)
    assert s.first_chunk_frames() == 8  # too few intervals seen (15): the configured size
    s.pushed("s", 4, t := t + 1.0)
    assert s.first_chunk_frames() == 32  # 16 intervals of 1 s: even a full chunk does not cover them
    for _ in range(400):
        s.pushed("s", 4, t := t + 0.01)
    assert s.first_chunk_frames() == 8  # fast steps (only recent ones count): 8 frames already cover them
    for _ in range(100):
        s.pushed("s", 4, t := t + 0.2)  # now the p95 step takes 200 ms
    frames = s.first_chunk_frames()
    assert frames == math.ceil((0.2 * RATE + LAG) / HOP) == 21
    assert frames * HOP - LAG >= 0.2 * RATE  # its playable audio outlasts the step
    s.passed(0.25)  # plus two passes of 0.025 s
    assert s.first_chunk_frames() == math.ceil((0.25 * RATE + LAG) / HOP) == 26
    s.passed(10.0)
    assert s.first_chunk_frames() == 32  # never past a full chunk


def test_fcfs_keeps_the_configured_first_chunk():
    s = opened(schedule(deadline_first=False), {"s": 0.0})
    for t in range(100):
        s.pushed("s", 4, float(t))
    assert s.first_chunk_frames() == 8


# --- the cap on non-urgent work ---
def test_a_capped_pass_leaves_later_deadlines_for_the_next_pass():
    s = opened(schedule(max_relaxed_frames=40), {"a": 105.0, "b": 103.0})  # both can wait
    plan = s.plan(100.0, *everything("ab", frames=32))
    assert plan == Plan((Pass(("b",), ("b",), frozenset()),), deferred=("a",))
    assert s.deferred_passes == 1
    assert s.plan(100.0, *everything("a", frames=32)) == Plan((Pass(("a",), ("a",), frozenset()),))
    assert s.deferred_passes == 1


def test_the_cap_counts_held_frames_keeps_one_utterance_and_lets_waiting_utterances_through():
    s = opened(schedule(max_relaxed_frames=40), {"big": 103.0, "held": 104.0, "waits": 105.0})
    utterances = {
        "big": Backlog(new=64),  # over the cap alone: the earliest deadline goes anyway
        "held": Backlog(new=4, held=4),  # 8 frames to vocode: over the cap with the first
        "waits": Backlog(new=4, to_next_chunk=4),  # the chunk schedule holds it back: costs nothing now
    }
    plan = s.plan(100.0, utterances)
    assert plan == Plan((Pass(("big", "waits"), (), frozenset()),), deferred=("held",))


def test_urgent_utterances_are_never_capped():
    s = opened(schedule(max_relaxed_frames=8), {"now": 100.0, "soon": 100.01, "later": 105.0})
    plan = s.plan(100.0, *everything(["now", "soon", "later"], frames=32, finish=False))
    assert plan == Plan((Pass(("now", "soon"), (), frozenset({"now", "soon"})), Pass(("later",), (), frozenset())))
