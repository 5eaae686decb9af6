"""Step answers: each plan step's own answer read from its passages and carried into the steps
that build on it; the report's answer is the last step's, its chain the steps' passages
(synthetic names; scripted models; a real library for the runs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from research_fixtures import _pdf, act, evidence, models, notes, pid_with, plan

from core.evidence import Evidence
from core.research import steps
from core.research.chain import CHAIN_HEAD, chain_lines
from core.research.planner import normalize_plan
from core.research.schemas import (
    Finding,
    ResearchLimits,
    ResearchNotes,
    ResearchPlan,
    notes_model,
)
from core.service import Sourcebook
from models.scripted import ScriptedLLM

Q = "Which river flows through the town where Tomas Varga was born?"
Q1 = "In which town was Tomas Varga born?"
BORN = "Tomas Varga was born in Kelmor in 1931."
RIVER = "The Dravin River flows through Kelmor to the sea."
ID1, ID2 = "ev1:00000000000000b1", "ev1:00000000000000b2"
TEXTS = {ID1: f"{BORN} His father kept a mill.", ID2: f"Kelmor is a market town. {RIVER}"}


def _get(ev_id: str) -> Evidence | None:
    return evidence(ev_id, TEXTS[ev_id]) if ev_id in TEXTS else None


def _plan(*queries: tuple[str, str, list[str]]) -> ResearchPlan:
    return ResearchPlan.model_validate(plan(*queries))


def _notes(qid: str, query: str, answer: str, ev_id: str, *claims: str) -> ResearchNotes:
    return ResearchNotes(
        query_id=qid,
        query=query,
        findings=[Finding(claim=c, evidence_ids=[ev_id]) for c in claims],
        fetched_ids=[ev_id],
        answer=answer,
        answer_id=ev_id,
    )


TWO = _plan(("q1", Q1, []), ("q2", Q, ["q1"]))


def test_the_final_step_is_the_last_query_nothing_builds_on_and_it_must_build_on_one() -> None:
    assert steps.final_step(TWO) is not None and steps.final_step(TWO).id == "q2"  # type: ignore[union-attr]
    # independent queries are not a chain of steps
    assert steps.final_step(_plan(("q1", Q1, []), ("q2", Q, []))) is None
    three = _plan(("q1", Q1, []), ("q2", "Kelmor mills", []), ("q3", Q, ["q1"]))
    last = steps.final_step(three)
    assert last is not None and [q.id for q in steps.lineage(three, last)] == ["q1", "q3"]


def test_an_answer_is_carried_only_when_its_passage_holds_it() -> None:
    ok = _notes("q1", Q1, "Kelmor", ID1)
    assert steps.held(ok, _get)
    assert steps.known_lines([ok], _get) == [f"{Q1} -> Kelmor"]
    guessed = _notes("q1", Q1, "Oskelby", ID1)  # not in its passage
    assert not steps.held(guessed, _get)
    assert steps.known_lines([guessed], _get) == []
    assert not steps.held(_notes("q1", Q1, "", ID1), _get)
    assert not steps.held(_notes("q1", Q1, "Kelmor", "ev1:00000000000000ff"), _get)  # not read


def test_a_step_fact_is_a_finding_or_else_the_passage_sentence_stating_the_answer() -> None:
    with_finding = _notes(
        "q1", Q1, "Kelmor", ID1, "Varga kept a mill.", "Varga was born in Kelmor."
    )
    assert steps.fact_for(with_finding, evidence(ID1, TEXTS[ID1])) == "Varga was born in Kelmor."
    bare = _notes("q1", Q1, "Kelmor", ID1, "Varga kept a mill.")
    assert steps.fact_for(bare, evidence(ID1, TEXTS[ID1])) == BORN
    # an answer without names or figures is found by its words
    kind = _notes("q1", "What kind of town is Kelmor?", "market town", ID2)
    assert steps.fact_for(kind, evidence(ID2, TEXTS[ID2])) == "Kelmor is a market town."
    # a finding that is the bare answer, or a cut copy of the passage, states nothing about it
    for claim in ("Kelmor.", "In Kelmor", "Tomas Varga (born in Kelmor"):
        named = _notes("q1", Q1, "Kelmor", ID1, claim)
        assert steps.fact_for(named, evidence(ID1, TEXTS[ID1])) == BORN
    assert steps.fact_for(named, evidence(ID1, "Kelmor. (Varga, Kelmor")) == ""


def test_the_steps_answer_is_the_last_steps_with_one_link_per_step() -> None:
    got = steps.step_answer(
        TWO,
        {
            "q1": _notes("q1", Q1, "Kelmor", ID1),
            "q2": _notes("q2", Q, "the Dravin River", ID2, RIVER),
        },
        _get,
    )
    assert got is not None
    assert got.answer == "the Dravin River"
    assert got.links == [(BORN, ID1), (RIVER, ID2)]
    # a step on the way without a held answer: no answer from the steps
    broken = {"q1": _notes("q1", Q1, "Oskelby", ID1), "q2": _notes("q2", Q, "the Dravin", ID2)}
    assert steps.step_answer(TWO, broken, _get) is None
    assert steps.step_answer(TWO, {"q2": _notes("q2", Q, "the Dravin River", ID2)}, _get) is None


def test_notes_schema_takes_the_answer_and_only_a_fetched_passage_for_it() -> None:
    schema = notes_model([ID1])
    ok = schema.model_validate(
        {"findings": [], "answer": "Kelmor", "answer_id": ID1, "gaps": [], "sufficient": True}
    )
    assert ok.answer == "Kelmor"  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        schema.model_validate(
            {"findings": [], "answer": "X", "answer_id": ID2, "gaps": [], "sufficient": True}
        )


def test_an_empty_finding_is_dropped_not_the_notes_and_their_answer() -> None:
    schema = notes_model([ID1, ID2], gaps=False)
    got = schema.model_validate(
        {
            "findings": [
                {"claim": " ", "evidence_ids": [ID2]},
                {"claim": BORN, "evidence_ids": [ID1]},
                {"claim": "-.", "evidence_ids": [ID1]},
            ],
            "answer": "Kelmor",
            "answer_id": ID1,
            "sufficient": True,
        }
    )
    assert [f.claim for f in got.findings] == [BORN]  # type: ignore[attr-defined]
    assert got.answer == "Kelmor"  # type: ignore[attr-defined]
    # the schema the model reads is unchanged: the filter is a validator, not a new bound
    findings = schema.model_json_schema()["properties"]["findings"]
    assert findings["maxItems"] == 6 and findings["type"] == "array"


def test_a_step_written_as_hash_q1_takes_that_steps_answer_or_else_its_question() -> None:
    step = ResearchPlan.model_validate(
        plan(("q1", Q1, []), ("q2", "Which river flows through #q1?", []))
    )
    # the reference is a dependency, whether or not the planner listed it
    assert normalize_plan(step).queries[1].depends_on == ["q1"]
    q2 = step.queries[1]
    held = {"q1": _notes("q1", Q1, "Kelmor", ID1)}
    assert steps.resolve(q2, held, _get).query == "Which river flows through Kelmor?"
    guessed = {"q1": _notes("q1", Q1, "Oskelby", ID1)}  # its passage does not hold it
    assert steps.resolve(q2, guessed, _get).query == (
        "Which river flows through (In which town was Tomas Varga born)?"
    )
    assert steps.resolve(q2, {}, _get) is q2  # nothing to fill in yet
    assert steps.resolve(step.queries[0], held, _get) is step.queries[0]


# ----------------------------------------------------------------------------- whole runs


@pytest.fixture(scope="module")
def steps_app(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Sourcebook]:
    root = tmp_path_factory.mktemp("steps")
    app = Sourcebook(root / "home", embedder=embedder)
    pdf = _pdf(root / "varga.pdf", "Varga Notes", [BORN, RIVER, "Kelmor lies in a wide valley."])
    assert not app.add([pdf]).failed
    yield app
    app.close()


LIM = ResearchLimits(
    tool_loop=True, max_workers=1, max_rounds=1, read_top=0, trail=False, chain_support=True
)


def _answered(claim: str, ev_id: str, answer: str) -> dict[str, Any]:
    return {**notes((claim, [ev_id])), "answer": answer, "answer_id": ev_id}


def _run(
    app: Sourcebook, task: str, second: str, writer: ScriptedLLM, q2: str = Q, first: str = BORN
) -> Any:
    born, river = pid_with(app, "was born in Kelmor"), pid_with(app, "flows through Kelmor")
    planner = ScriptedLLM([plan(("q1", Q1, []), ("q2", q2, ["q1"]))])
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=born),
            act("finish"),
            _answered(first, born, "Kelmor"),
            act("fetch_evidence", evidence_id=river),
            _answered(RIVER, river, second),
        ]
    )
    out = app.research(Q, models=models(planner, researcher, writer), task=task, limits=LIM)
    assert researcher.pending == 0 and writer.pending == 0
    return out, researcher


def test_a_run_answers_with_its_last_steps_answer_and_carries_each_answer_forward(
    steps_app: Sourcebook,
) -> None:
    writer = ScriptedLLM(["Kelmor lies in a wide valley [E1]."])  # the body only: no answer call
    out, researcher = _run(steps_app, "steps-carried", "the Dravin River", writer)
    lines = out.markdown.splitlines()
    assert lines[0] == "**Answer:** the Dravin River [1]."  # one source: both pages
    links = chain_lines(out.markdown)
    assert CHAIN_HEAD in lines and len(links) == 2
    assert links[0].startswith(f"- {BORN.rstrip('.')} [") and "Dravin" in links[1]
    assert out.status == "answered", out.status_reasons
    # the second step searched with the first step's answer and read its passage knowing it
    searches = [
        e.payload["args"]["query"]
        for e in steps_app.task_log().events("steps-carried")
        if e.kind == "tool_call" and e.payload["tool"] == "discover_evidence"
    ]
    assert any(s.startswith(Q) and "Kelmor" in s for s in searches)
    notes_prompt = researcher.history[-1].messages[-1].content
    assert "Passages you fetched" in notes_prompt
    assert f"Known from earlier steps:\n- {Q1} -> Kelmor" in notes_prompt


def test_a_step_fact_is_shown_without_a_frame_around_it(steps_app: Sourcebook) -> None:
    writer = ScriptedLLM(["Kelmor lies in a wide valley [E1]."])
    first = f"The passage states that {BORN}"
    out, _ = _run(steps_app, "steps-framed", "the Dravin River", writer, first=first)
    assert chain_lines(out.markdown)[0].startswith(f"- {BORN.rstrip('.')} [")


def test_a_run_asks_a_hash_q1_step_with_the_answer_it_stands_for(steps_app: Sourcebook) -> None:
    writer = ScriptedLLM(["Kelmor lies in a wide valley [E1]."])
    out, researcher = _run(
        steps_app, "steps-ref", "the Dravin River", writer, q2="Which river flows through #q1?"
    )
    assert out.markdown.splitlines()[0] == "**Answer:** the Dravin River [1]."
    searches = [
        e.payload["args"]["query"]
        for e in steps_app.task_log().events("steps-ref")
        if e.kind == "tool_call" and e.payload["tool"] == "discover_evidence"
    ]
    assert any(s.startswith("Which river flows through Kelmor?") for s in searches)
    assert not any("#q1" in s for s in searches)
    assert (
        "Question: Which river flows through Kelmor?" in researcher.history[-1].messages[-1].content
    )


def test_a_run_whose_last_step_answer_its_passage_lacks_answers_in_one_call(
    steps_app: Sourcebook,
) -> None:
    short = {
        "steps": [],
        "calculation": "",
        "answer": "the Dravin River",
        "labels": ["E2"],
        "answered": True,
    }
    writer = ScriptedLLM([short, "Kelmor lies in a wide valley [E1]."])
    out, _ = _run(steps_app, "steps-fallback", "the Oskel River", writer)
    assert out.markdown.splitlines()[0].startswith("**Answer:** the Dravin River [")
    assert "Oskel" not in out.markdown
    events = steps_app.task_log().events("steps-fallback")
    result = next(e.payload for e in events if e.key.startswith("step_answers@"))
    assert result["answer"] == "" and result["why_not"] == "no chain of answered steps"
