"""Calculations written in a report are redone: a result that holds needs no source, one that
does not is flagged with what it comes to."""

from __future__ import annotations

from research_fixtures import evidence

from core.research.arithmetic import calculations
from core.research.citations import check_claims


def _checked(sentence: str) -> list[tuple[str, bool]]:
    return [(c.stated_text, c.holds) for c in calculations(sentence)]


def test_calculations_are_redone_to_the_stated_precision() -> None:
    assert _checked("$177,866 - $118,573 = $59,293") == [("59293", True)]
    # the 1.5B's FinanceBench 08135: 59,293 / 118,573 is 50.0%
    assert _checked("($59,293 / $118,573) * 100 ≈ 49.7%") == [("49.7", False)]
    assert _checked("($59,293 / $118,573) * 100 ≈ 50.0%") == [("50.0", True)]
    assert calculations("($59,293 / $118,573) * 100 ≈ 49.7%")[0].comes_to == "50.005%"
    # a chain states one result twice; a fraction may be stated as a percentage
    assert _checked("(177,866 - 135,987) / 135,987 = 0.308 = 30.8%") == [
        ("0.308", True),
        ("30.8", True),
    ]
    assert _checked("6,098 / 17,606 = 34.6%") == [("34.6", True)]
    # ... but not when the expression multiplies by 100 itself (the 1.5B's FinanceBench 04458)
    netflix = "(609 / 83,779) * 100 ≈ 59.77%"
    assert _checked(netflix) == [("59.77", False)]
    assert calculations(netflix)[0].comes_to == "0.7269%"
    assert _checked("(609 / 83,779) * 100 ≈ 72.69%") == [("72.69", False)]
    assert _checked("100 × 609 / 83,779 ≈ 0.73%") == [("0.73", True)]
    assert calculations("(609 / 83,779) ≈ 59.77%")[0].comes_to == "0.7269%"
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
    assert calculations("In FY2022 = fiscal 2022, revenue was $17.6 billion.") == []
    assert calculations("The ratio is 1.5 and 10 / 0 = 3.") == []


def test_report_arithmetic_is_checked_with_the_claims() -> None:
    ev_id = "ev1:" + "7" * 16
    income = evidence(ev_id, "Total net sales were $135,987 in 2016 and $177,866 in 2017.")
    get = {ev_id: income}.get
    # a derived figure no passage states is not "missing from the cited text"
    right = f"Sales grew by (177,866 - 135,987) / 135,987 = 30.8% from 2016 to 2017 [{ev_id}]."
    assert check_claims(right, get, None) == []
    wrong = right.replace("30.8%", "10.0%")
    assert [f.reason for f in check_claims(wrong, get, None)] == [
        "the arithmetic does not hold: (177,866 - 135,987) / 135,987 = 10.0% (it comes to 30.796%)"
    ]
    # a calculation line under a cited one: its operands come from the line's passage
    line = f"Sales were $135,987 and $177,866 [{ev_id}]. $177,866 - $135,987 = $41,879."
    assert check_claims(line, get, None) == []
    # ... and when they come from nowhere, it is flagged as any uncited number
    made_up = "$177,866 - $118,573 = $59,293."
    assert [f.reason for f in check_claims(made_up, get, None)] == ["no citation"]


def test_a_calculation_may_use_figures_the_question_gives() -> None:
    ev_id = "ev1:" + "8" * 16
    get = {ev_id: evidence(ev_id, "Net income was $3,033 million in 2017.")}.get
    question = "At a 21% tax rate, what would the after-tax income have been?"
    sentence = f"After tax: 3,033 * (100 - 21) / 100 = 2,396.07 [{ev_id}]."
    assert check_claims(sentence, get, None, question) == []
    # the 21 is the question's; asked something else, it must come from the cited text
    assert [f.reason for f in check_claims(sentence, get, None, "What was net income?")] == [
        "not in the cited text: 21"
    ]
