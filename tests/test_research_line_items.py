"""Line-item searches: a query naming a financial metric also searches for its line items."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

from research_fixtures import (
    act,
    models,
    notes,
    plan,
    research_app,  # noqa: F401 - fixture
)

from core.research.line_items import line_item_query
from core.research.schemas import ResearchLimits
from core.service import Sourcebook
from models.scripted import ScriptedLLM


def test_a_metric_is_searched_by_its_line_items_with_the_query_subject() -> None:
    assert line_item_query("How did Norrland Foods' free cash flow change in FY2031?") == (
        "Norrland Foods FY2031 net cash provided by operating activities "
        "purchases of property and equipment net income"
    )
    # a plural, a statement's name, and two metrics at once (line items once each)
    assert line_item_query("Are Kestrel Tools' gross margins rising?") == (
        "Kestrel Tools gross profit cost of sales total revenue"
    )
    got = line_item_query("Orbis Rail's current ratio and working capital on its balance sheet")
    assert got == (
        "Orbis Rail total current assets total current liabilities consolidated balance sheets "
        "total assets total liabilities"
    )
    # an acronym only in capitals: "roe" is not return on equity
    assert line_item_query("What is Halden Paper's DSO for FY2029?").endswith(
        "accounts receivable net sales"
    )
    assert line_item_query("Where do salmon lay their roe?") == ""
    # words that open a sentence or an instruction are not its subject
    assert line_item_query("Compute EBITDA. Then use Vantor Media's FY2030 report.") == (
        "Vantor Media FY2030 operating income depreciation and amortization"
    )
    assert line_item_query("Round to two decimals. Orbis Rail's FY2028 EBITDA?") == (
        "Orbis Rail FY2028 operating income depreciation and amortization"
    )
    assert line_item_query("Halden Paper EBITDA in 2027, please.") == (
        "Halden Paper 2027 operating income depreciation and amortization"
    )
    # no metric, no extra search
    assert line_item_query("Who painted the harbour at Tarsk?") == ""


def test_worker_searches_the_line_items_of_the_metric_its_query_names(
    research_app: Sourcebook,
) -> None:
    query = "What was the Northport Harbor Authority's operating margin in 2019?"
    researcher = ScriptedLLM([act("finish"), notes(sufficient=False)])  # notes if it reads
    research_app.research(
        query,
        models=models(
            ScriptedLLM([plan(("a", query, []))]), researcher, ScriptedLLM(["Nothing found."])
        ),
        task="line-items",
        limits=ResearchLimits(max_workers=1, max_rounds=1, read_top=0, short_answer=False),
    )
    searches = [
        e.payload["args"]["query"]
        for e in research_app.task_log().events("line-items")
        if e.kind == "tool_call" and e.payload["tool"] == "discover_evidence"
    ]
    assert searches[-1] == (
        "Northport Harbor Authority 2019 operating income total revenue net sales"
    )
