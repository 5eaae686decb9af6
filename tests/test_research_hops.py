"""Multi-hop research: what a dependent query builds on, which hits a worker reads first, which
gaps are followed up, and which passages the writer sees first (scripted models, real library)."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

from typing import Any

from research_fixtures import (
    act,
    models,
    notes,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
)

from core.research.schemas import Boundary, Finding, ResearchLimits, ResearchNotes
from core.research.tools import Fetched, Scope, Tools
from core.research.words import focus_terms, gap_query, names
from core.service import Sourcebook
from models.scripted import ScriptedLLM

LIM = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, short_answer=False, read_top=0)


def _calls(app: Sourcebook, task: str, tool: str) -> list[dict[str, Any]]:
    return [
        {"key": e.key, **e.payload["args"]}
        for e in app.task_log().events(task)
        if e.kind == "tool_call" and e.payload["tool"] == tool
    ]


def _results(app: Sourcebook, task: str, prefix: str) -> list[list[str]]:
    """The hit lists of the discover_evidence calls whose key starts with ``prefix``."""
    return [
        e.payload["ids"]
        for e in app.task_log().events(task)
        if e.kind == "result"
        and e.key.startswith(prefix)
        and e.payload.get("tool") == "discover_evidence"
    ]


def test_focus_terms_keep_what_is_new() -> None:
    got = focus_terms(
        "Which bridge spans the river of the province that the Marrow Canal crosses?",
        "Where is the Marrow Canal located?",
        "The Marrow Canal is located in Ostmark.",
    )
    assert got == "bridge spans river province crosses Ostmark"
    assert focus_terms("Where is the Marrow Canal?", "Where is the Marrow Canal?", "") == ""


def test_on_topic_findings_are_about_the_query() -> None:
    n = ResearchNotes(
        query_id="q2",
        query="Where is the Marrow River located?",
        findings=[
            Finding(claim="The Tarn River is located in Westmarch.", evidence_ids=["a"]),
            Finding(claim="The Marrow River is located in Ostmark.", evidence_ids=["b"]),
            Finding(claim="Tessel Falls is a waterfall.", evidence_ids=["c"]),
        ],
    )
    assert [f.evidence_ids for f in n.on_topic()] == [["b"]]
    assert "Tarn" not in n.compressed(on_topic=True) and "Tarn" in n.compressed()
    assert ResearchNotes(query_id="x", query="Marrow", findings=n.findings[2:]).on_topic() == []
    assert names("The Marrow River flows into the Ostwater. It rises near East Hadley.") == {
        "marrow",
        "river",
        "ostwater",
        "east",
        "hadley",
    }


def test_worker_reads_the_best_ranked_hit_of_its_latest_search_first(
    research_app: Sourcebook,
) -> None:
    rail = pid_with(research_app, "30,000 passengers")
    query = "Northport harbor ships 2019"
    researcher = ScriptedLLM(
        [
            act("discover_evidence", query="Eastline railway passengers per day"),
            act("finish"),
            notes(("Eastline carries 30,000 passengers a day.", [rail])),
        ]
    )
    writer = ScriptedLLM(["Eastline carries 30,000 passengers a day [E1]."])
    limits = LIM.model_copy(update={"read_top": 1})
    research_app.research(
        query,
        models=models(ScriptedLLM([plan(("a", query, []))]), researcher, writer),
        task="hops-rank",
        limits=limits,
    )
    first, second = _results(research_app, "hops-rank", "r1/a/")
    assert second[0] == rail and first[0] != rail  # both rank 1: the later search wins
    assert [c["evidence_id"] for c in _calls(research_app, "hops-rank", "fetch_evidence")] == [rail]


def test_dependent_query_builds_on_on_topic_findings_only(research_app: Sourcebook) -> None:
    founded = pid_with(research_app, "founded in 1921")
    ships = pid_with(research_app, "4,200 ships")
    rail = pid_with(research_app, "30,000 passengers")
    dependent = "Which railway connects the port of that authority?"
    planner = ScriptedLLM(
        [
            plan(
                ("a", "Who founded the Northport Harbor Authority?", []),
                ("b", dependent, ["a"]),
            )
        ]
    )
    researcher = ScriptedLLM(
        [
            # a: reads two passages; one finding is about a neighbour fact
            act("fetch_evidence", evidence_id=ships),
            act("fetch_evidence", evidence_id=founded),
            act("finish"),
            notes(
                ("The harbor handled 4,200 ships in 2019.", [ships]),
                (
                    "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park.",
                    [founded],
                ),
                sufficient=False,
                gaps=[
                    "The Riverton Ferry Company is not mentioned.",
                    "The later career of Mayor Ellen Park is not mentioned in the given passages.",
                    "What the authority does today is not stated in the given passages.",
                ],
            ),
            # b: after its two automatic searches
            act("fetch_evidence", evidence_id=rail),
            act("finish"),
            notes(("The Eastline railway connects Northport with Riverton.", [rail])),
            # round 2: the two gaps worth following up
            act("finish"),
            act("finish"),
        ]
    )
    writer = ScriptedLLM(["Mayor Ellen Park founded it in 1921 [E1]."])
    report = research_app.research(
        "Which railway serves the port whose authority Ellen Park founded?",
        models=models(planner, researcher, writer),
        task="hops-deps",
        # two queries run: the question itself is not appended after them (cover_question)
        limits=LIM.model_copy(update={"max_rounds": 2, "max_queries": 2}),
    )
    assert researcher.pending == 0 and writer.pending == 0
    searches = {
        c["key"]: c["query"] for c in _calls(research_app, "hops-deps", "discover_evidence")
    }
    first = searches["r1/b/t1#call@1"]
    assert first.startswith(dependent) and "Ellen Park" in first and "4,200" not in first
    assert searches["r1/b/t2#call@1"] == "railway connects port 1921 Mayor Ellen Park"
    # the b worker's prompt shows a's on-topic finding, not the neighbour fact
    b_prompt = next(
        c.messages[-1].content
        for c in researcher.history
        if f"Question: {dependent}" in c.messages[-1].content
    )
    assert "founded in 1921 by Mayor Ellen Park" in b_prompt
    assert "The harbor handled 4,200 ships" not in b_prompt
    # follow-ups: only the gaps whose names the run already knows, searched for what they miss;
    # one that names no subject gets the question's
    followed = [n.query for n in report.notes if n.query_id.startswith("g")]
    assert followed == [
        "The later career of Mayor Ellen Park",
        "What the authority does today (Ellen Park)",
    ]
    # the writer sees passages cited by on-topic findings first (same document: credibility ties)
    passages = writer.history[0].messages[-1].content.rsplit("<data>", 1)[1]
    assert passages.index("founded in 1921") < passages.index("4,200 ships")


def test_discover_expands_through_the_graph_inside_the_boundary(
    research_app: Sourcebook,
) -> None:
    """discover_evidence ranks with graph expansion (the next hop's passage shares an entity
    with the best hit), and the expansion never leaves the run's boundary: the classified memo
    names Northport too but is outside the "ports" collection."""
    secret = pid_with(research_app, "Victor Hale")
    query = "Who founded the Northport harbor authority?"
    plain = [h.evidence_id for h in research_app.search(query, k=4, collections=["ports"])]
    graph = research_app.search(query, k=4, collections=["ports"], graph=True)
    assert [h.evidence_id for h in graph] != plain
    assert any("graph" in h.signals for h in graph)
    log = research_app.task_log()
    scope = Scope(research_app.library, Boundary(collections=("ports",)))
    for on in (True, False):
        tools = Tools(
            research_app.library,
            scope,
            ResearchLimits(discover_k=4, discover_graph=on),
            log,
            "graph-discover",
            1,
            Fetched(),
        )
        got = tools.discover_evidence(query).ids
        assert got == ([h.evidence_id for h in graph] if on else plain)
        assert secret not in got


def test_a_gap_is_searched_for_what_it_says_is_missing() -> None:
    assert (
        gap_query("The town where the architect was born is not mentioned in the passages.")
        == "The town where the architect was born"
    )
    assert gap_query("The founding year is not explicitly stated in the given passages") == (
        "The founding year"
    )
    assert (
        gap_query("The passage does not provide information about the railway's owner.")
        == "the railway's owner"
    )
    # anything else is kept whole: a claim, a qualified negation, a question, too little left
    for kept in (
        "The Marrow River is not the Tarn River",
        "The architect is not explicitly stated to be a citizen of Ostmark in the given passages",
        "Where did Ellen Park study?",
        "It is not mentioned",
    ):
        assert gap_query(kept) == kept.rstrip(".")
