"""Word tables for English normalization: abbreviations, months, units, currencies, symbols.

Plain data shared by :mod:`normalize` (expansion) and :mod:`segment` (no sentence split after a
title such as "Dr."). Keys are lower case without the trailing period.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Abbreviation:
    """How one abbreviation is spoken.

    ``words``: the expansion. ``title``: it precedes a name ("Dr. Smith"), so a period after it never
    ends a sentence. ``alt``: the expansion when no capitalized word follows ("Main St." -> Street).
    ``bare``: also expanded when written without its period ("vs", "Dr Smith").
    ``before_digit``: expanded only when a number follows ("No. 5", "Fig. 3").
    """

    words: tuple[str, ...]
    title: bool = False
    alt: tuple[str, ...] | None = None
    bare: bool = False
    before_digit: bool = False


def _a(words: str, **kw: object) -> Abbreviation:
    return Abbreviation(tuple(words.split()), **kw)  # type: ignore[arg-type]


ABBREVIATIONS: dict[str, Abbreviation] = {
    "dr": _a("Doctor", title=True, alt=("Drive",), bare=True),
    "st": _a("Saint", title=True, alt=("Street",), bare=True),
    "mr": _a("Mister", title=True, bare=True),
    "mrs": _a("Missus", title=True, bare=True),
    "ms": _a("Miz", title=True),
    "prof": _a("Professor", title=True),
    "mt": _a("Mount", title=True),
    "gen": _a("General", title=True),
    "sgt": _a("Sergeant", title=True),
    "capt": _a("Captain", title=True),
    "lt": _a("Lieutenant", title=True),
    "col": _a("Colonel", title=True),
    "rev": _a("Reverend", title=True),
    "hon": _a("Honorable", title=True),
    "gov": _a("Governor", title=True),
    "sen": _a("Senator", title=True),
    "rep": _a("Representative", title=True),
    "pres": _a("President", title=True),
    "supt": _a("Superintendent", title=True),
    "jr": _a("Junior"),
    "sr": _a("Senior"),
    "ave": _a("Avenue"),
    "blvd": _a("Boulevard"),
    "rd": _a("Road"),
    "etc": _a("et cetera", bare=True),
    "e.g": _a("for example", title=True),
    "i.e": _a("that is", title=True),
    "cf": _a("compare", title=True),
    "vs": _a("versus", title=True, bare=True),
    "approx": _a("approximately", title=True),
    "dept": _a("Department"),
    "inc": _a("Incorporated"),
    "ltd": _a("Limited"),
    "corp": _a("Corporation"),
    "est": _a("established", title=True),
    "no": _a("number", title=True, before_digit=True),
    "nos": _a("numbers", title=True, before_digit=True),
    "fig": _a("figure", title=True, before_digit=True),
    "vol": _a("volume", title=True, before_digit=True),
    "ch": _a("chapter", title=True, before_digit=True),
    "pp": _a("pages", title=True, before_digit=True),
    "p": _a("page", title=True, before_digit=True),
}

MONTHS: tuple[str, ...] = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

MONTH_BY_NAME: dict[str, int] = {}
for _i, _m in enumerate(MONTHS, start=1):
    MONTH_BY_NAME[_m.lower()] = _i
    MONTH_BY_NAME[_m[:3].lower()] = _i
MONTH_BY_NAME["sept"] = 9

MONTH_PATTERN = "|".join(sorted((m.capitalize() for m in MONTH_BY_NAME), key=len, reverse=True))
"""Regex alternation of capitalized month names and abbreviations ("September", "Sept", "Sep")."""

CURRENCIES: dict[str, tuple[str, str, str, str]] = {
    # symbol: (major singular, major plural, minor singular, minor plural)
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "sen", "sen"),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}

MAGNITUDES: dict[str, str] = {
    "k": "thousand",
    "K": "thousand",
    "thousand": "thousand",
    "m": "million",
    "M": "million",
    "mn": "million",
    "million": "million",
    "b": "billion",
    "B": "billion",
    "bn": "billion",
    "billion": "billion",
    "trillion": "trillion",
    "tn": "trillion",
}

UNITS: dict[str, tuple[str, str]] = {
    # case-sensitive symbol: (singular, plural); only symbols that are not common words
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pounds", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "ft": ("foot", "feet"),
    "mi": ("mile", "miles"),
    "KB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "ms": ("millisecond", "milliseconds"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}

SYMBOLS: dict[str, tuple[str, ...]] = {
    "&": ("and",),
    "+": ("plus",),
    "@": ("at",),
    "%": ("percent",),
    "=": ("equals",),
    "°": ("degrees",),
    "×": ("times",),
    "±": ("plus", "or", "minus"),
    "÷": ("divided", "by"),
    "§": ("section",),
    "¶": ("paragraph",),
    "©": ("copyright",),
    "‰": (
        "per",
        "mille",
    ),
}

URL_SYMBOLS: dict[str, str] = {
    ".": "dot",
    "/": "slash",
    ":": "colon",
    "-": "dash",
    "_": "underscore",
    "?": "question",
    "=": "equals",
    "&": "and",
    "#": "hash",
    "%": "percent",
    "~": "tilde",
    "@": "at",
    "+": "plus",
}

TLDS: tuple[str, ...] = (
    "com",
    "org",
    "net",
    "edu",
    "gov",
    "io",
    "ai",
    "dev",
    "app",
    "co",
    "uk",
    "us",
    "de",
    "fr",
    "info",
    "biz",
    "me",
    "tv",
    "ly",
    "ca",
    "au",
    "eu",
    "ru",
    "jp",
    "cn",
    "in",
    "nl",
)
