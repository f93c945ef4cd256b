"""Number words."""

import pytest

from uttera_server.frontend import numbers as nw


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (9, "nine"),
        (10, "ten"),
        (19, "nineteen"),
        (20, "twenty"),
        (21, "twenty-one"),
        (99, "ninety-nine"),
        (100, "one hundred"),
        (110, "one hundred ten"),
        (1001, "one thousand one"),
        (20020, "twenty thousand twenty"),
        (1_000_000_001, "one billion one"),
        (-7, "minus seven"),
    ],
)
def test_cardinal(n: int, words: str) -> None:
    assert " ".join(nw.cardinal(n)) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1, "first"),
        (2, "second"),
        (3, "third"),
        (5, "fifth"),
        (8, "eighth"),
        (9, "ninth"),
        (12, "twelfth"),
        (20, "twentieth"),
        (31, "thirty-first"),
        (1000, "one thousandth"),
    ],
)
def test_ordinal(n: int, words: str) -> None:
    assert " ".join(nw.ordinal(n)) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1984, "nineteen eighty-four"),
        (2000, "two thousand"),
        (2009, "two thousand nine"),
        (2010, "twenty ten"),
        (1900, "nineteen hundred"),
        (1901, "nineteen oh one"),
        (999, "nine hundred ninety-nine"),
    ],
)
def test_year(n: int, words: str) -> None:
    assert " ".join(nw.year(n)) == words


def test_huge_numbers_fall_back_to_digits() -> None:
    n = nw.MAX_CARDINAL + 1
    assert nw.cardinal(n) == nw.digits(str(n))
    assert " ".join(nw.cardinal(nw.MAX_CARDINAL)).startswith("nine hundred ninety-nine decillion")


@pytest.mark.parametrize(
    ("num", "den", "words"),
    [
        (1, 2, "one half"),
        (3, 2, "three halves"),
        (1, 4, "one quarter"),
        (5, 8, "five eighths"),
        (1, 3, "one third"),
        (2, 21, "two twenty-firsts"),
    ],
)
def test_fraction(num: int, den: int, words: str) -> None:
    assert " ".join(nw.fraction(num, den)) == words
