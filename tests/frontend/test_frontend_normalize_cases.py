"""Normalization: input text -> the exact spoken text (what espeak-ng and the teacher read)."""

import pytest

from uttera_server.frontend import normalize

CASES = [
    # cardinals
    ("0", "zero"),
    ("7 apples", "seven apples"),
    ("13", "thirteen"),
    ("42", "forty-two"),
    ("100", "one hundred"),
    ("101 dalmatians", "one hundred one dalmatians"),
    ("999", "nine hundred ninety-nine"),
    ("12345", "twelve thousand three hundred forty-five"),
    ("1000000", "one million"),
    ("007", "zero zero seven"),
    (
        "1234567890123456789",
        "one two three four five six seven eight nine zero one two three four five six seven eight nine",
    ),
    # thousands separators
    ("1,000", "one thousand"),
    ("1,234,567", "one million two hundred thirty-four thousand five hundred sixty-seven"),
    ("10,000 people", "ten thousand people"),
    ("1,5", "one five"),
    # ordinals
    ("1st", "first"),
    ("2nd", "second"),
    ("3rd", "third"),
    ("4th", "fourth"),
    ("11th", "eleventh"),
    ("12th", "twelfth"),
    ("21st", "twenty-first"),
    ("22nd place", "twenty-second place"),
    ("100th", "one hundredth"),
    ("103rd", "one hundred third"),
    ("1,000th", "one thousandth"),
    # decimals and signs
    ("3.14", "three point one four"),
    ("0.5", "zero point five"),
    (".5", "point five"),
    ("-5", "minus five"),
    ("-3.5 degrees", "minus three point five degrees"),
    ("+7", "plus seven"),
    ("\u22124", "minus four"),
    ("it was -2", "it was minus two"),
    ("version 1.2.3", "version one point two point three"),
    # years and decades
    ("1984", "nineteen eighty-four"),
    ("in 2024", "in twenty twenty-four"),
    ("2000", "two thousand"),
    ("2005", "two thousand five"),
    ("1905", "nineteen oh five"),
    ("1900", "nineteen hundred"),
    ("2010", "twenty ten"),
    ("1066", "one thousand sixty-six"),
    ("the 1990s", "the nineteen nineties"),
    ("the '80s", "the eighties"),
    ("her 20s", "her twenties"),
    ("1990-2000", "nineteen ninety to two thousand"),
    # currency
    ("$5", "five dollars"),
    ("$1", "one dollar"),
    ("$3.50", "three dollars and fifty cents"),
    ("$1.01", "one dollar and one cent"),
    ("$0.99", "ninety-nine cents"),
    ("$5.00", "five dollars"),
    ("$1,000,000", "one million dollars"),
    ("$2.5bn", "two point five billion dollars"),
    ("$5 million", "five million dollars"),
    ("€20", "twenty euros"),
    ("£1m", "one million pounds"),
    ("£3.20", "three pounds and twenty pence"),
    ("¥100", "one hundred yen"),
    ("20€", "twenty euros"),
    ("50¢", "fifty cents"),
    ("-$5", "minus five dollars"),
    ("$10k", "ten thousand dollars"),
    # percentages
    ("50%", "fifty percent"),
    ("3.5%", "three point five percent"),
    ("-2%", "minus two percent"),
    ("100 %", "one hundred percent"),
    # dates
    ("2024-03-05", "March fifth twenty twenty-four"),
    ("1999-12-31", "December thirty-first nineteen ninety-nine"),
    ("5/3/2024", "May third twenty twenty-four"),
    ("12/25/99", "December twenty-fifth ninety-nine"),
    ("1/1/05", "January first oh five"),
    ("March 5th", "March fifth"),
    ("March 5, 2024", "March fifth, twenty twenty-four"),
    ("Jan. 5th", "January fifth"),
    ("Sept 11", "September eleventh"),
    ("5 March 2024", "fifth of March twenty twenty-four"),
    ("the 5th of March", "the fifth of March"),
    ("May 31", "May thirty-first"),
    ("March 40", "March forty"),
    ("May 3:30", "May three thirty"),
    ("on July 4th, 1776.", "on July fourth, seventeen seventy-six."),
    ("2024-13-45", "twenty twenty-four thirteen to forty-five"),
    # times
    ("3:30 pm", "three thirty PM"),
    ("3:30pm", "three thirty PM"),
    ("14:05", "fourteen oh five"),
    ("14:00", "fourteen hundred"),
    ("3:00", "three o'clock"),
    ("7 a.m.", "seven AM."),
    ("at 7 a.m. sharp", "at seven AM sharp"),
    ("10pm", "ten PM"),
    ("9:15:30", "nine fifteen and thirty seconds"),
    ("12:00 AM", "twelve AM"),
    # abbreviations
    ("Dr. Smith", "Doctor Smith"),
    ("Mr. Jones", "Mister Jones"),
    ("Mrs. Brown", "Missus Brown"),
    ("Ms. Lee", "Miz Lee"),
    ("Mr Bean", "Mister Bean"),
    ("St. Louis", "Saint Louis"),
    ("Main St.", "Main Street."),
    ("Elm St. is", "Elm Street is"),
    ("Prof. X", "Professor X"),
    ("apples, pears, etc.", "apples, pears, et cetera."),
    ("e.g. this", "for example this"),
    ("i.e. that", "that is that"),
    ("cats vs. dogs", "cats versus dogs"),
    ("cats vs dogs", "cats versus dogs"),
    ("No. 5", "number five"),
    ("No, thanks", "No, thanks"),
    ("Fig. 3", "figure three"),
    ("John Smith Jr.", "John Smith Junior."),
    ("Acme Inc.", "Acme Incorporated."),
    # acronyms and initials
    ("J. R. R. Tolkien", "J R R Tolkien"),
    ("the U.S.A.", "the U S A."),
    ("the U.S. economy", "the U S economy"),
    ("NASA and the FBI", "NASA and the FBI"),
    # urls and e-mail
    ("example.com", "example dot com"),
    ("www.example.org", "w w w dot example dot org"),
    ("https://github.com/openai", "h t t p s colon slash slash github dot com slash openai"),
    ("http://a.io/x-y_z", "h t t p colon slash slash a dot io slash x dash y underscore z"),
    ("mail john.doe@example.com now", "mail john dot doe at example dot com now"),
    ("a+b@test.co.uk", "a plus b at test dot co dot uk"),
    # symbols
    ("salt & pepper", "salt and pepper"),
    ("2 + 2 = 4", "two plus two equals four"),
    ("2+2=4", "two plus two equals four"),
    ("meet @ noon", "meet at noon"),
    ("#1 fan", "number one fan"),
    ("C++ and C#", "C plus plus and C sharp"),
    ("and/or", "and or"),
    ("yes/no", "yes slash no"),
    ("3/4 cup", "three quarters cup"),
    ("1/2", "one half"),
    ("2/3", "two thirds"),
    ("24/7", "twenty-four seven"),
    ("x\u00b2", "x squared"),
    ("\u00bd", "one half"),
    ("20\u00b0C", "twenty degrees Celsius"),
    ("5km", "five kilometers"),
    ("1 kg", "one kilogram"),
    ("16GB", "sixteen gigabytes"),
    ("~5 min", "about five min"),
    ("**bold** and _it_", "bold and it"),
    # phone numbers and ranges
    ("555-123-4567", "five five five one two three four five six seven"),
    ("(555) 123-4567", "five five five one two three four five six seven"),
    ("pages 5-10", "pages five to ten"),
    ("5\u201310", "five to ten"),
    # unicode punctuation
    ("\u201cHello,\u201d she said.", "Hello, she said."),
    ("It\u2019s fine", "It's fine"),
    ("wait\u2026 what", "wait, what"),
    ("Wait...", "Wait."),
    ("well \u2014 maybe", "well, maybe"),
    ("yes - no", "yes, no"),
    ("Hello!!", "Hello!"),
    ("Really?!", "Really?"),
    ("Stop. Go", "Stop, Go"),
    ("hi (there) you", "hi, there, you"),
    ("COVID-19", "COVID nineteen"),
    ("rock-and-roll", "rock-and-roll"),
    ("file.txt", "file dot txt"),
    ("na\u00efve caf\u00e9", "na\u00efve caf\u00e9"),
    ("\uff21\uff22\uff23", "ABC"),
    ("\u0663\u0664", "thirty-four"),
    ("  spaced   out  ", "spaced out"),
    ("", ""),
    ("!!!", ""),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0] or "<empty>" for c in CASES])
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text).text == expected


