"""One line item for one year, read off its statement row by the program (stage
``row_lookup``): which questions it answers, which row, in which unit; and, on a real library
with scripted models, the answer line and chain it writes and what the checks make of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ask_fixtures import PassageLLM
from research_fixtures import models, pid_with, plan, worker_script
from test_research_answer import generations, short

from core.research.chain import CHAIN_HEAD
from core.research.lookup import (
    Read,
    asked_definition,
    asked_metric,
    asked_part,
    asked_trend,
    asked_years,
    changed,
    filing_asked,
    one_reading,
    readings,
    scale_of,
    stated,
    text_above,
    trend_answer,
    worked_definition,
    worked_metric,
)
from core.research.schemas import ResearchLimits
from core.research.tables import labelled_rows
from core.service import Sourcebook
from models.scripted import ScriptedLLM

ASKED = "What were Tarsk Mills' total harbor fees in FY2019 (in USD millions)?"
STATEMENT = labelled_rows(
    "TARSK MILLS\nCONSOLIDATED STATEMENTS OF OPERATIONS\n(in thousands, except per share data)\n"
    "2019 | 2018\n"
    "Other harbor fees | 84,100 | 80,900\n"
    "Total harbor fees | $ 1,250,400 | $ 1,100,200\n"
    "Total fees | 3,400,000 | 3,100,000\n"
    "Earnings per share | 2.15 | 1.90"
)


def test_a_question_asking_one_amount_for_one_year_is_looked_up() -> None:
    assert asked_years(ASKED) == ("2019",)
    assert asked_years("How much did Kelmor Corp pay in Harbor fees in fiscal 2021?") == ("2021",)
    # or its change between two years as a percentage, the earlier first
    change = "What is the change in Kelmor's Harbor fees from FY2019 to FY2018 in percent?"
    assert asked_years(change) == ("2018", "2019")
    for question in (
        "What were Tarsk Mills' total harbor fees (in USD millions)?",  # no year
        "What were Tarsk Mills' Harbor fees in 2018 and 2019 (in USD millions)?",  # two
        "What is the change in Tarsk Mills' Harbor fees in FY2019 (in USD millions)?",
        "What is the change in Kelmor's Harbor fees from 2018 to 2019 (in USD millions)?",
        "What is Tarsk Mills' FY2019 operating margin (in USD millions)?",
        "What is the Dravin River segment's FY2019 revenue (in USD millions)?",
        "Which of Tarsk Mills' liabilities was largest in FY2019 (in USD millions)?",
        "What drove Tarsk Mills' total harbor fees in FY2019?",  # no amount asked
        "What were Tarsk Mills' Q2 FY2019 Harbor fees (in USD millions)?",  # a quarter's
    ):
        assert asked_years(question) is None, question


def test_the_row_naming_the_line_item_most_fully_gives_the_figure_and_its_unit() -> None:
    reads = readings(ASKED, ("2019",), "ev1:a", STATEMENT)
    # "Other harbor fees" is not named (its "other"), "Total fees" not together
    assert [(n, r.figures, r.scale) for n, r in reads] == [((3, 3), ("1250400",), "thousand")]
    assert reads[0][1].row == "Total harbor fees (2019: $1,250,400; 2018: $1,100,200)"
    rows = labelled_rows(
        "Consolidated statements of income\n2019 | 2018\nNet income | 410 | 380\nIncome | 900 | 850"
    )
    asked = "What is Kelmor Corp's FY2019 net income (in millions)?"
    best = one_reading(readings(asked, ("2019",), "ev1:b", rows))  # "income" is not named alone
    assert best is not None and best.figures == ("410",) and best.scale is None
    # a longer line item is asked for than any row names: the model answers
    longer = "What is Kelmor Corp's FY2019 net income tax credit (in millions)?"
    assert readings(longer, ("2019",), "ev1:b", rows) == []
    # a cell holding no amount ("—", a percentage) is no answer
    dashes = labelled_rows(
        "Income statements\n2019 | 2018\nNet income | — | 380\nNet sales | 5% | 4%"
    )
    for item in ("net income", "net sales"):
        assert readings(f"What is Kelmor's 2019 {item} amount?", ("2019",), "ev1:b", dashes) == []
    # a row named only by the statement the question points to is not the line item
    sheet = labelled_rows("Consolidated balance sheets\n2019 | 2018\nBalance | 900 | 850")
    pointed = "How much were Kelmor's 2019 fees? Use the balance sheet."
    assert readings(pointed, ("2019",), "ev1:c", sheet) == []


def test_a_line_item_asked_by_another_of_its_names_is_read_off_its_row() -> None:
    rows = labelled_rows(
        "Statements of operations (in millions)\n2019 | 2018\nNet sales | 30,000 | 28,000\n"
        "Total net sales | 52,870 | "
        "45,310\nPurchases of property, plant and equipment | (1,200) | (1,100)"
    )
    revenue = "What is Tarsk Mills' FY2019 total revenue (in USD millions)?"
    best = one_reading(readings(revenue, ("2019",), "ev1:a", rows))
    assert best is not None and best.figures == ("52870",)  # the fullest of its names
    capex = "What is the FY2019 capital expenditure amount (in USD millions) for Tarsk Mills?"
    best = one_reading(readings(capex, ("2019",), "ev1:a", rows))
    assert best is not None and best.figures == ("(1200)",)
    # another line item whose name holds one of these words is not one of them
    deferred = "What is Tarsk Mills' FY2019 deferred revenue (in USD millions)?"
    assert readings(deferred, ("2019",), "ev1:a", rows) == []


def test_a_note_table_and_a_years_changes_are_not_the_line_item() -> None:
    asked = "What is Tarsk Mills' FY2019 accounts payable (in USD millions)?"
    note = labelled_rows("Note 7 - Income taxes\n2019 | 2018\nAccounts payable | 12 | 10")
    assert readings(asked, ("2019",), "ev1:a", note) == []
    # ... unless its heading names a statement
    assert readings(asked, ("2019",), "ev1:a", note, heading="Consolidated Balance Sheets")
    flows = labelled_rows(
        "Consolidated statements of cash flows (in millions)\n2019 | 2018\n"
        "Changes in operating assets and liabilities:\nAccounts payable | 310 | 150\n"
        "Net cash provided by operating activities | 2,400 | 2,100\n"
        "Investing activities:\nPurchases of property and equipment | (900) | (800)"
    )
    assert readings(asked, ("2019",), "ev1:a", flows) == []  # the year's change, not the balance
    cash = "What is Tarsk Mills' FY2019 operating cash flow (in USD millions)?"
    assert [r.figures for _, r in readings(cash, ("2019",), "ev1:a", flows)] == [("2400",)]
    capex = "How much was Tarsk Mills' capital expenditure in FY2019 (in USD millions)?"
    assert [r.figures for _, r in readings(capex, ("2019",), "ev1:a", flows)] == [("(900)",)]


def test_a_label_qualifying_a_line_items_name_names_it_below_a_row_of_that_name() -> None:
    flows = labelled_rows(
        "Statements of cash flows (in millions)\n2019 | 2018\n"
        "Depreciation and amortization of harbor cranes and equipment | 310 | 290\n"
        "Total cash provided by operating activities | 2,400 | 2,100\n"
        "Purchases of property and equipment, including dredging | (900) | (800)\n"
        "Sales of harbor land | 50 | 40"
    )

    def figure(question: str, rows: str = flows) -> tuple[str, ...] | None:
        best = one_reading(readings(question, ("2019",), "ev1:a", rows))
        return best and best.figures

    assert figure("What was Kelmor's FY2019 depreciation and amortization in millions?") == ("310",)
    assert figure("What was Kelmor's FY2019 operating cash flow in millions?") == ("2400",)
    assert figure("What was Kelmor's FY2019 capital expenditure in millions?") == ("(900)",)
    # a qualifier opening with one word names nothing: "Sales of harbor land" is no revenue
    assert figure("What were Kelmor's FY2019 sales in millions?") is None
    sheet = (
        "Balance sheets (in millions)\n2019 | 2018\n"
        "Accounts receivable, net of allowances of $12 and $10 | 640 | 600"
    )
    asked = "What were Kelmor's FY2019 accounts receivable in millions?"
    assert figure(asked, labelled_rows(sheet)) == ("640",)
    # a row labelled with the name itself comes first
    both = labelled_rows(sheet + "\nAccounts receivable | 655 | 610")
    assert figure(asked, both) == ("655",)


def test_a_statements_selected_data_for_a_segment_is_not_the_companys() -> None:
    segment = labelled_rows(
        "Selected financial data for the Northport segment ($ in millions):\n"
        "Northport Summary | 2019 | 2018\nRevenue | $ 4,000 | $ 3,800"
    )
    asked = "What was Kelmor's FY2019 revenue in USD millions?"
    assert readings(asked, ("2019",), "ev1:a", segment) == []
    company = segment.replace("for the Northport segment ", "")
    assert [r.figures for _, r in readings(asked, ("2019",), "ev1:a", company)] == [("4000",)]


def test_money_spent_shown_in_parentheses_is_an_amount_spent() -> None:
    rows = labelled_rows(
        "Statements of operations (in millions)\n2019 | 2018\nOperating income | 1,800 | 3,000\n"
        "Interest expense | (36) | (25)\nNet income | (120) | 400\n"
        "Purchases of property and equipment | (930) | (740)"
    )

    def read(question: str) -> Read:
        best = one_reading(readings(question, ("2019",), "ev1:a", rows))
        assert best is not None
        return best

    capex = "What was Kelmor's FY2019 capital expenditure in USD millions?"
    assert stated(read(capex), capex) == ("$930 million", "")
    loss = "What was Kelmor's FY2019 net income in USD millions?"
    assert stated(read(loss), loss) == ("-$120 million", "")  # a loss stays a loss
    found = asked_metric("What was Kelmor's FY2019 interest coverage ratio?")
    assert found is not None
    reads = [read(f"What was Kelmor's FY2019 {item} in millions?") for item in found[0].of]
    assert worked_metric(found[0], reads, "") == ("50.00", "1,800 / 36 = 50.00")


def test_rows_that_differ_on_the_figure_give_no_answer() -> None:
    a = Read("Total harbor fees (2019: 1,250,400)", "ev1:a", ("1250400",), "thousand")
    b = Read("Total harbor fees (2019: 990,000)", "ev1:b", ("990000",), "thousand")
    same = Read("Total harbor fees (2019: 1,250,400)", "ev1:c", ("1250400",), "thousand")
    assert one_reading([((3, 3), a), ((3, 3), same)]) == a
    assert one_reading([((3, 3), a), ((3, 3), b)]) is None
    assert one_reading([((3, 3), a), ((2, 3), b)]) == a  # the fuller name wins
    assert one_reading([]) is None


def test_the_unit_comes_from_above_the_table_as_far_as_its_header() -> None:
    def unit(before_row: str, passages_before: tuple[str, ...] = ()) -> str | None:
        return scale_of(text_above(before_row, passages_before))

    assert unit("(In millions)\n2019 | 2018\n") == "million"
    # the table runs on: its unit is in the passage holding its header
    before = ("Rents | 5 | 4", "($ in billions)\n2019 | 2018")
    assert unit("Harbor fees (2019: 1,250)\n", before) == "billion"
    assert unit("", ("2019 | 2018\nRents | 5 | 4", "(in thousands)")) is None  # past it
    assert unit("No unit here.") is None


def test_the_answer_is_stated_in_the_unit_asked_with_its_conversion_shown() -> None:
    row = "Total harbor fees (2019: $1,250,400)"
    read = Read(row, "ev1:a", ("1250400",), "thousand")
    assert stated(read, ASKED) == ("$1,250.4 million", "1,250,400 / 1,000 = 1,250.4")
    billions = "What were Tarsk Mills' total harbor fees in FY2019, in USD billions?"
    assert stated(read, billions) == ("$1.2504 billion", "1,250,400 / 1,000 / 1,000 = 1.2504")
    asked_thousands = ASKED.replace("millions", "thousands")
    in_millions = Read(row, "ev1:a", ("1250.4",), "million")
    assert stated(in_millions, asked_thousands) == (
        "$1,250,400 thousand",
        "1,250.4 * 1,000 = 1,250,400",
    )
    # no unit asked: as the table gives it; a unit unknown: the figure alone, not converted
    assert stated(read, "How much were Tarsk Mills' 2019 harbor fees?") == (
        "$1,250,400 thousand",
        "",
    )
    loss = Read("Net loss (2019: (1,283))", "ev1:a", ("(1283)",), None)
    assert stated(loss, "What is Kelmor's FY2019 net loss (in millions)?") == ("-1,283", "")


def test_an_amount_per_share_is_not_scaled() -> None:
    asked = "What is Tarsk Mills' FY2019 earnings per share amount (in USD millions)?"
    [(_, read)] = readings(asked, ("2019",), "ev1:a", STATEMENT)
    assert (read.figures, read.scale) == (("2.15",), None)
    assert stated(read, asked) == ("$2.15", "")


def test_a_change_between_two_years_is_worked_out_off_one_row() -> None:
    rows = labelled_rows(
        "Income statements\n2017 | 2018 | 2019\nTotal net sales | 41,200 | 45,310 | 52,870"
    )
    asked = "By how much did Tarsk Mills' total revenue change from 2018 to 2019 (%)?"
    [(_, read)] = readings(asked, ("2018", "2019"), "ev1:a", rows)
    assert read.figures == ("45310", "52870")
    assert changed(read, asked) == ("16.7%", "(52,870 - 45,310) / 45,310 * 100 = 16.7%")
    two = asked.replace("(%)", "in percent, rounded to two decimal places")
    assert changed(read, two) == ("16.69%", "(52,870 - 45,310) / 45,310 * 100 = 16.69%")
    loss = Read("Net income (2018: (1,283); 2019: 2,100)", "ev1:a", ("(1283)", "2100"), None)
    assert changed(loss, asked) is None  # a change from a loss is no percentage


def test_a_ratio_asked_for_one_year_is_worked_out_from_its_rows() -> None:
    found = asked_metric("What is Tarsk Mills' FY2019 operating margin? Round to two decimals.")
    assert found is not None and found[0].of == ("operating income", "revenue")
    assert found[1] == "2019"
    margin = found[0]
    income = Read("Operating income (2019: 450)", "ev1:a", ("450",), "million")
    sales = Read("Total net sales (2019: 5,000)", "ev1:b", ("5000",), "million")
    assert worked_metric(margin, [income, sales], "two decimal places") == (
        "9.00%",
        "450 / 5,000 * 100 = 9.00%",
    )
    # rows of tables in different units, or a loss: left to the model
    thousands = Read("Total net sales (2019: 5,000)", "ev1:b", ("5000",), "thousand")
    assert worked_metric(margin, [income, thousands], "") is None
    loss = Read("Operating income (2019: (450))", "ev1:a", ("(450)",), "million")
    assert worked_metric(margin, [loss, sales], "") is None
    cogs = asked_metric("What is the FY2019 COGS % margin for Tarsk Mills?")
    assert cogs is not None and cogs[0].of == ("cost of revenue", "revenue")
    # the statement's own figure, "unadjusted", is the row's
    rows = labelled_rows("Statements of operations\n2019 | 2018\nOperating income | 450 | 480")
    unadjusted = "What is Tarsk Mills' FY2019 unadjusted operating income amount?"
    assert [r.figures for _, r in readings(unadjusted, ("2019",), "ev1:a", rows)] == [("450",)]
    for question in (
        "Did Tarsk Mills' operating margin improve in FY2019?",  # yes or no
        "Is Tarsk Mills' FY2019 operating margin above its peers'?",
        "What is Tarsk Mills' average operating margin in FY2019?",
        "What is Tarsk Mills' operating margin in FY2018 and FY2019?",
        "What was Tarsk Mills' FY2019 Harbor fees ratio?",  # no ratio the data knows
    ):
        assert asked_metric(question) is None, question


def test_a_row_is_read_only_from_a_yearly_filing_of_the_company_asked_about() -> None:
    asked = "What is Tarsk Mills' FY2019 current ratio? Round to two decimal places."
    assert filing_asked(asked, "TARSK MILLS INC. — Form 10-K, fiscal year ended 2019")
    assert not filing_asked(asked, "Kelmor Corp — Form 10-K, fiscal year ended 2019")
    part = "What is Tarsk Mills' Northport FY2019 net sales (in USD millions)?"
    assert not filing_asked(part, "TARSK MILLS INC. — Form 10-K")  # a part of the company
    # a question naming no company (its capitalised words open sentences, or are periods,
    # currencies or single letters) holds no row back
    assert filing_asked("What is the FY2019 P&L total (in USD millions)?", "Kelmor Corp 10-K")
    assert filing_asked("What is Kelmor's FY2019 EBITDA Margin?", "Kelmor Corp 10-K")
    # a quarterly report's columns are no fiscal year's
    assert not filing_asked(asked, "TARSK MILLS INC. — Form 10-Q, quarterly period ended June 30")


def test_whether_a_ratio_or_a_line_item_rose_is_answered_off_both_years_rows() -> None:
    trend = asked_trend("Did Tarsk Mills' gross margin improve in FY2019?")
    assert trend is not None and trend.up and trend.years == ("2018", "2019")
    assert trend.metric is not None and trend.metric.name == "gross margin"
    income = Read("Gross profit (2019: 450; 2018: 480)", "ev1:a", ("480", "450"), None)
    sales = Read("Total net sales (2019: 5,000; 2018: 4,800)", "ev1:a", ("4800", "5000"), None)
    assert trend_answer(trend, [income, sales], "") == (
        "No",
        "450 / 5,000 * 100 = 9.0% in 2019 against 480 / 4,800 * 100 = 10.0% in 2018",
    )
    fell = asked_trend("Has Tarsk Mills' net income declined between 2017 and 2019, compared?")
    assert fell is not None and not fell.up and fell.metric is None
    assert fell.years == ("2017", "2019")
    net = Read("Net income (2019: 410; 2017: 380)", "ev1:a", ("380", "410"), None)
    assert trend_answer(fell, [net], "") == ("No", "410 in 2019 against 380 in 2017")
    for question in (
        "What was Tarsk Mills' operating margin in FY2019?",  # not yes or no
        "Did Tarsk Mills' operating margin rise or fall in FY2019?",  # both ways
        "Did Tarsk Mills' effective tax rate improve in FY2019?",  # lower is not plainly better
        "Did Tarsk Mills' segment margin improve in FY2019?",
        "Did Tarsk Mills' operating margin improve in FY2019, and why?",
    ):
        assert asked_trend(question) is None, question
    # what the question asks on a condition is not what it asks
    conditional = (
        "Did Tarsk Mills' operating margin improve in FY2019? If operating margin means little"
        " for a harbor operator, say so and explain why."
    )
    assert asked_trend(conditional) is None
    assert asked_part(conditional) == "Did Tarsk Mills' operating margin improve in FY2019?"
    assert asked_trend(asked_part(conditional)) is not None
    unconditional = "Did Kelmor's gross margin improve in FY2019? Explain if it did."
    assert asked_part(unconditional) == unconditional


def test_a_measure_the_question_defines_is_worked_out_from_the_rows_it_names() -> None:
    asked = (
        "What is Kelmor's FY2019 days harbor fees outstanding (DHO)? DHO is defined as: 365 *"
        " (average harbor fees payable between FY2018 and FY2019) / (FY2019 cost of sales +"
        " change in inventory between FY2018 and FY2019). Round your answer to two decimals."
    )
    found = asked_definition(asked)
    assert found is not None and not found.percent
    assert [(t.item, t.years, t.kind) for t in found.terms] == [
        ("harbor fees payable", ("2018", "2019"), "average"),
        ("cost of sales", ("2019",), "figure"),
        ("inventory", ("2018", "2019"), "change"),
    ]
    payable = Read("Harbor fees payable (2019: 340; 2018: 260)", "ev1:a", ("260", "340"), "million")
    costs = Read("Cost of sales (2019: 1,100)", "ev1:b", ("(1100)",), "million", spent=True)
    stock = Read("Inventories (2019: 150; 2018: 100)", "ev1:a", ("100", "150"), "million")
    assert worked_definition(found, [payable, costs, stock], asked) == (
        "95.22",
        "365 * ((260 + 340) / 2) / (1,100 + (150 - 100)) = 95.22",
    )
    # asked as a percentage of a fraction: times 100; a term without a year is of the year asked
    share = asked_definition(
        "What is Kelmor's FY2019 return on assets in %? It is calculated as net income /"
        " average total assets between FY2018 and FY2019."
    )
    assert share is not None and share.percent
    assert [t.years for t in share.terms] == [("2019",), ("2018", "2019")]
    income = Read("Net income (2019: 90)", "ev1:a", ("90",), "million")
    assets = Read("Total assets (2019: 1,000; 2018: 800)", "ev1:a", ("800", "1000"), "million")
    assert worked_definition(share, [income, assets], "") == (
        "10.00%",
        "(90 / ((800 + 1,000) / 2)) * 100 = 10.00%",
    )
    other_unit = Read("Total assets (2019: 1,000; 2018: 800)", "ev1:a", ("800", "1000"), None)
    assert worked_definition(share, [income, other_unit], "") is None
    for question in (
        "What is Kelmor's FY2019 fee burden?",  # no definition
        "What is Kelmor's Northport segment fee burden? It is defined as: fees / net income.",
        "What is Kelmor's fee burden? It is defined as: FY2019 fees / net income.",  # which year?
        "What is Kelmor's FY2019 fee burden? It is defined as: fees / net income in 2018 and 2019.",
        "What is Kelmor's FY2019 burden? It is defined as: fees between FY2018 and FY2019 / 2.",
    ):
        assert asked_definition(question) is None, question


LIM = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, read_top=0)


def _statement(tmp_path: Path, embedder: Any) -> Sourcebook:
    """A library holding one statement of operations in thousands, long enough that its last
    rows sit in a passage after the one holding its header and unit."""
    rows = "\n".join(f"| Accrued item {i} | {100 + i:,} | {90 + i:,} |" for i in range(1, 31))
    (tmp_path / "tarsk.md").write_text(
        "# Tarsk Mills Annual Report\n\nConsolidated statements of operations (in thousands).\n\n"
        f"| Item | 2019 | 2018 |\n|---|---|---|\n{rows}\n"
        "| Total harbor fees | 1,250,400 | 1,100,200 |\n"
        "| Operating income | 2,500,800 | 2,420,400 |\n"
        "| Interest expense | 1,250,400 | 1,210,200 |\n",
        encoding="utf-8",
    )
    app = Sourcebook(tmp_path / "home", embedder=embedder)
    assert not app.add([tmp_path / "tarsk.md"]).failed
    return app


def test_a_run_answers_a_line_item_off_its_row_without_the_model(
    tmp_path: Path, embedder: Any
) -> None:
    app = _statement(tmp_path, embedder)
    try:
        row = pid_with(app, "Total harbor fees |")
        assert "2019" not in app.library.evidence(row).text  # the header is a passage back

        def run(
            task: str, writer: ScriptedLLM, limits: ResearchLimits = LIM, question: str = ASKED
        ) -> Any:
            planner = ScriptedLLM([plan(("q1", question, []))])
            researcher = ScriptedLLM(worker_script(question, row, "Harbor fees of 1,250,400."))
            report = app.research(
                question, models=models(planner, researcher, writer), task=task, limits=limits
            )
            assert writer.pending == 0
            return report

        writer = ScriptedLLM(["Tarsk Mills reported harbor fees of $1,250,400 [E1]."])
        report = run("looked-up", writer)
        lines = report.markdown.splitlines()
        assert lines[0] == (
            "**Answer:** $1,250.4 million, worked out as 1,250,400 / 1,000 = 1,250.4 [1]."
        )
        assert lines[2:4] == [
            CHAIN_HEAD,
            "- Total harbor fees (2019: 1,250,400; 2018: 1,100,200) [1].",
        ]
        assert len(generations(writer)) == 1  # the body only: no answer call
        assert [c.evidence_id for c in report.citations] == [row]
        assert report.status == "answered", (report.status_reasons, report.flagged_claims)

        # its change between the two years, a ratio of two rows, whether it rose: worked out
        for task, question, answer in (
            (
                "looked-up-change",
                "What is the change in Tarsk Mills' total harbor fees from 2018 to 2019 in %?",
                "13.7%, worked out as (1,250,400 - 1,100,200) / 1,100,200 * 100 = 13.7% [1].",
            ),
            (
                "looked-up-ratio",
                "What was Tarsk Mills' interest coverage ratio in FY2019?",
                "2.00, worked out as 2,500,800 / 1,250,400 = 2.00 [1].",
            ),
            (
                "looked-up-defined",
                "What is Tarsk Mills' FY2019 fee burden? It is defined as: 100 * (average total"
                " harbor fees between FY2018 and FY2019) / (FY2019 operating income). Round to"
                " one decimal place.",
                "47.0, worked out as 100 * ((1,100,200 + 1,250,400) / 2) / (2,500,800) = 47.0 [1].",
            ),
            (
                "looked-up-trend",
                "Did Tarsk Mills' total harbor fees increase in FY2019?",
                "Yes: 1,250,400 in 2019 against 1,100,200 in 2018 [1].",
            ),
        ):
            writer = ScriptedLLM(["Tarsk Mills reported harbor fees of $1,250,400 [E1]."])
            report = run(task, writer, question=question)
            assert report.markdown.startswith(f"**Answer:** {answer}\n"), task
            assert report.status == "answered", (task, report.status_reasons)

        # switched off, the model answers as before
        writer = ScriptedLLM([short("1,250,400", ["E1"]), "Tarsk Mills reported $1,250,400 [E1]."])
        off = LIM.model_copy(update={"stages_off": ["row_lookup"]})
        report = run("model-answers", writer, off)
        assert report.markdown.startswith("**Answer:** 1,250,400 [1].")
    finally:
        app.close()


def test_a_row_outside_what_the_run_read_is_read_in_its_filing_and_cited(
    tmp_path: Path, embedder: Any
) -> None:
    app = _statement(tmp_path, embedder)
    try:
        first = pid_with(app, "Accrued item 1 |")  # the header's passage, not the row's
        row = pid_with(app, "Interest expense |")
        assert first != row
        question = "What was Tarsk Mills' FY2019 interest expense in USD thousands?"
        planner = ScriptedLLM([plan(("q1", question, []))])
        researcher = ScriptedLLM(worker_script(question, first, "Accrued item 1 was 101."))
        writer = ScriptedLLM(["Tarsk Mills' accrued item 1 was $101 thousand [E1]."])
        report = app.research(
            question, models=models(planner, researcher, writer), task="filing", limits=LIM
        )
        log = app.task_log()
        try:
            fetches = [
                e.payload["ids"]
                for e in log.events("filing")
                if e.kind == "tool_result" and e.payload.get("tool") == "fetch_evidence"
            ]
        finally:
            log.close()
    finally:
        app.close()
    assert [row] in fetches  # fetched as the workers fetch: logged, so the eval counts it
    answer = report.markdown.splitlines()[0]
    assert answer == "**Answer:** $1,250,400 thousand [1].", report.markdown
    assert row in {c.evidence_id for c in report.citations}
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)


def test_ask_reads_a_line_item_off_its_row_without_the_model(tmp_path: Path, embedder: Any) -> None:
    app = _statement(tmp_path, embedder)
    try:
        llm = PassageLLM([])  # no answer scripted: a model call would fail the test
        report = app.ask(
            ASKED,
            conversation="looked-up",
            models={"default": llm},
            limits=ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1),
        )
    finally:
        app.close()
    assert report.markdown.startswith(
        "**Answer:** $1,250.4 million, worked out as 1,250,400 / 1,000 = 1,250.4 [1].\n\n"
        f"{CHAIN_HEAD}\n- Total harbor fees (2019: 1,250,400; 2018: 1,100,200) [1]."
    )
    assert not [c for c in llm.history if c.kind == "stream"]
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)
