"""Statement rows shown to the model beside their periods (no model)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from research_fixtures import evidence

from core.research.tables import header, labelled_rows, row_figures, runs_on, states_row
from core.research.writer import with_tables

STATEMENT = """CONSOLIDATED STATEMENTS OF OPERATIONS
(in millions)
2020 | 2021 | 2022
Product sales | $ 1,200 | $ 1,450 | $ 1,610
Service sales | 300 | 410 | 525
Total net sales | 1,500 | 1,860 | 2,135
Operating expenses:
Cost of sales | 900 | (1,010) | —"""

MIDDLE = """Research | 60 | 75 | 90
General and administrative | 80 | 95 | 105"""

RUNS_ON = """Marketing | 120 | 150 | 170
Operating income | 480 | 700 | 965
See notes."""


def test_rows_are_written_beside_their_periods() -> None:
    out = labelled_rows(STATEMENT).splitlines()
    assert out[2] == "2020 | 2021 | 2022"  # the header stays
    assert out[3] == "Product sales (2020: $1,200; 2021: $1,450; 2022: $1,610)"
    assert out[5] == "Total net sales (2020: 1,500; 2021: 1,860; 2022: 2,135)"
    assert out[6] == "Operating expenses:"
    assert out[7] == "Cost of sales (2020: 900; 2021: (1,010); 2022: —)"
    # a row whose cells do not match the header's periods, or any text, is kept as written
    assert labelled_rows("2021 | 2022\nA | 1 | 2 | 3\nPlain text.") == (
        "2021 | 2022\nA | 1 | 2 | 3\nPlain text."
    )
    assert labelled_rows("A | 1 | 2") == "A | 1 | 2"  # no header: nothing to say


def test_headers_name_periods() -> None:
    assert header("2015 | 2016 | 2017") == ["2015", "2016", "2017"]
    assert header("(dollars in millions) | 2022 | 2021 | 2022-2021") == [
        "2022",
        "2021",
        "2022-2021",
    ]
    assert header("January 30, 2021 | February 1, 2020") == [
        "January 30, 2021",
        "February 1, 2020",
    ]
    assert header("FY2022 | Q2 2023 | 2019 (4)") == ["FY2022", "Q2 2023", "2019 (4)"]
    assert header("Net sales | 1,500 | 1,860") is None
    assert header("Title of each class | Trading Symbol(s) | Exchange") is None
    assert header("2022") is None


def test_a_table_split_between_passages_keeps_its_header() -> None:
    assert runs_on([STATEMENT], RUNS_ON) == ["2020", "2021", "2022"]
    assert labelled_rows(RUNS_ON, runs_on([STATEMENT], RUNS_ON)).splitlines()[1] == (
        "Operating income (2020: 480; 2021: 700; 2022: 965)"
    )
    # not when the passage before ends in prose, or this one starts with prose
    assert runs_on([STATEMENT + "\nSee notes."], RUNS_ON) is None
    assert runs_on([STATEMENT], "Prose first.\n" + RUNS_ON) is None
    assert runs_on([], RUNS_ON) is None


def test_a_table_split_over_three_passages_keeps_the_header_of_the_first() -> None:
    # the middle passage holds only rows: the header is the one before it
    assert runs_on([MIDDLE, STATEMENT], RUNS_ON) == ["2020", "2021", "2022"]
    # a middle passage with prose in it began no table from the header before it
    assert runs_on(["A note on segments.\n" + MIDDLE, STATEMENT], RUNS_ON) is None
    # nor is a header found when the passages run out first
    assert runs_on([MIDDLE], RUNS_ON) is None
    # a passage before that ends in prose stops the walk back
    assert runs_on([MIDDLE, STATEMENT + "\nSee notes."], RUNS_ON) is None


def test_a_statement_runs_on_past_the_captions_of_its_parts_and_a_page_break() -> None:
    flows = (
        "Statements of cash flows (in millions)\n2020 | 2021 | 2022\n"
        "Net income | 400 | 520 | 610\n"
        "Changes in operating assets and liabilities, net of the businesses acquired:"
    )
    middle = (
        "Receivables | (30) | (45) | 12\nInvesting activities\n"
        "Purchases of harbor cranes, net of $35, $46 and $32, respectively, of cranes taken in\n"
        "trade | (80) | (95) | (60)"  # a label run over two lines
    )
    total = "Total assets | $ 4,100 $ 4,460\n31\nTable of Contents"  # cells run together
    later = "Liabilities and equity:\nHarbor fees payable | 90 | 110 | 130"
    # the passage before ends in a caption opening rows; this one opens with one
    assert runs_on([flows], middle) == ["2020", "2021", "2022"]
    assert runs_on([middle, flows], later) == ["2020", "2021", "2022"]
    # a row whose cells ran together and a page's footer still end the table's passage
    assert runs_on([total, middle, flows], later) == ["2020", "2021", "2022"]
    # a sentence is no caption: the table began without a header
    assert runs_on(["Dravin River fees rose.\n" + middle, flows], later) is None
    assert runs_on([flows], "Harbor fees rose in 2022 as Northport grew.\n" + middle) is None


def test_the_writer_reads_evidence_with_its_tables_labelled() -> None:
    first, second = evidence("ev1:" + "a" * 16, STATEMENT), evidence("ev1:" + "b" * 16, RUNS_ON)
    second = second.model_copy(update={"passage_id": "p3"})
    texts = {"p1": STATEMENT, "p2": MIDDLE, "p3": RUNS_ON}
    previous = {"p3": "p2", "p2": "p1"}
    store: Any = SimpleNamespace(
        neighbours=lambda pid: {"previous": previous.get(pid)},
        get_passage=lambda pid: SimpleNamespace(text=texts[pid]),
    )
    ctx: Any = SimpleNamespace(library=SimpleNamespace(store=store))
    read = with_tables(ctx, [first, second])
    assert "Total net sales (2020: 1,500; 2021: 1,860; 2022: 2,135)" in read[0].text
    # the header two passages back, past one that holds only rows
    assert read[1].text.startswith("Marketing (2020: 120; 2021: 150; 2022: 170)")
    assert read[1].passage_text == RUNS_ON  # what a citation quotes is untouched
    prose = evidence("ev1:" + "c" * 16, "No table here.")
    assert with_tables(ctx, [prose])[0] is prose


SHOWN = labelled_rows(
    "(in millions) | 2016 | 2017\nTotal net sales | $ 45,310 | 52,870\n"
    "Operating income (loss) | (1,283) | 2,100\nHarrowgate stores opened in 2017."
)


def test_a_row_is_read_back_as_its_line_item_and_figures() -> None:
    assert row_figures("Total net sales (2016: $45,310; 2017: 52,870)") == (
        "total net sales",
        {"2016": "45310", "2017": "52870"},
    )
    assert row_figures("Operating income (loss) (2016: (1,283))") == (
        "operating income (loss)",
        {"2016": "(1283)"},
    )
    assert row_figures("Tarsk Mills (founded by Ellen Park)") is None  # no periods
    assert row_figures("Harrowgate stores opened in 2017.") is None


def test_a_claim_copying_a_row_is_stated_by_it_and_a_changed_figure_is_not() -> None:
    assert states_row("Total net sales (2017: $52,870).", SHOWN)  # one period, "$" added
    assert states_row("Operating income (loss) (2016: $(1,283); 2017: 2,100)", SHOWN)
    assert not states_row("Total net sales (2017: 45,310)", SHOWN)  # another year's figure
    assert not states_row("Net sales (2017: 52,870)", SHOWN)  # another line item
    assert not states_row("Total net sales were 52,870 in 2017.", SHOWN)  # not a row
