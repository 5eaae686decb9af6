"""Numeric answers worked out from the passages' figures by the program (no model)."""

from __future__ import annotations

from research_fixtures import evidence

from core.research.worked import worked_answer

INCOME = evidence(
    "ev1:" + "1" * 16,
    "Total net sales | 107,006 | 135,987 | 177,866 Net income | $ 596 | $ 2,371 | $ 3,033",
)
PAYABLES = evidence("ev1:" + "2" * 16, "Accounts payable | 25,309 | 34,616")
QUESTION = (
    "What is Amazon's year-over-year change in revenue from FY2016 to FY2017 (in units of "
    "percents and round to one decimal place)?"
)


def test_the_model_copies_figures_and_the_program_computes() -> None:
    # FinanceBench 08135: the 1.5B had the statement in front of it and answered 10.0%
    w = worked_answer("10.0%", "(177866 - 135987) / 135987 * 100", QUESTION, [INCOME])
    assert w is not None
    assert w.answer == "30.8%"
    assert w.calculation == "(177,866 - 135,987) / 135,987 * 100 = 30.8%"
    assert w.sources == [INCOME.evidence_id]
    # a fraction, for a question about percents, is shown as one; a stated result is ignored
    w = worked_answer(
        "The change was 10%", "(177,866 - 135,987) / 135,987 = 0.1", QUESTION, [INCOME]
    )
    assert w is not None
    assert w.answer == "The change was 30.8%"
    assert w.calculation == "((177,866 - 135,987) / 135,987) * 100 = 30.8%"


def test_figures_come_from_the_passages_the_question_or_constants() -> None:
    dpo = "DPO is defined as 365 * (average accounts payable) / (COGS + 1.5)."
    calc = "365 * ((25,309 + 34,616) / 2) / (3,033 + 1.5)"
    w = worked_answer("93.86", calc, dpo, [INCOME, PAYABLES])
    assert w is not None
    assert w.sources == [PAYABLES.evidence_id, INCOME.evidence_id]
    assert w.answer == f"{365 * (25309 + 34616) / 2 / 3034.5:,.2f}"
    # a figure no passage holds, one figure, or anything but arithmetic: not worked out
    assert worked_answer("93.86", calc.replace("34,616", "34,617"), dpo, [INCOME, PAYABLES]) is None
    assert worked_answer("$3,033", "3,033", "", [INCOME]) is None
    assert worked_answer("x", "__import__('os') + 1", "", [INCOME]) is None
    assert worked_answer("x", "2 * 100", "", [INCOME]) is None  # constants alone prove nothing
    note = evidence("ev1:" + "3" * 16, "See Note 1 and Note 2 of the statements.")
    assert worked_answer("2", "1 + 1", "", [note]) is None  # a digit is in any passage
    # a calculation beside a name or place is not the answer's
    assert worked_answer("Ellen Park", "3,033 - 2,371", "", [INCOME]) is None
    w = worked_answer("No", "3,033 - 2,371", "Did net income fall?", [INCOME])
    assert w is not None and w.answer == "No" and w.calculation == "3,033 - 2,371 = 662"


def test_the_result_is_written_as_asked() -> None:
    # no decimals asked: the answer's own, or none for a whole number; years are not figures
    w = worked_answer("FY2019 net income of $2,000", "596 + 2,371", "", [INCOME])
    assert w is not None and w.answer == "FY2019 net income of $2,967"
    w = worked_answer("about 1.5", "3,033 / 2,371", "", [INCOME])
    assert w is not None and w.answer == "about 1.3"
    w = worked_answer("about 1", "3,033 / 2,371", "", [INCOME])
    assert w is not None and w.answer == "about 1.28"
    # an answer without a figure is kept; the calculation goes beside it
    w = worked_answer("Yes", "3,033 / 2,371 * 100", "Did net income grow?", [INCOME])
    assert w is not None and w.answer == "Yes"
    assert w.calculation == "3,033 / 2,371 * 100 = 127.9%"
    # a large result is an amount, not a fraction to show as a percentage
    w = worked_answer(
        "$41,879", "177,866 - 135,987", "What percent ...? Give the amount.", [INCOME]
    )
    assert w is not None and w.answer == "$41,879"
