"""Calculations written in a report are redone: a result that holds needs no source, one that
does not is flagged with what it comes to."""

from __future__ import annotations

from research_fixtures import evidence

from core.research.arithmetic import calculations, is_change
from core.research.citations import check_claims


def _checked(sentence: str) -> list[tuple[str, bool]]:
    return [(c.stated_text, c.holds) for c in calculations(sentence)]


def test_calculations_are_redone_to_the_stated_precision() -> None:
    assert _checked("$83,950 - $55,940 = $28,010") == [("28010", True)]
    # a small model's slip with the right operands: 28,010 / 55,940 is 50.1%, not 49.6%
    assert _checked("($28,010 / $55,940) * 100 ≈ 49.6%") == [("49.6", False)]
    assert _checked("($28,010 / $55,940) * 100 ≈ 50.1%") == [("50.1", True)]
    assert calculations("($28,010 / $55,940) * 100 ≈ 49.6%")[0].comes_to == "50.072%"
    # a chain states one result twice; a fraction may be stated as a percentage
    assert _checked("(83,950 - 64,120) / 64,120 = 0.309 = 30.9%") == [
        ("0.309", True),
        ("30.9", True),
    ]
    assert _checked("3,150 / 12,600 = 25.0%") == [("25.0", True)]
    # ... but not when the expression multiplies by 100 itself (a margin the model wrote as
    # a percentage of a percentage)
    margin = "(512 / 70,340) * 100 ≈ 61.24%"
    assert _checked(margin) == [("61.24", False)]
    assert calculations(margin)[0].comes_to == "0.7279%"
    assert _checked("(512 / 70,340) * 100 ≈ 72.79%") == [("72.79", False)]
    assert _checked("100 × 512 / 70,340 ≈ 0.73%") == [("0.73", True)]
    assert calculations("(512 / 70,340) ≈ 61.24%")[0].comes_to == "0.7279%"
    assert _checked("365 × (1,000 + 2,000) / 2 = 547,500 and 5 x 3 = 16") == [
        ("547500", True),
        ("16", False),
    ]
    # "=" rounds to the stated decimals; "≈" also allows half a percent
    assert _checked("10 / 3 = 3.33") == [("3.33", True)]
    assert _checked("10 / 3 = 3.3333") == [("3.3333", True)]
    assert _checked("10 / 3 = 3.4") == [("3.4", False)]
    assert _checked("1,000 / 3 ≈ 334") == [("334", True)]
    # not calculations
    assert calculations("In FY2022 = fiscal 2022, revenue was $12.2 billion.") == []
    assert calculations("The ratio is 1.5 and 10 / 0 = 3.") == []


def test_report_arithmetic_is_checked_with_the_claims() -> None:
    ev_id = "ev1:" + "7" * 16
    income = evidence(ev_id, "Total net sales were $64,120 in 2016 and $83,950 in 2017.")
    get = {ev_id: income}.get
    # a derived figure no passage states is not "missing from the cited text"
    right = f"Sales grew by (83,950 - 64,120) / 64,120 = 30.9% from 2016 to 2017 [{ev_id}]."
    assert check_claims(right, get, None) == []
    wrong = right.replace("30.9%", "10.0%")
    assert [f.reason for f in check_claims(wrong, get, None)] == [
        "the arithmetic does not hold: (83,950 - 64,120) / 64,120 = 10.0% (it comes to 30.926%)"
    ]
    # a fall: the result holds with its sign, and is no more missing than a rise is
    fall = f"Sales fell by (64,120 - 83,950) / 83,950 = -23.6% from 2017 [{ev_id}]."
    assert _checked(fall) == [("23.6", True)]
    assert check_claims(fall, get, None) == []
    # a calculation line under a cited one: its operands come from the line's passage
    line = f"Sales were $64,120 and $83,950 [{ev_id}]. $83,950 - $64,120 = $19,830."
    assert check_claims(line, get, None) == []
    # ... and when they come from nowhere, it is flagged as any uncited number
    made_up = "$83,950 - $55,940 = $28,010."
    assert [f.reason for f in check_claims(made_up, get, None)] == ["no citation"]


def test_a_calculation_may_use_figures_the_question_gives() -> None:
    ev_id = "ev1:" + "8" * 16
    get = {ev_id: evidence(ev_id, "Net income was $1,840 million in 2017.")}.get
    question = "At a 21% tax rate, what would the after-tax income have been?"
    sentence = f"After tax: 1,840 * (100 - 21) / 100 = 1,453.6 [{ev_id}]."
    assert check_claims(sentence, get, None, question) == []
    # the 21 is the question's; asked something else, it must come from the cited text
    assert [f.reason for f in check_claims(sentence, get, None, "What was net income?")] == [
        "not in the cited text: 21"
    ]


def test_a_relative_change_is_told_from_other_calculations() -> None:
    # one figure against another of the same line: how growth between two periods is worked out
    for calc in (
        "(4,200 - 3,500) / 3,500 * 100 = 20%",
        "((4,200 - 3,500) / 3,500) * 100",
        "100 * (4,200 - 3,500) / 3,500",
        "(4,200 - 3,500) * 100 / 3,500 ≈ 20.0%",
        "($4,200 - $3,500) / $3,500",
        "4,200 / 3,500 - 1 = 0.2",
    ):
        assert is_change(calc), calc
    # a ratio of two items, a margin, a difference, a sum over a quotient, or not arithmetic
    for calc in (
        "4,200 / 365 = 11.51",
        "512 / 70,340 * 100",
        "(4,200 - 3,500) / 1,200 * 100",
        "(1,491 - 1,874) - (840 - 762)",
        "365 * (1,426 + 3,583) / (11,955 + 2,187)",
        "the growth rate",
    ):
        assert not is_change(calc), calc
