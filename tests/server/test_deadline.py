"""Deadline scheduling inputs: when a stream's client runs out of audio, and the engine priority from it."""

import time

import pytest

from uttera_server.ws.playout import PlayoutClock
from uttera_server.synthesis.deadline import PlaybackDeadline


def test_first_sentence_is_due_at_arrival_plus_what_the_client_holds():
    assert PlaybackDeadline(arrival=100.0, lead_s=0.0).at() == 100.0
    assert PlaybackDeadline(arrival=100.0, lead_s=1.5).at() == 101.5


def test_later_sentences_are_due_when_the_audio_generated_so_far_has_played():
    d = PlaybackDeadline(arrival=100.0, lead_s=0.0)
    d.first_audio = 100.08
    d.generated_s = 2.0
    assert d.at() == pytest.approx(102.08)
    d.lead_s = 1.0  # audio buffered before this synthesis plays first
    assert d.at() == pytest.approx(103.0)


def test_playout_lead():
    clock = PlayoutClock()
    assert clock.lead(5.0) == 0.0
    clock.sent(2.0, now=10.0, ready_since=10.0)
    assert clock.lead(10.5) == pytest.approx(1.5) and clock.lead(13.0) == 0.0


def test_engine_priority_orders_by_deadline(tmp_path):
    from uttera_server.config import EngineConfig
    from uttera_server.synthesis.mel_engine import MelEngine

    engine = MelEngine(model=None, config=EngineConfig())
    base = time.monotonic()
    now = engine.priority(base)  # milliseconds since the engine was made: a small number
    assert 0 <= now < 60_000
    assert engine.priority(base + 0.25) - now == pytest.approx(250, abs=1)
    assert engine.priority(base + 1.0) - now == pytest.approx(1000, abs=1)
    assert engine.priority(base - 0.1) - now == pytest.approx(-100, abs=1)  # overdue goes first
