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
from models.scripted import ScriptedLLM

QUESTION = "Which lighthouse stands in the province that the Marrow Canal runs through?"
CANAL = "ev1:" + "b" * 16
LIGHT = "ev1:" + "f" * 16
TARN = "ev1:" + "c" * 16
ACTOR = "ev1:" + "a" * 16
PASSAGES = {
    CANAL: evidence(
        CANAL, "The Marrow Canal is a canal in northern Ostmark.", title="Marrow Canal"
    ),
    LIGHT: evidence(
        LIGHT,
        "Kessel Tower stands on the shore between Westmarch and Ostmark.",
        title="Kessel Tower",
    ),
    TARN: evidence(TARN, "The Tarn Canal is in Eastholm.", title="Tarn Canal"),
    ACTOR: evidence(ACTOR, "Lorna Pike is an actor.", title="Lorna Pike"),
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
            "Where is the Marrow Canal located?",
            # an off-topic neighbour the worker also noted is not the step's finding
            ("The Tarn Canal is located in Eastholm.", [TARN]),
            # the passage about the lighthouse does not name the canal: it is not cited for it
            ("The Marrow Canal is located in Ostmark.", [LIGHT, CANAL]),
        ),
        _step(
            "q2",
            "What is the lighthouse in Ostmark?",
            ("Kessel Tower is the lighthouse in Ostmark,", [LIGHT]),  # the 1.5B's comma
        ),
    ]
    assert _lines(steps) == [
        f"The Marrow Canal is located in Ostmark. [{CANAL}]",
        f"Kessel Tower is the lighthouse in Ostmark. [{LIGHT}]",
    ]
    section = trail_section(_lines(steps))
    assert section.startswith(f"{TRAIL_HEADING}\n\n- The Marrow Canal") and section.endswith("]\n")
    assert trail_section([]) == ""


def test_trail_leaves_out_what_tells_nothing_or_is_not_borne_out() -> None:
    steps = [
        # restates its query: names nothing new
        _step(
            "q1", "Where is the Marrow Canal located?", ("The Marrow Canal is located.", [CANAL])
        ),
        # says what is missing
        _step(
            "q2",
            "Where is the Marrow Canal?",
            ("The Marrow Canal's mouth in Ostmark is not stated.", [CANAL]),
        ),
        # its passage lacks the name it asserts
        _step(
            "q3",
            "Where does the Marrow Canal flow?",
            ("The Marrow Canal flows into Westmarch.", [CANAL]),
        ),
        # no one passage holds all it names (the canal's lacks the tower, the tower's the canal)
        _step(
            "q5",
            "Where does the Marrow Canal end?",
            ("The Marrow Canal ends at Kessel Tower in Ostmark.", [CANAL, LIGHT]),
        ),
        # a failed worker's notes are not a finding
        _step(
            "q4",
            "Which province has the Marrow Canal?",
            ("The Marrow is in Ostmark.", [CANAL]),
            failed=True,
        ),
    ]
    assert _lines(steps) == []


def test_trail_leaves_out_where_to_look() -> None:
    tenk = "ev1:" + "d" * 16
    filing = evidence(
        tenk, "Free cash flow was $2.3 billion in fiscal 2022.", title="Corvane Form 10-K 2022"
    )
    query = "What was Corvane's free cash flow?"
    steps = [
        # names only the question and its passage's title
        _step("q1", query, ("Corvane's free cash flow is given in the Form 10-K.", [tenk])),
        _step("q2", query, ("In fiscal 2022, free cash flow was $2.3 billion.", [tenk])),
    ]
    got = trail_lines(
        "What was Corvane's free cash flow in fiscal 2022?",
        steps,
        {tenk: filing}.get,
        None,
        "Corvane files a Form 10-K each year.",
    )
    assert got == [f"In fiscal 2022, free cash flow was $2.3 billion. [{tenk}]"]


def test_trail_says_each_thing_once_and_only_about_the_question() -> None:
    canal = ("The Marrow Canal is located in Ostmark.", [CANAL])
    steps = [
        _step("q1", "Where is the Marrow Canal located?", canal),
        _step("g1", "Marrow Canal province", canal),  # a follow-up finding the same again
        # a worker asked only for "the author" found a name the question's chain never meets
        _step("q2", "What is the author's name?", ("The author is Lorna Pike.", [ACTOR])),
        # joined to the question through the line before it (Ostmark), not directly
        _step(
            "q3",
            "Which lighthouse is there?",
            ("Kessel Tower is the lighthouse in Ostmark.", [LIGHT]),
        ),
    ]
    assert _lines(steps) == [
        f"The Marrow Canal is located in Ostmark. [{CANAL}]",
        f"Kessel Tower is the lighthouse in Ostmark. [{LIGHT}]",
    ]
    # what the report already states from the same passage is not repeated
    report = f"The Marrow Canal is in Ostmark [{CANAL}]."
    assert _lines(steps, report, (CANAL,)) == [
        f"Kessel Tower is the lighthouse in Ostmark. [{LIGHT}]"
    ]
    # the same words from another passage still give the step its source
    assert len(_lines(steps, report, (LIGHT,))) == 2


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

    # two queries: the question is not run as a third (cover_question); the trail asked for
    limits = ResearchLimits(
        tool_loop=True,
        max_workers=1,
        max_rounds=1,
        read_top=0,
        short_answer=False,
        max_queries=2,
        trail=True,
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

    # not asked for (the default), there is none
    off = research_app.research(
        question,
        models=scripted(),
        task="trail-off",
        limits=limits.model_copy(update={"trail": ResearchLimits().trail}),
    )
    assert TRAIL_HEADING not in off.markdown
    assert [c.evidence_id for c in off.citations] == [rail]
