"""Fixtures for the vocoder tests: random-weight vocoders made at test time (no files, no network)."""

import numpy as np
import pytest
from tests.vocoder.voc_helpers import tiny_config

from vocoder.model import Vocoder


@pytest.fixture(scope="module")
def tiny_vocoder() -> Vocoder:
    return Vocoder.random(tiny_config(), seed=0)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
