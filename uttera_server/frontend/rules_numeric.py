"""Normalization rules for text that starts with a digit, a sign or a currency symbol.

Each rule is ``rule(text, pos) -> Token | None`` (see :mod:`rules_common`); :data:`NUMERIC_RULES`
lists them in priority order. Dates read month-first (US): 5/3/2024 is May third.
"""

from __future__ import annotations

import re

from . import numbers as nw
from .lexicon import CURRENCIES, MAGNITUDES, MONTH_BY_NAME, MONTH_PATTERN, MONTHS, UNITS
from .rules_common import Rule, Token, final_period

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
_SIGN = r"[-\u2212+]?"

_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_US_DATE = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_PHONE = re.compile(r"(?:(\+?1)[ .-])?(\(\d{3}\)|\d{3})[ .-](\d{3})[ .-](\d{4})(?!\d)|(\d{3})-(\d{4})(?![\d-])")
_TIME = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?!\d)(?:\s?([AaPp])\.?\s?[Mm]\.?(?![^\W\d_]))?")
_DAY_MONTH = re.compile(rf"(\d{{1,2}})(?:st|nd|rd|th)?(\s+(?:of\s+)?)({MONTH_PATTERN})\.?(?![^\W\d_])")
_CLOCK = re.compile(r"(\d{1,2})\s?([AaPp])\.?\s?[Mm]\.?(?![^\W\d_])")
_MAGNITUDE = "|".join(sorted(map(re.escape, MAGNITUDES), key=len, reverse=True))
_CURRENCY = re.compile(rf"({_SIGN})([$€£¥₹])\s?({_NUM})(?:\.(\d+))?(?:\s?({_MAGNITUDE})(?![^\W\d_]))?")
_CURRENCY_SUFFIX = re.compile(rf"({_NUM})(?:\.(\d+))?\s?([€£¢])")
_PERCENT = re.compile(rf"({_SIGN})({_NUM})?(?:\.(\d+))?\s?(%|‰)")
_DECADE = re.compile(r"(\d{4}|['\u2019]\d{2}|[1-9]0)s(?![^\W\d_])")
_ORDINAL = re.compile(rf"({_NUM})(st|nd|rd|th|ST|ND|RD|TH)(?![^\W\d_])")
_FRACTION = re.compile(r"(\d{1,3})/(\d{1,4})(?![\d/])")
_RANGE = re.compile(rf"({_NUM})(?:-|\s?[\u2013\u2014]\s?)({_NUM})(?![\d,.-])")
_UNIT = "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True))
_WITH_UNIT = re.compile(rf"({_NUM})(?:\.(\d+))?\s?({_UNIT})(?![^\W\d_])")
_NUMBER = re.compile(rf"({_SIGN})(?:({_NUM})(?:\.(\d+))?|\.(\d+))")


def _sign_ok(text: str, pos: int, sign: str) -> bool:
    # A '-' glued to a preceding word is a hyphen ("COVID-19"), not a minus sign.
    return not sign or pos == 0 or not text[pos - 1].isalnum()


def _sign_words(sign: str) -> list[str]:
    return {"": [], "+": ["plus"]}.get(sign, ["minus"])


def quantity(integer: str | None, fraction: str | None) -> list[str]:
    """Digits before/after the decimal point as words; a 4-digit plain integer reads as a year
    when it lies in 1100..2099 ("1984" -> nineteen eighty-four)."""
    if integer is None:
        return nw.decimal("", fraction or "")
    if fraction is not None:
        return nw.decimal(integer, fraction)
    if len(integer) == 4 and integer.isascii() and 1100 <= int(integer) <= 2099:
        return nw.year(int(integer))
    if "," not in integer and len(integer) > 15:
        return nw.digits(integer)
    return nw.integer(integer)


def _date_words(month: int, day: int, year: str | None) -> list[str] | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    words = [MONTHS[month - 1], *nw.ordinal(day)]
    if year is not None:
        words += nw.year(int(year)) if len(year) == 4 else _two_digit_year(year)
    return words


def _two_digit_year(text: str) -> list[str]:
    return ["oh", *nw.digits(text[1])] if text[0] == "0" else nw.cardinal(int(text))


def iso_date(text: str, pos: int) -> Token | None:
    """2024-03-05 -> March fifth twenty twenty-four."""
    m = _ISO_DATE.match(text, pos)
    if not m:
        return None
    words = _date_words(int(m[2]), int(m[3]), m[1])
    return Token(pos, m.end(), tuple(words)) if words else None


