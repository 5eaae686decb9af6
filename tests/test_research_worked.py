"""Numeric answers worked out from the passages' figures by the program (no model)."""

from __future__ import annotations

from research_fixtures import evidence

from core.research.worked import as_written, worked_answer

INCOME = evidence(
    "ev1:" + "1" * 16,
    "Total net sales | 51,230 | 64,120 | 83,950 Net income | $ 412 | $ 1,655 | $ 1,840",
)
PAYABLES = evidence("ev1:" + "2" * 16, "Accounts payable | 18,204 | 22,716")
QUESTION = "By what percent did Harrowgate Foods' net sales grow in 2017? Give one decimal place."


def test_the_model_copies_figures_and_the_program_computes() -> None:
    # the model had the statement in front of it, copied the right figures and answered 10.0%
    w = worked_answer("10.0%", "(83950 - 64120) / 64120 * 100", QUESTION, [INCOME])
    assert w is not None
    assert w.answer == "30.9%"
    assert w.calculation == "(83,950 - 64,120) / 64,120 * 100 = 30.9%"
    assert w.sources == [INCOME.evidence_id]
    # a fraction, for a question about percents, is shown as one; a stated result is ignored
    w = worked_answer("The change was 10%", "(83,950 - 64,120) / 64,120 = 0.1", QUESTION, [INCOME])
    assert w is not None
    assert w.answer == "The change was 30.9%"
    assert w.calculation == "((83,950 - 64,120) / 64,120) * 100 = 30.9%"


def test_figures_come_from_the_passages_the_question_or_constants() -> None:
    # the question gives a formula with constants of its own (365 and 1.5)
    ratio = "Take the ratio as 365 times mean payables over (net income + 1.5)."
    calc = "365 * ((18,204 + 22,716) / 2) / (1,840 + 1.5)"
    w = worked_answer("88.40", calc, ratio, [INCOME, PAYABLES])
    assert w is not None
    assert w.sources == [PAYABLES.evidence_id, INCOME.evidence_id]
    assert w.answer == f"{365 * (18204 + 22716) / 2 / 1841.5:,.2f}"
    # a figure no passage holds, one figure, or anything but arithmetic: not worked out
    off = calc.replace("22,716", "22,717")
    assert worked_answer("88.40", off, ratio, [INCOME, PAYABLES]) is None
    assert worked_answer("$1,840", "1,840", "", [INCOME]) is None
    assert worked_answer("x", "__import__('os') + 1", "", [INCOME]) is None
    assert worked_answer("x", "2 * 100", "", [INCOME]) is None  # constants alone prove nothing
    note = evidence("ev1:" + "3" * 16, "See Note 1 and Note 2 of the statements.")
    assert worked_answer("2", "1 + 1", "", [note]) is None  # a digit is in any passage
    # a calculation beside a name or place is not the answer's
    assert worked_answer("Ellen Park", "1,840 - 1,655", "", [INCOME]) is None
    w = worked_answer("No", "1,840 - 1,655", "Did net income fall?", [INCOME])
    assert w is not None and w.answer == "No" and w.calculation == "1,840 - 1,655 = 185"


def test_the_result_is_written_as_asked() -> None:
    # no decimals asked: the answer's own, or none for a whole number; years are not figures
    w = worked_answer("FY2019 net income of $2,000", "412 + 1,655", "", [INCOME])
    assert w is not None and w.answer == "FY2019 net income of $2,067"
    w = worked_answer("about 1.5", "1,840 / 1,655", "", [INCOME])
    assert w is not None and w.answer == "about 1.1"
    w = worked_answer("about 1", "1,840 / 1,655", "", [INCOME])
    assert w is not None and w.answer == "about 1.11"
    # an answer without a figure is kept; the calculation goes beside it
    w = worked_answer("Yes", "1,840 / 1,655 * 100", "Did net income grow?", [INCOME])
    assert w is not None and w.answer == "Yes"
    assert w.calculation == "1,840 / 1,655 * 100 = 111.2%"
    # a large result is an amount, not a fraction to show as a percentage
    w = worked_answer("$19,830", "83,950 - 64,120", "What percent ...? Give the amount.", [INCOME])
    assert w is not None and w.answer == "$19,830"


def test_a_bare_figure_answer_is_written_as_its_passage_writes_it() -> None:
    sale = "Harrowgate expects a gain of about $35 billion from the sale; margins rose 4.50%."
    texts = [sale, "Units sold | 35 | 41"]
    assert as_written("35.00", texts) == "$35 billion"
    assert as_written("$35", texts) == "$35 billion"
    assert as_written("4.5", texts) == "4.50%"
    # written bare first (a later "41%" is another thing), not a bare figure, or a year: kept
    assert as_written("41", [*texts, "Margins were 41% in 2019."]) == "41"
    assert as_written("35 units", texts) == "35 units"
    assert as_written("Ellen Park", texts) == "Ellen Park"
    assert as_written("2035", ["Costs were $2,035 million."]) == "2035"
    # the first text that writes the figure decides
    assert as_written("35", ["35% of the sites", sale]) == "35%"
    assert as_written("35", ["35 of the sites", sale]) == "35"