MAPPINGS = [
    ("$5", [("five", "$5"), ("dollars", "$5")]),
    (
        "Pay $3.50 now",
        [
            ("Pay", "Pay"),
            ("three", "$3.50"),
            ("dollars", "$3.50"),
            ("and", "$3.50"),
            ("fifty", "$3.50"),
            ("cents", "$3.50"),
            ("now", "now"),
        ],
    ),
    ("Dr. Who", [("Doctor", "Dr."), ("Who", "Who")]),
    ("at 3:30 pm,", [("at", "at"), ("three", "3:30 pm"), ("thirty", "3:30 pm"), ("PM", "3:30 pm")]),
    ("\u201cHi,\u201d", [("Hi", "Hi")]),
    ("March 5, 2024", [("March", "March"), ("fifth", "5"), ("twenty", "2024"), ("twenty-four", "2024")]),
    ("5th of May", [("fifth", "5th"), ("of", "of"), ("May", "May")]),
    ("x-ray 50%", [("x-ray", "x-ray"), ("fifty", "50%"), ("percent", "50%")]),
]


@pytest.mark.parametrize(("text", "expected"), MAPPINGS, ids=[m[0] for m in MAPPINGS])
def test_spoken_words_point_at_original_characters(text: str, expected: list) -> None:
    norm = normalize(text)
    assert [(w.text, text[w.source[0] : w.source[1]]) for w in norm.words] == expected


def test_original_words_group_adjacent_pieces() -> None:
    norm = normalize("Email a.b@c.com, or ABC123 and/or J.R.R. now")
    assert [w.text for w in norm.source_words] == ["Email", "a.b@c.com", "or", "ABC123", "and/or", "J.R.R.", "now"]
    assert norm.source_index == tuple(sorted(norm.source_index))


def test_offset_is_added_to_spans() -> None:
    norm = normalize("$5", offset=10)
    assert {w.source for w in norm.words} == {(10, 12)}
    assert norm.source_words[0] == ("$5", 10, 12)
