"""Step answers: a question that joins facts answered step by step, each step from its own
passages, the report's answer the last step's (self-ask / IRCoT style).

The plan splits such a question into queries, a query that needs another's answer depending on
it. Each worker's notes end with its query's own answer and the one passage stating it
(:mod:`core.research.researcher`); a dependent worker searches with the answers it builds on,
written into its query where the plan says "#q1" (:func:`resolve`), and reads its passages with
them in view (:func:`known_lines`). The answer line is then the last
step's answer, and the chain under it (:mod:`core.research.chain`) is the steps that lead there,
each one sentence of its own passage stating that step's answer: every link is shown and checked
on its one passage. One call over everything read, the alternative, has to join the passages
itself, and a small model then often takes a name from a passage about something else.

Pure functions of the plan, the notes and the fetched passages: no model, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from core.evidence import Evidence
from core.research.citations import cited_text
from core.research.schemas import (
    FACT_MAX,
    STEP_REF,
    ResearchNotes,
    ResearchPlan,
    ResearchQuery,
)
from core.research.terms import key_terms, terms_missing
from core.text import sentence_ranges

GetFn = Callable[[str], Evidence | None]


@dataclass(frozen=True)
class StepAnswer:
    """The last step's answer and the links that lead to it, in step order."""

    answer: str
    links: list[tuple[str, str]]  # (one sentence stating a step's answer, its evidence id)


def _terms(answer: str) -> list[str]:
    # key_terms skips a sentence's first word (any sentence starts with a capital): give it one
    return key_terms(f"Answer: {answer}")


def held(notes: ResearchNotes, get: GetFn) -> bool:
    """Whether ``notes`` has an answer whose passage (fetched in this run) holds its names and
    figures: only such an answer is carried into the steps that build on it."""
    if not notes.answer or not notes.answer_id:
        return False
    ev = get(notes.answer_id)
    return ev is not None and not terms_missing(_terms(notes.answer), cited_text(ev))


def known_lines(deps: list[ResearchNotes], get: GetFn) -> list[str]:
    """ "query -> answer" for each step in ``deps`` whose answer is held by its passage."""
    return [f"{n.query} -> {n.answer}" for n in deps if held(n, get)]


def resolve(q: ResearchQuery, deps: Mapping[str, ResearchNotes], get: GetFn) -> ResearchQuery:
    """``q`` with each "#q1" it writes replaced by that step's answer when its passage holds
    it, else by that step's own question in brackets (a search for the question's words still
    finds what the answer would have named; "#q1" finds nothing)."""

    def fill(m: re.Match[str]) -> str:
        n = deps.get(m.group(1).lower())
        if n is None:
            return m.group(0)
        return n.answer if held(n, get) else f"({n.query.rstrip('?. ')})"

    text = STEP_REF.sub(fill, q.query)
    return q if text == q.query else q.model_copy(update={"query": text[:300]})


def final_step(plan: ResearchPlan) -> ResearchQuery | None:
    """The step whose answer answers the question: the last query nothing depends on, when it
    depends on another query (a plan without dependencies is not a chain of steps)."""
    used = {d for q in plan.queries for d in q.depends_on}
    sinks = [q for q in plan.queries if q.id not in used]
    if not sinks or not sinks[-1].depends_on:
        return None
    return sinks[-1]


def lineage(plan: ResearchPlan, last: ResearchQuery) -> list[ResearchQuery]:
    """``last`` and every query it builds on, directly or not, in plan order."""
    by_id = {q.id: q for q in plan.queries}
    wanted = {last.id}
    todo = list(last.depends_on)
    while todo:
        qid = todo.pop()
        if qid in by_id and qid not in wanted:
            wanted.add(qid)
            todo.extend(by_id[qid].depends_on)
    return [q for q in plan.queries if q.id in wanted]


def whole_fact(fact: str) -> bool:
    """Whether ``fact`` can be a sentence: under its bound (one that fills it was cut
    mid-sentence, a small model copying its passage), three words or more (a finding of one
    name states nothing about it), and every bracket it opens closed (a small model also copies
    a passage's title and the start of its first line: "Tarsk Mills Tarsk Mills ("). A cut
    that ends at a space drops it: a fact one character short of the bound filled it too (logs
    written before the cut did so keep the space)."""
    opened = fact.count("(") + fact.count("[")
    closed = fact.count(")") + fact.count("]")
    return len(fact.rstrip()) < FACT_MAX - 1 and len(fact.split()) >= 3 and opened == closed


def fact_for(notes: ResearchNotes, ev: Evidence) -> str:
    """One sentence stating the step's answer: the shortest of the notes' findings that cites
    the answer's passage, holds the answer's names and is a sentence (:func:`whole_fact`),
    else the first such sentence of the passage ("" when neither has one)."""
    terms = _terms(notes.answer)
    words = notes.answer.casefold()

    def states(text: str) -> bool:
        held = not terms_missing(terms, text) and (bool(terms) or words in text.casefold())
        return held and whole_fact(text)

    found = [
        f.claim for f in notes.findings if notes.answer_id in f.evidence_ids and states(f.claim)
    ]
    if found:
        return min(found, key=len)
    text = " ".join(ev.text.split())
    for a, b in sentence_ranges(text):
        sentence = text[a:b].strip()
        if states(sentence):
            return sentence
    return ""


def step_answer(
    plan: ResearchPlan, notes: Mapping[str, ResearchNotes], get: GetFn
) -> StepAnswer | None:
    """The answer the plan's steps reach, or None when the plan is not a chain of steps, or a
    step on the way has no answer its passage holds, or no sentence states one."""
    last = final_step(plan)
    if last is None:
        return None
    links: list[tuple[str, str]] = []
    for q in lineage(plan, last):
        n = notes.get(q.id)
        if n is None or not held(n, get):
            return None
        ev = get(n.answer_id)
        fact = fact_for(n, ev) if ev is not None else ""
        if not fact:
            return None
        links.append((fact, n.answer_id))
    return StepAnswer(answer=notes[last.id].answer, links=links)