def us_date(text: str, pos: int) -> Token | None:
    """5/3/2024 -> May third twenty twenty-four (month first)."""
    m = _US_DATE.match(text, pos)
    if not m:
        return None
    words = _date_words(int(m[1]), int(m[2]), m[3])
    return Token(pos, m.end(), tuple(words)) if words else None


def phone(text: str, pos: int) -> Token | None:
    """555-123-4567 / (555) 123-4567 / 555-1234 -> digit by digit."""
    m = _PHONE.match(text, pos)
    if not m:
        return None
    return Token(pos, m.end(), tuple(nw.digits(m[0])))


def day_month(text: str, pos: int) -> Token | None:
    """5 March / 5th of March -> fifth of March (the year, if any, is read on its own)."""
    m = _DAY_MONTH.match(text, pos)
    if not m or not 1 <= int(m[1]) <= 31:
        return None
    day = nw.ordinal(int(m[1]))
    month = MONTHS[MONTH_BY_NAME[m[3].lower()] - 1]
    of_at = m[2].find("of")
    of_span = (m.start(2) + of_at, m.start(2) + of_at + 2) if of_at >= 0 else (pos, m.start(2))
    spans = ((pos, m.start(2)),) * len(day) + (of_span, (m.start(3), m.end()))
    return Token(pos, m.end(), (*day, "of", month), final_period(text, m.end()), spans)


def _ampm(letter: str | None) -> list[str]:
    return [] if letter is None else ["AM" if letter in "Aa" else "PM"]


def time_of_day(text: str, pos: int) -> Token | None:
    """3:30 pm -> three thirty PM; 14:05 -> fourteen oh five; 3:00 -> three o'clock."""
    m = _TIME.match(text, pos)
    if not m:
        return None
    hour, minute = int(m[1]), int(m[2])
    second = int(m[3]) if m[3] else None
    if hour > (12 if m[4] else 24) or minute > 59 or (second is not None and second > 59):
        return None
    words = nw.cardinal(hour)
    if minute == 0:
        if m[4]:
            pass
        elif 1 <= hour <= 12 and second is None:
            words.append("o'clock")
        else:
            words.append("hundred")
    elif minute < 10:
        words += ["oh", *nw.cardinal(minute)]
    else:
        words += nw.cardinal(minute)
    if second is not None:
        words += ["and", *nw.cardinal(second), "second" if second == 1 else "seconds"]
    words += _ampm(m[4])
    return Token(pos, m.end(), tuple(words), final_period(text, m.end()))


def clock(text: str, pos: int) -> Token | None:
    """3pm / 3 p.m. -> three PM."""
    m = _CLOCK.match(text, pos)
    if not m or not 1 <= int(m[1]) <= 12:
        return None
    words = nw.cardinal(int(m[1])) + _ampm(m[2])
    return Token(pos, m.end(), tuple(words), final_period(text, m.end()))


def _money(symbol: str, integer: str, fraction: str | None, magnitude: str | None) -> list[str]:
    major1, major_n, minor1, minor_n = CURRENCIES.get(symbol, ("", "", "", ""))
    if magnitude is not None:
        return quantity_plain(integer, fraction) + [MAGNITUDES[magnitude], major_n]
    value = int(integer.replace(",", ""))
    if fraction is not None and len(fraction) == 2 and fraction != "00":
        cents = int(fraction)
        cent_words = nw.cardinal(cents) + [minor1 if cents == 1 else minor_n]
        if value == 0:
            return cent_words
        return nw.integer(integer) + [major1 if value == 1 else major_n, "and", *cent_words]
    if fraction is not None and fraction.strip("0"):
        return nw.decimal(integer, fraction) + [major_n]
    return nw.integer(integer) + [major1 if value == 1 else major_n]


def quantity_plain(integer: str, fraction: str | None) -> list[str]:
    """Like :func:`quantity` but never reads a year (amounts of money, measurements)."""
    return nw.decimal(integer, fraction) if fraction is not None else nw.integer(integer)


def currency(text: str, pos: int) -> Token | None:
    """$5 -> five dollars, $3.50 -> three dollars and fifty cents, £1m -> one million pounds."""
    m = _CURRENCY.match(text, pos)
    if not m or not _sign_ok(text, pos, m[1]):
        return None
    words = _sign_words(m[1]) + _money(m[2], m[3], m[4], m[5])
    return Token(pos, m.end(), tuple(words))


