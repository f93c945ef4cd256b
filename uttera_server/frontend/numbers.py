"""Numbers to English words (US style, no "and": 123 -> "one hundred twenty-three").

Every function returns a list of spoken words (tokens without spaces); compound tens keep their
hyphen ("twenty-one") because espeak-ng reads them as one word. Pure functions, no I/O.
"""

from __future__ import annotations

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = (
    "_ thousand million billion trillion quadrillion quintillion sextillion septillion octillion nonillion decillion"
).split()
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}

MAX_CARDINAL = 10 ** (3 * len(_SCALES)) - 1
"""Largest integer read as a cardinal; longer integers are read digit by digit."""


def _under_thousand(n: int) -> list[str]:
    words: list[str] = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest or not words:
        words.append(_ONES[rest])
    return words


def cardinal(n: int) -> list[str]:
    """``n`` as cardinal words: ``-1205`` -> ``["minus", "one", "thousand", "two", "hundred", "five"]``.

    Integers beyond ``MAX_CARDINAL`` in magnitude are read digit by digit.
    """
    if n < 0:
        return ["minus", *cardinal(-n)]
    if n > MAX_CARDINAL:
        return digits(str(n))
    if n < 1000:
        return _under_thousand(n)
    words: list[str] = []
    groups: list[int] = []
    while n:
        n, group = divmod(n, 1000)
        groups.append(group)
    for scale in range(len(groups) - 1, -1, -1):
        if groups[scale]:
            words += _under_thousand(groups[scale])
            if scale:
                words.append(_SCALES[scale])
    return words


def digits(text: str) -> list[str]:
    """Each decimal digit of ``text`` as a word: ``"007"`` -> ``["zero", "zero", "seven"]``.

    Non-digit characters are skipped; any Unicode decimal digit is accepted.
    """
    return [_ONES[int(ch)] for ch in text if ch.isdecimal()]


def ordinal_word(word: str) -> str:
    """The ordinal form of one cardinal word: ``"twenty-one"`` -> ``"twenty-first"``."""
    head, sep, last = word.rpartition("-")
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def ordinal(n: int) -> list[str]:
    """``n`` as ordinal words: ``22`` -> ``["twenty-second"]``."""
    words = cardinal(n)
    return words[:-1] + [ordinal_word(words[-1])]


def plural_word(word: str) -> str:
    """Plural of a number word, for decades and fractions: ``"ninety"`` -> ``"nineties"``."""
    if word.endswith("y"):
        return word[:-1] + "ies"
    if word == "half":
        return "halves"
    return word + "s"


def year(n: int) -> list[str]:
    """``n`` (0 <= n <= 9999) read as a year: 1984 -> nineteen eighty-four, 2005 -> two thousand five,
    1905 -> nineteen oh five, 1900 -> nineteen hundred, 2010 -> twenty ten."""
    if not 1000 <= n <= 9999:
        return cardinal(n)
    century, rest = divmod(n, 100)
    if century % 10 == 0 and rest < 10:
        return cardinal(n)
    if rest == 0:
        return _under_thousand(century) + ["hundred"]
    if rest < 10:
        return _under_thousand(century) + ["oh", _ONES[rest]]
    return _under_thousand(century) + _under_thousand(rest)


def decimal(integer_part: str, fraction_part: str) -> list[str]:
    """A decimal number from its digit strings: ``("3", "14")`` -> three point one four.

    An empty ``integer_part`` (".5") reads as "point five"; integer digits go through
    :func:`integer`.
    """
    words = integer(integer_part) if integer_part else []
    return words + ["point", *digits(fraction_part)]


def integer(text: str) -> list[str]:
    """An unsigned digit string (thousands commas allowed) as words.

    Leading zeros ("007") and strings longer than ``MAX_CARDINAL`` are read digit by digit.
    """
    plain = text.replace(",", "")
    if len(plain) > 1 and plain[0] == "0" and "," not in text:
        return digits(plain)
    return cardinal(int(plain))


def fraction(numerator: int, denominator: int) -> list[str]:
    """``numerator/denominator`` as words: 1/2 -> one half, 3/4 -> three quarters, 5/16 -> five sixteenths."""
    words = cardinal(numerator)
    if denominator in _FRACTION_NAMES:
        singular, plural = _FRACTION_NAMES[denominator]
        return words + [singular if numerator == 1 else plural]
    denom = ordinal(denominator)
    if numerator != 1:
        denom = denom[:-1] + [plural_word(denom[-1])]
    return words + denom
