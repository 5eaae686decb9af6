"""Planning: optional clarification and source routing, then the ``ResearchPlan``.

The planner is grounded by a discovery search for the question. A plan that fails validation is
retried once (the model layer shows the model its validation error); if that fails too, a
fallback plan is used and recorded in the task log: the valid queries of the model's last answer
when it has any (an answer cut at the token limit inside its query list, :func:`salvage_plan`),
else one query, the question itself.
Dependencies are repaired deterministically: unknown ids are dropped and cycles broken; queries
that share no content word with the question, the answers or the discovery results are dropped.
A first-hop query that lost the question's named subject gets it back, and a plan whose queries
leave part of the question unasked ends with the question itself (:func:`ground_plan`).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic import ValidationError

from core.errors import ModelError
from core.research.context import RunContext
from core.research.prompts import answer_budget, fit_messages, schema_reserve
from core.research.schemas import (
    Clarification,
    LeanPlan,
    ResearchPlan,
    ResearchQuery,
    routing_model,
)
from core.research.words import content_words, fold, names, names_in, subject_names

logger = logging.getLogger(__name__)

PLAN_MAX_TOKENS = 640  # a five-query plan with tools and purposes (the tool loop's) is ~560


def fallback_plan(question: str) -> ResearchPlan:
    """The plan used when the planner cannot produce a valid one: one query, the question."""
    return ResearchPlan(
        task_analysis="Fallback plan: the planner did not return a valid plan.",
        answer_shape="report",
        queries=[ResearchQuery(id="q1", query=question[:300].ljust(3, "?"))],
    )


_ITEM_SEP = re.compile(r"\s*,?\s*")


def salvage_plan(text: str, max_queries: int = 5) -> ResearchPlan | None:
    """The plan made of the valid, complete queries in a model's invalid answer, or None.

    The 1.5B planner asked for purposes and tools filled all five queries; at the token limit its
    answer is cut inside the fifth query (seen on 4 of 15 MuSiQue questions), and the whole plan
    used to be replaced by the question alone, losing the hops it had already split out.
    """
    start = re.search(r'"queries"\s*:\s*\[', text)
    if not start:
        return None
    decoder = json.JSONDecoder()
    queries: list[ResearchQuery] = []
    pos = start.end()
    while len(queries) < max_queries:
        pos = _ITEM_SEP.match(text, pos).end()  # type: ignore[union-attr]  # always matches
        try:
            item, pos = decoder.raw_decode(text, pos)
            queries.append(ResearchQuery.model_validate(item))
        except ValidationError:
            continue  # a complete but invalid query: skip it, keep the rest
        except ValueError:
            break  # the cut (or the end of the list)
    if not queries:
        return None
    return ResearchPlan(
        task_analysis="Fallback plan: the valid queries of the planner's invalid answer.",
        queries=queries,
    )


def normalize_plan(plan: ResearchPlan) -> ResearchPlan:
    """Ids renamed q1, q2, ... (a model's ids may be long or repeated; user ids that are
    short and safe are kept), a query asked twice asked once (a small planner repeats a query
    word for word, and a second worker would read the same passages again), a query that
    writes another's answer as "#q1" depending on it, dependencies only on known ids, no
    cycles."""
    rename: dict[str, str] = {}
    queries: list[ResearchQuery] = []
    for i, q in enumerate(plan.queries, 1):
        safe = re.fullmatch(r"[A-Za-z0-9_-]{1,8}", q.id) and q.id not in rename.values()
        qid = q.id if safe else f"q{i}"
        while qid in rename.values():
            qid += "x"
        rename.setdefault(q.id, qid)
        deps = dict.fromkeys([*q.depends_on, *q.refs()])
        queries.append(
            q.model_copy(update={"id": qid, "depends_on": [rename.get(d, d) for d in deps]})
        )
    late = {old: new for old, new in rename.items()}
    queries = [
        q.model_copy(update={"depends_on": [late.get(d, d) for d in q.depends_on]}) for q in queries
    ]
    first: dict[str, str] = {}  # a query's words (case, accents, punctuation aside) -> its id
    same: dict[str, str] = {}  # a copy's id -> the first asking's
    for q in queries:
        words = " ".join(re.findall(r"\w+", fold(q.query)))
        if words in first:
            same[q.id] = first[words]
        else:
            first[words] = q.id
    queries = [
        q.model_copy(
            update={"depends_on": list(dict.fromkeys(same.get(d, d) for d in q.depends_on))}
        )
        for q in queries
        if q.id not in same
    ]
    ids = {q.id for q in queries}
    placed: set[str] = set()
    fixed: list[ResearchQuery] = []
    remaining = [
        q.model_copy(update={"depends_on": [d for d in q.depends_on if d in ids and d != q.id]})
        for q in queries
    ]
    while remaining:
        ready = [q for q in remaining if all(d in placed for d in q.depends_on)]
        if not ready:  # a cycle: release the first query from its unmet dependencies
            q = remaining[0]
            ready = [q.model_copy(update={"depends_on": [d for d in q.depends_on if d in placed]})]
            remaining = [ready[0], *remaining[1:]]
        for q in ready:
            fixed.append(q)
            placed.add(q.id)
        ready_ids = {q.id for q in ready}
        remaining = [q for q in remaining if q.id not in ready_ids]
    order = {q.id: i for i, q in enumerate(queries)}
    fixed.sort(key=lambda q: order[q.id])
    return plan.model_copy(update={"queries": fixed})


def ground_plan(
    plan: ResearchPlan, question: str, context: str, max_queries: int = 5
) -> ResearchPlan:
    """Keep only what the question, the user's answers or the discovery results (``context``)
    support.

    A query must share a content word with them: a small model copies a prompt's wording into
    its plan (seen: a query about "product P" for a question about a journal). If no query is
    left, the question itself is the one query. A component or constraint must name nothing
    they do not: the 1.5B model wrote guessed answers into the components ("The first mayor
    ... was Ann Northcote."), which the writer then repeated as fact. Returns the plan
    normalised (:func:`normalize_plan`), so dependencies on dropped queries are gone too, with
    the question's subjects kept (:func:`keep_subjects`) and the question asked in full
    (:func:`cover_question`, within ``max_queries``).
    """
    known = content_words(f"{question}\n{context}")
    kept = [q for q in plan.queries if content_words(q.query) & known]
    if len(kept) < len(plan.queries):
        dropped = [q.query for q in plan.queries if q not in kept]
        logger.info("dropped ungrounded plan queries: %s", dropped)
    if not kept:
        kept = fallback_plan(question).queries
    words = {w.lower() for w in re.findall(r"[\w'-]+", f"{question}\n{context}")}

    def grounded(items: list[str]) -> list[str]:
        out = [c for c in items if names(c) <= words]
        if len(out) < len(items):
            logger.info("dropped ungrounded plan items: %s", [c for c in items if c not in out])
        return out

    plan = plan.model_copy(
        update={
            "queries": kept,
            "components": grounded(plan.components),
            "constraints": grounded(plan.constraints),
        }
    )
    return cover_question(keep_subjects(normalize_plan(plan), question), question, max_queries)


def keep_subjects(plan: ResearchPlan, question: str) -> ResearchPlan:
    """A query that depends on nothing and names no subject at all gets the question's back:
    the 1.5B planner wrote "What is the author's name?" for "... the author of <a book's long
    title> ...", a search that can only find strangers. A dependent query is left alone (its
    subject comes from what its dependencies found), and so is one that names a subject of
    its own."""
    subjects = subject_names(question)
    if not subjects:
        return plan
    queries = []
    for q in plan.queries:
        text = fold(q.query)
        if not (q.depends_on or subject_names(q.query) or any(names_in(s, text) for s in subjects)):
            logger.info("plan query %s lost the question's subject; added back", q.id)
            q = q.model_copy(update={"query": f"{q.query} ({', '.join(subjects)})"[:300]})
        queries.append(q)
    return plan.model_copy(update={"queries": queries})


def cover_question(plan: ResearchPlan, question: str, max_queries: int = 5) -> ResearchPlan:
    """Append the question itself, after every query nothing else builds on, when the plan's
    queries leave one of its content words unasked: the 1.5B planner stops a hop short (asked
    who led the country a composer was a citizen of, it asks for the composer and the country,
    and nobody asks who led it), or asks for the thing, not the "kind" of thing asked for. A
    word a query only paraphrased costs one more worker; a hop left out costs the answer."""
    asked = set().union(*(content_words(q.query) for q in plan.queries))
    if not (content_words(question) - asked) or len(plan.queries) >= max_queries:
        return plan
    used = {d for q in plan.queries for d in q.depends_on}
    last = [q.id for q in plan.queries if q.id not in used][-3:]
    qid = f"q{len(plan.queries) + 1}"
    while any(q.id == qid for q in plan.queries):
        qid += "x"
    final = ResearchQuery(id=qid, query=question[:300].ljust(3, "?"), depends_on=last)
    logger.info("the plan leaves part of the question unasked; %s asks it", qid)
    return plan.model_copy(update={"queries": [*plan.queries, final]})


def batches(plan: ResearchPlan, done: set[str]) -> list[list[ResearchQuery]]:
    """Queries in dependency layers; each layer runs after the ones before it."""
    placed = set(done)
    todo = [q for q in plan.queries if q.id not in done]
    out: list[list[ResearchQuery]] = []
    while todo:
        layer = [q for q in todo if all(d in placed for d in q.depends_on)] or todo[:1]
        out.append(layer)
        placed.update(q.id for q in layer)
        todo = [q for q in todo if q.id not in placed]
    return out


def discovery(ctx: RunContext, question: str) -> str:
    """A few search results that ground the plan in what the library holds."""
    res = ctx.tool(
        "plan/discover",
        "discover_evidence",
        lambda: ctx.tools.discover_evidence(question),
        args={"query": question},
    )
    return res.text if not res.error else f"(search failed: {res.error})"


def make_plan(ctx: RunContext, question: str, answers: list[str]) -> tuple[ResearchPlan, bool]:
    """(plan, whether it is the fallback plan)."""
    saved = ctx.log.lookup(ctx.task, "plan_fallback")
    if saved is not None:
        return ResearchPlan.model_validate(saved[1]["plan"]), True
    llm = ctx.model("planner")
    variables: dict[str, Any] = {
        "question": question,
        "answers": answers,
        "scope": ctx.scope.describe(),
        "discovery": discovery(ctx, question),
        "tools": ctx.tool_loop,
    }
    # with no tool loop the planner writes no tools or purposes (the run would not read them)
    schema = ResearchPlan if ctx.tool_loop else LeanPlan
    budget = answer_budget(llm, PLAN_MAX_TOKENS)
    msgs = fit_messages(
        llm,
        "planner",
        variables,
        {"discovery": "head"},
        budget,
        reserve=schema_reserve(llm, schema),
    )
    try:
        drafted, _ = ctx.model_json("planner", "plan", msgs, schema, max_tokens=budget)
        plan = ResearchPlan.model_validate(drafted.model_dump())
        context = "\n".join([*answers, variables["discovery"]])
        return ground_plan(plan, question, context, ctx.limits.max_queries), False
    except ModelError as exc:
        logger.info("planner failed (%s); using the fallback plan", exc)
        salvaged = salvage_plan(getattr(exc.__cause__, "text", ""), ctx.limits.max_queries)
        if salvaged is None:
            plan = fallback_plan(question)
        else:
            context = "\n".join([*answers, variables["discovery"]])
            plan = ground_plan(salvaged, question, context, ctx.limits.max_queries)
        ctx.log.append(
            ctx.task,
            ctx.run,
            "plan_fallback",
            "plan_fallback",
            {"error": str(exc), "plan": plan.model_dump(), "salvaged": salvaged is not None},
        )
        return plan, True


def clarify(ctx: RunContext, question: str) -> list[str]:
    """Questions for the user about scope or output shape (empty if the question is clear)."""
    llm = ctx.model("clarifier")
    msgs = fit_messages(
        llm,
        "clarifier",
        {"question": question, "scope": ctx.scope.describe()},
        {},
        200,
        reserve=schema_reserve(llm, Clarification),
    )
    try:
        out, _ = ctx.model_json("clarifier", "clarify", msgs, Clarification, max_tokens=200)
    except ModelError as exc:
        logger.info("clarifier failed: %s", exc)
        return []
    return [q.strip()[:300] for q in out.questions if q.strip()]


def route(ctx: RunContext, question: str, max_docs: int = 40) -> frozenset[str]:
    """Advisory routing: preferred documents inside the boundary (never widens it)."""
    docs = [
        d for d in ctx.library.documents(include_superseded=False) if ctx.scope.allows(d.doc_id)
    ]
    if len(docs) < 2 or len(docs) > max_docs:
        return frozenset()
    schema = routing_model([d.doc_id for d in docs])
    llm = ctx.model("router")
    msgs = fit_messages(
        llm,
        "router",
        {
            "question": question,
            "documents": [{"id": d.doc_id, "title": d.title[:120]} for d in docs],
        },
        {},
        200,
        reserve=schema_reserve(llm, schema),
    )
    try:
        out, _ = ctx.model_json("router", "route", msgs, schema, max_tokens=200)
    except ModelError as exc:
        logger.info("router failed: %s", exc)
        return frozenset()
    picked = frozenset(getattr(out, "preferred_doc_ids", []))
    return frozenset(d for d in picked if ctx.scope.allows(d))