def currency_suffix(text: str, pos: int) -> Token | None:
    """20€ -> twenty euros, 50¢ -> fifty cents."""
    m = _CURRENCY_SUFFIX.match(text, pos)
    if not m:
        return None
    if m[3] == "¢":
        value = int(m[1].replace(",", ""))
        words = quantity_plain(m[1], m[2]) + ["cent" if value == 1 and m[2] is None else "cents"]
    else:
        words = _money(m[3], m[1], m[2], None)
    return Token(pos, m.end(), tuple(words))


def percent(text: str, pos: int) -> Token | None:
    """50% -> fifty percent, -2.5% -> minus two point five percent."""
    m = _PERCENT.match(text, pos)
    if not m or (m[2] is None and m[3] is None) or not _sign_ok(text, pos, m[1]):
        return None
    amount = quantity_plain(m[2], m[3]) if m[2] else nw.decimal("", m[3] or "")
    words = _sign_words(m[1]) + amount + (["percent"] if m[4] == "%" else ["per", "mille"])
    return Token(pos, m.end(), tuple(words))


def decade(text: str, pos: int) -> Token | None:
    """1990s -> nineteen nineties, '80s / 80s -> eighties."""
    m = _DECADE.match(text, pos)
    if not m:
        return None
    digits = m[1].lstrip("'\u2019")
    if len(digits) == 4:
        if not digits.isascii() or digits[-1] != "0":
            return None
        words = nw.year(int(digits))
    else:
        if not digits.isascii() or digits[-1] != "0" or digits[0] == "0":
            return None
        words = nw.cardinal(int(digits))
    words[-1] = nw.plural_word(words[-1])
    return Token(pos, m.end(), tuple(words))


def ordinal(text: str, pos: int) -> Token | None:
    """1st -> first, 22nd -> twenty-second."""
    m = _ORDINAL.match(text, pos)
    if not m:
        return None
    value = int(m[1].replace(",", ""))
    if value > nw.MAX_CARDINAL:
        return None
    return Token(pos, m.end(), tuple(nw.ordinal(value)))


def fraction(text: str, pos: int) -> Token | None:
    """3/4 -> three quarters, 24/7 -> twenty-four seven, 1/1000 -> one over one thousand."""
    m = _FRACTION.match(text, pos)
    if not m:
        return None
    num, den = int(m[1]), int(m[2])
    if m[0] == "24/7":
        words = ["twenty-four", "seven"]
    elif 2 <= den <= 100:
        words = nw.fraction(num, den)
    else:
        words = nw.cardinal(num) + ["over"] + nw.cardinal(den)
    return Token(pos, m.end(), tuple(words))


def number_range(text: str, pos: int) -> Token | None:
    """5-10 -> five to ten, 1990–2000 -> nineteen ninety to two thousand."""
    m = _RANGE.match(text, pos)
    if not m:
        return None
    words = quantity(m[1], None) + ["to"] + quantity(m[2], None)
    return Token(pos, m.end(), tuple(words))


def with_unit(text: str, pos: int) -> Token | None:
    """5km -> five kilometers, 1 kg -> one kilogram, 20°C -> twenty degrees Celsius."""
    m = _WITH_UNIT.match(text, pos)
    if not m:
        return None
    singular, plural = UNITS[m[3]]
    one = m[2] is None and m[1] == "1"
    words = quantity_plain(m[1], m[2]) + (singular if one else plural).split()
    return Token(pos, m.end(), tuple(words))


def number(text: str, pos: int) -> Token | None:
    """Cardinals, decimals, signed numbers, thousands separators: -1,234.5 -> minus one thousand
    two hundred thirty-four point five."""
    m = _NUMBER.match(text, pos)
    if not m:
        return None
    sign = m[1]
    if not _sign_ok(text, pos, sign):
        return None
    if m[2] is None:
        words = nw.decimal("", m[4])
    else:
        words = quantity(m[2], m[3]) if not sign else quantity_plain(m[2], m[3])
    return Token(pos, m.end(), tuple(_sign_words(sign) + words))


NUMERIC_RULES: tuple[Rule, ...] = (
    iso_date,
    us_date,
    phone,
    time_of_day,
    day_month,
    clock,
    currency,
    currency_suffix,
    percent,
    decade,
    ordinal,
    fraction,
    number_range,
    with_unit,
    number,
)
"""Tried in this order at a position whose character is a digit, sign, '.', quote or currency."""
