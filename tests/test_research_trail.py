"""The research trail: each step's finding, cited, built from the notes without a model call
(units on made-up passages; one run on the real library with scripted models)."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

from research_fixtures import (
    evidence,
    models,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    worker_script,
)

from core.research.schemas import Finding, ResearchLimits, ResearchNotes
from core.research.trail import TRAIL_HEADING, trail_lines, trail_section
from core.service import Sourcebook
from models.llm import ScriptedLLM

QUESTION = "What is the name of the waterfall in the country where the Bubye River is found?"
BUBYE = "ev1:" + "b" * 16
FALLS = "ev1:" + "f" * 16
FOWLER = "ev1:" + "c" * 16
ARNOLD = "ev1:" + "a" * 16
PASSAGES = {
    BUBYE: evidence(BUBYE, "The Bubye River is a river in southern Zimbabwe.", title="Bubye River"),
    FALLS: evidence(
        FALLS, "Victoria Falls lies on the border of Zambia and Zimbabwe.", title="Victoria Falls"
    ),
    FOWLER: evidence(FOWLER, "The Fowler River is in New Hampshire.", title="Fowler River"),
    ARNOLD: evidence(ARNOLD, "Arnold Schwarzenegger is an actor.", title="Arnold Schwarzenegger"),
}


def _step(
    qid: str, query: str, *findings: tuple[str, list[str]], failed: bool = False
) -> ResearchNotes:
    return ResearchNotes(
        query_id=qid,
        query=query,
        findings=[Finding(claim=c, evidence_ids=ids) for c, ids in findings],
        failed=failed,
    )


def _lines(
    steps: list[ResearchNotes], report: str = "", report_ids: tuple[str, ...] = ()
) -> list[str]:
    return trail_lines(QUESTION, steps, PASSAGES.get, None, report, report_ids)


def test_trail_gives_each_step_its_finding_cited_by_the_passages_holding_it() -> None:
    steps = [
        _step(
            "q1",
            "Where is the Bubye River located?",
            # an off-topic neighbour the worker also noted is not the step's finding
            ("The Fowler River is located in New Hampshire.", [FOWLER]),
            # the passage about the falls does not name the Bubye: it is not cited for it
            ("The Bubye River is located in Zimbabwe.", [FALLS, BUBYE]),
        ),
        _step(
            "q2",
            "What is the waterfall in Zimbabwe?",
            ("Victoria Falls is the waterfall in Zimbabwe,", [FALLS]),  # the 1.5B's comma
        ),
    ]
    assert _lines(steps) == [
        f"The Bubye River is located in Zimbabwe. [{BUBYE}]",
        f"Victoria Falls is the waterfall in Zimbabwe. [{FALLS}]",
    ]
    section = trail_section(_lines(steps))
    assert section.startswith(f"{TRAIL_HEADING}\n\n- The Bubye River") and section.endswith("]\n")
    assert trail_section([]) == ""


def test_trail_leaves_out_what_tells_nothing_or_is_not_borne_out() -> None:
    steps = [
        # restates its query: names nothing new
        _step("q1", "Where is the Bubye River located?", ("The Bubye River is located.", [BUBYE])),
        # says what is missing
        _step(
            "q2",
            "Where is the Bubye River?",
            ("The Bubye River's mouth in Zimbabwe is not stated.", [BUBYE]),
        ),
        # its passage lacks the name it asserts
        _step(
            "q3",
            "Where does the Bubye River flow?",
            ("The Bubye River flows into Mozambique.", [BUBYE]),
        ),
        # no one passage holds all it names (the Bubye's lacks the falls, the falls' the Bubye)
        _step(
            "q5",
            "Where does the Bubye River end?",
            ("The Bubye River ends at Victoria Falls in Zimbabwe.", [BUBYE, FALLS]),
        ),
        # a failed worker's notes are not a finding
        _step(
            "q4",
            "Which country has the Bubye River?",
            ("The Bubye is in Zimbabwe.", [BUBYE]),
            failed=True,
        ),
    ]
    assert _lines(steps) == []


def test_trail_leaves_out_where_to_look() -> None:
    tenk = "ev1:" + "d" * 16
    filing = evidence(
        tenk, "Free cash flow was $5.9 billion in fiscal 2022.", title="Adobe Form 10-K 2022"
    )
    query = "What was Adobe's free cash flow?"
    steps = [
        # names only the question and its passage's title
        _step("q1", query, ("Adobe's free cash flow is given in the Form 10-K.", [tenk])),
        _step("q2", query, ("In fiscal 2022, free cash flow was $5.9 billion.", [tenk])),
    ]
    got = trail_lines(
        "What was Adobe's free cash flow in fiscal 2022?",
        steps,
        {tenk: filing}.get,
        None,
        "Adobe files a Form 10-K each year.",
    )
    assert got == [f"In fiscal 2022, free cash flow was $5.9 billion. [{tenk}]"]


def test_trail_says_each_thing_once_and_only_about_the_question() -> None:
    bubye = ("The Bubye River is located in Zimbabwe.", [BUBYE])
    steps = [
        _step("q1", "Where is the Bubye River located?", bubye),
        _step("g1", "Bubye River country", bubye),  # a follow-up finding the same again
        # a worker asked only for "the author" found a name the question's chain never meets
        _step(
            "q2", "What is the author's name?", ("The author is Arnold Schwarzenegger.", [ARNOLD])
        ),
        # joined to the question through the line before it (Zimbabwe), not directly
        _step(
            "q3",
            "Which waterfall is there?",
            ("Victoria Falls is the waterfall in Zimbabwe.", [FALLS]),
        ),
    ]
    assert _lines(steps) == [
        f"The Bubye River is located in Zimbabwe. [{BUBYE}]",
        f"Victoria Falls is the waterfall in Zimbabwe. [{FALLS}]",
    ]
    # what the report already states from the same passage is not repeated
    report = f"The Bubye River is in Zimbabwe [{BUBYE}]."
    assert _lines(steps, report, (BUBYE,)) == [
        f"Victoria Falls is the waterfall in Zimbabwe. [{FALLS}]"
    ]
    # the same words from another passage still give the step its source
    assert len(_lines(steps, report, (FALLS,))) == 2


def test_report_ends_with_the_trail_the_writer_left_out(research_app: Sourcebook) -> None:
    founded = pid_with(research_app, "founded in 1921")
    rail = pid_with(research_app, "30,000 passengers")
    question = (
        "How many passengers a day ride the railway of the city whose harbor authority "
        "Ellen Park founded?"
    )

    def scripted() -> dict[str, ScriptedLLM]:
        planner = ScriptedLLM(
            [
                plan(
                    ("a", "Which harbor authority did Ellen Park found?", []),
                    ("b", "How many passengers ride the Eastline railway?", ["a"]),
                )
            ]
        )
        researcher = ScriptedLLM(
            [
                *worker_script(
                    "a", founded, "Ellen Park founded the Northport Harbor Authority in 1921."
                ),
                *worker_script("b", rail, "Eastline trains carry about 30,000 passengers a day."),
            ]
        )
        # the writer states the last hop only (E2: the passages are labelled in step order)
        # and cites a passage that does not say it too
        writer = ScriptedLLM(["Eastline trains carry about 30,000 passengers a day [E2][E1]."])
        return models(planner, researcher, writer)

    # two queries: the question is not run as a third (cover_question)
    limits = ResearchLimits(
        max_workers=1, max_rounds=1, read_top=0, short_answer=False, max_queries=2
    )
    report = research_app.research(question, models=scripted(), task="trail-run", limits=limits)
    body, rest = report.markdown.split(f"{TRAIL_HEADING}\n\n")
    trail = rest.split("\n## ")[0]
    n = next(c.number for c in report.citations if c.evidence_id == founded)
    r = next(c.number for c in report.citations if c.evidence_id == rail)
    assert body.strip() == f"Eastline trains carry about 30,000 passengers a day [{r}]."
    assert trail.startswith(f"- Ellen Park founded the Northport Harbor Authority in 1921. [{n}]\n")
    assert "30,000" not in trail  # the report already says it, from the same passage
    assert report.flagged_claims == [] and report.removed_citations == []
    logged = [e.payload for e in research_app.task_log().events("trail-run") if e.kind == "trail"]
    assert logged == [[f"Ellen Park founded the Northport Harbor Authority in 1921. [{founded}]"]]

    off = research_app.research(
        question,
        models=scripted(),
        task="trail-off",
        limits=limits.model_copy(update={"trail": False}),
    )
    assert TRAIL_HEADING not in off.markdown
    assert [c.evidence_id for c in off.citations] == [rail]
