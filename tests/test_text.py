import re

from core.text import (
    MONEY,
    MONTH,
    MONTHS,
    NUMBER_RE,
    PER_CENT,
    PERCENT,
    QUESTION_WORDS,
    STOP_WORDS,
    YEAR,
    figures,
    month_number,
    month_numbers,
    plain_number,
    sentence_ranges,
    split_sentences,
)


def test_sentences_end_at_punctuation_not_at_abbreviations_or_initials() -> None:
    text = 'Acme Inc. sold 5 units in Sept. 2021. J. Smith said "yes." Then it stopped.'
    assert split_sentences(text) == [
        "Acme Inc. sold 5 units in Sept. 2021.",
        'J. Smith said "yes."',
        "Then it stopped.",
    ]
    assert split_sentences("It rained in May. The roads closed.") == [
        "It rained in May.",
        "The roads closed.",
    ]
    assert sentence_ranges("One. Two.  ") == [(0, 4), (5, 9)]


def test_months_by_name_and_short_form() -> None:
    assert MONTHS[0] == "january" and len(MONTHS) == 12
    assert [month_number(w) for w in ("Sept.", "sep", "DECEMBER", "May", "market")] == [
        9,
        9,
        12,
        5,
        None,
    ]
    assert month_numbers("on Nov. 27 the market fell; by March it rose") == [11, 3]
    assert re.fullmatch(rf"{MONTH}\.? \d{{1,2}}", "Sept. 5")
    assert not re.fullmatch(MONTH, "Marc")


def test_stop_words_and_question_words() -> None:
    assert {"the", "which", "however", "would"} <= STOP_WORDS
    assert not {"revenue", "first", "name"} & STOP_WORDS
    assert STOP_WORDS < QUESTION_WORDS and {"find", "first", "name"} <= QUESTION_WORDS


def test_numbers_money_and_percentages() -> None:
    assert NUMBER_RE.findall("52,870.5 and 12") == ["52,870.5", "12"]
    assert figures("$52,870 rose 12.5% in 2021") == ["52870", "12.5", "2021"]
    assert plain_number("€ 1,200.5") == "1200.5"
    assert re.fullmatch(MONEY, "$ 41,200") and re.fullmatch(MONEY, "HK$3")
    assert re.fullmatch(PERCENT, "28.3%") and re.fullmatch(PERCENT, "5 per cent")
    assert not re.fullmatch(PERCENT, "5 percentage")
    assert re.search(PER_CENT, "What percentage of sales", re.I)
    assert re.fullmatch(YEAR, "1994") and not re.fullmatch(YEAR, "2194")
