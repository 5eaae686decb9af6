"""One research run: question in, cited report out. See ARCHITECTURE.md, "Research".

Stages: (optional) routing -> plan (user's, planner's, or the recorded fallback) -> researcher
workers in dependency batches, concurrent up to ``max_workers`` -> sufficiency check and
follow-up rounds for gaps -> short cited answer -> writer (streamed) -> citation check with one
repair pass and the post-draft checks (:mod:`core.research.checks`) -> ``Report`` with a
status.

Every step goes through the task log first, so rerunning the same task name resumes.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from core.errors import CancelledError, SourcebookError, translate_errors
from core.library import Library
from core.research import drafts, planner, steps, writer
from core.research.checks import RunState, finish_draft
from core.research.citations import (
    bracket_labels,
    citation_tokens,
    cite_quotations,
)
from core.research.context import EventFn, RunContext, StopSignal
from core.research.pipeline import apply, stage_on
from core.research.researcher import run_worker
from core.research.schemas import (
    Boundary,
    Report,
    ResearchLimits,
    ResearchNotes,
    ResearchPlan,
    ResearchQuery,
)
from core.research.tools import Fetched, Scope, Tools
from core.research.trail import trail_lines, trail_section
from core.research.words import focus_terms, gap_query, names
from core.tasks import RecordingFailed, TaskLease, TaskLog
from models.llm import LLM

logger = logging.getLogger(__name__)

FINAL = frozenset(
    {"answered", "insufficient_evidence", "partial", "partial_retrieval", "budget_exhausted"}
)
MAX_FOLLOWUPS = 3


class ResearchRequest(BaseModel):
    """What the user asked for."""

    question: str = Field(..., min_length=3)
    task: str | None = None
    boundary: Boundary = Field(default_factory=Boundary)
    limits: ResearchLimits = Field(default_factory=ResearchLimits)
    answers: list[str] = Field(default_factory=list, description="Clarification answers.")
    plan: ResearchPlan | None = Field(None, description="A plan the user edited; skips planning.")
    route: bool = Field(False, description="Run advisory source routing first.")
    fresh: bool = Field(False, description="Ignore a finished report saved under this task name.")
    seed: ResearchNotes | None = Field(
        None,
        description="Notes the run starts from (an Ask conversation's reading): their passages "
        "are fetched again at the start, so they are citable, and they join the writer's notes.",
    )


def task_name(question: str) -> str:
    slug = "-".join(re.findall(r"[a-z0-9]+", question.lower())[:6]) or "task"
    return f"{slug}-{hashlib.sha256(question.encode()).hexdigest()[:6]}"


def _context(
    library: Library,
    log: TaskLog,
    task: str,
    run: int,
    models: Mapping[str, LLM],
    req: ResearchRequest,
    cancel: StopSignal,
    on_event: EventFn | None,
) -> RunContext:
    scope = Scope(library, req.boundary)
    fetched = Fetched()
    seeds = (req.question, *req.answers)  # their web addresses may be fetched (web runs only)
    tools = Tools(library, scope, req.limits, log, task, run, fetched, seed_text=seeds)
    return RunContext(
        library, log, task, run, models, req.limits, scope, tools, fetched, cancel, on_event
    )


def clarify_questions(
    library: Library, log: TaskLog, models: Mapping[str, LLM], req: ResearchRequest
) -> list[str]:
    """Questions to ask the user before the run (empty if the question is clear)."""
    task = req.task or task_name(req.question)
    with log.acquire(task):
        run = log.begin(task, req.question, {"stage": "clarify"})
        ctx = _context(library, log, task, run, models, req, StopSignal(), None)
        questions = planner.clarify(ctx, req.question)
        log.finish(task, "clarifying", None)
    return questions


def draft_plan(
    library: Library, models: Mapping[str, LLM], req: ResearchRequest, scratch: Path
) -> ResearchPlan:
    """The plan the planner would make, for the user to edit before the run starts.

    Planned in a scratch task log under ``scratch`` (the caller's temporary folder), so the
    draft does not become a task in the history and the run that follows (with ``plan=`` the
    edited plan) is planned by nobody else.
    """
    log = TaskLog(scratch / "draft.sqlite")
    try:
        task = req.task or task_name(req.question)
        run = log.begin(task, req.question, {"stage": "plan"})
        ctx = _context(library, log, task, run, models, req, StopSignal(), None)
        plan, _ = planner.make_plan(ctx, req.question, list(req.answers))
        return plan
    finally:
        log.close()


def run_research(
    library: Library,
    log: TaskLog,
    models: Mapping[str, LLM],
    req: ResearchRequest,
    *,
    cancel: threading.Event | None = None,
    on_event: EventFn | None = None,
    on_token: Callable[[str], None] | None = None,
) -> Report:
    """Run (or resume) the task; never raises for a run that started (the status says it).

    Raises ``TaskBusyError`` before starting when another live process is running the task:
    the run holds the task's lease from before it reads the saved report until it returns.
    """
    task = req.task or task_name(req.question)
    stop = StopSignal(cancel)
    try:
        lease = log.acquire(task, on_lost=stop.set)
    except RecordingFailed as exc:
        return Report(
            task=task, question=req.question, status="recording_failed", status_reasons=[str(exc)]
        )
    try:
        return _leased_run(library, log, models, req, task, stop, lease, on_event, on_token)
    finally:
        lease.release()


def _leased_run(
    library: Library,
    log: TaskLog,
    models: Mapping[str, LLM],
    req: ResearchRequest,
    task: str,
    stop: StopSignal,
    lease: TaskLease,
    on_event: EventFn | None,
    on_token: Callable[[str], None] | None,
) -> Report:
    saved = log.get(task)
    if saved is not None and saved.status in FINAL and saved.report and not req.fresh:
        return Report.model_validate(saved.report)
    try:
        run = log.begin(
            task,
            req.question,
            {
                "boundary": req.boundary.model_dump(mode="json"),
                "limits": req.limits.model_dump(),
                "models": {role: llm.name for role, llm in models.items()},  # for estimates
            },
        )
    except RecordingFailed as exc:
        return Report(
            task=task, question=req.question, status="recording_failed", status_reasons=[str(exc)]
        )
    ctx = _context(library, log, task, run, models, req, stop, on_event)
    state = RunState(task=task, question=req.question)
    try:
        with translate_errors():  # a model that cannot even load (count tokens) stops the run
            _run(ctx, req, state, on_token)
    except CancelledError:
        state.status = "cancelled"
        state.reasons.append("The run was cancelled; rerun the task to continue.")
    except RecordingFailed as exc:
        state.status = "recording_failed"
        state.reasons.append(str(exc))
    except SourcebookError as exc:
        logger.warning("research run %s failed: %s", task, exc)
        state.status = "partial"
        state.reasons.append(f"The run stopped: {exc}")
    taken_over = lease.lost.is_set()
    if taken_over:
        state.status = "cancelled"
        state.reasons.append("Another process took this task over; this run stopped.")
    report = state.report()
    try:
        if not taken_over:  # else the task's record is the new holder's to write
            log.finish(task, report.status, report.model_dump(mode="json"))
    except RecordingFailed as exc:
        report.status = "recording_failed"
        report.status_reasons.append(str(exc))
    ctx.emit("stage", stage="done", text=report.status)
    return report


def _run(
    ctx: RunContext, req: ResearchRequest, st: RunState, on_token: Callable[[str], None] | None
) -> None:
    if req.route:
        ctx.emit("stage", stage="routing")
        with ctx.log.span(ctx.task, ctx.run, "stage", "routing"):
            ctx.tools.preferred_docs = planner.route(ctx, req.question)
    ctx.emit("stage", stage="planning")
    with ctx.log.span(ctx.task, ctx.run, "stage", "planning"):
        if req.plan is not None:
            plan, _ = ctx.log.step(
                ctx.task,
                ctx.run,
                "plan",
                lambda: planner.normalize_plan(req.plan),  # type: ignore[arg-type]
                dump=lambda p: p.model_dump(mode="json"),
                load=ResearchPlan.model_validate,
            )
            st.plan, st.fallback = plan, False
        else:
            st.plan, st.fallback = planner.make_plan(ctx, req.question, req.answers)
    if len(st.plan.queries) > ctx.limits.max_queries:
        kept = st.plan.queries[: ctx.limits.max_queries]
        ids = {q.id for q in kept}
        kept = [
            q.model_copy(update={"depends_on": [d for d in q.depends_on if d in ids]}) for q in kept
        ]
        st.plan = st.plan.model_copy(update={"queries": kept})
    if st.fallback:
        n = len(st.plan.queries)
        st.reasons.append(
            "The planner's output was invalid twice; a fallback plan of "
            f"{n} {'query' if n == 1 else 'queries'} was used."
        )
    ctx.emit("stage", stage="research", text=f"{len(st.plan.queries)} queries")
    with ctx.log.span(ctx.task, ctx.run, "stage", "research"):
        if req.seed is not None:
            st.notes[req.seed.query_id] = _seeded(ctx, req.seed)
        _research(ctx, st.plan, st)
    notes = list(st.notes.values())
    evidence = writer.order_evidence(ctx, notes)
    if not evidence:
        st.status = "insufficient_evidence"
        st.reasons.append("No passage inside the chosen sources could be read for this question.")
        st.markdown = "The chosen sources do not contain evidence that answers this question.\n"
        return
    labels = writer.labels_for(evidence)
    ctx.emit("stage", stage="writing")
    with ctx.log.span(ctx.task, ctx.run, "stage", "writing"):
        answer = ""
        if stage_on(ctx, "row_lookup"):  # the program's reading of a statement comes first
            answer = writer.row_answer(ctx, req.question, evidence, labels)
        stepped = False
        if not answer and stage_on(ctx, "step_answers"):
            answer = writer.stepped_answer(ctx, req.question, st.plan, st.notes, labels)
            stepped = bool(answer)
        if not answer and stage_on(ctx, "short_answer"):
            answer = writer.short_answer(ctx, req.question, st.plan, evidence, labels)
        if answer and not stepped and on_token is not None:
            on_token(answer + "\n\n")
        bare = bool(answer) and not stage_on(ctx, "body")  # the answer and its chain only
        draft = ""
        if not bare:
            prose = None
            if not (answer and stage_on(ctx, "notes_body")):
                prose = writer.write(
                    ctx, req.question, st.plan, notes, evidence, labels, on_token, answer
                )
            if prose is None:  # asked for, or the prose's prompt was past its bound
                draft = writer.notes_body(ctx, notes, answer)
                bare = not draft  # nothing held beyond the answer: the answer and its chain
            else:
                draft = prose
        draft = drafts.citations_joined(bracket_labels(draft, labels))
        by_id = {ev.evidence_id: ev.text for ev in evidence}
        quoted = {k: by_id[v] for k, v in labels.items()}
        draft = apply(
            ctx,
            "prompt_echo",
            draft,
            lambda d: drafts.without_prompt_echo(d, req.question, quoted.values()),
        )
        draft = apply(ctx, "cite_quotations", draft, lambda d: cite_quotations(d, quoted))
        asked = req.question if answer else ""  # under an answer, the body names what it adds
        draft = apply(ctx, "method_talk", draft, lambda d: drafts.without_method_talk(d, asked))
        draft = apply(ctx, "passage_talk", draft, drafts.without_passage_talk)
        fell_back = False
        if not bare and not citation_tokens(draft):
            fallback = writer.findings_report(notes)
            if fallback:
                fell_back = True
                # A small model may write without citing anything: uncited text cannot stand in
                # the report, so the researchers' findings (cited by enum) are used instead.
                ctx.log.append(ctx.task, ctx.run, "writer_fallback", "writer_fallback", fallback)
                st.reasons.append(
                    "The writer cited nothing; the report lists the researchers' cited findings."
                )
                draft = fallback
        if answer:
            body = apply(
                ctx,
                "answer_copy",
                draft,
                lambda d: drafts.without_answer_copy(d, answer, req.question),
            )
            draft = f"{answer}\n\n{body}"
        if stage_on(ctx, "trail") and not fell_back:
            cited = {labels.get(t, t).lower() for t in citation_tokens(draft)}
            lines = trail_lines(
                req.question, notes, ctx.fetched.get, ctx.library.embedder.embed, draft, cited
            )
            if lines:
                lines = ctx.log.append(ctx.task, ctx.run, "trail", "trail", lines)
                draft = f"{draft.rstrip()}\n\n{trail_section(lines)}"
        draft = drafts.numbered_from_one(draft)  # the lists the stages above left gaps in
    ctx.emit("stage", stage="checking citations")
    with ctx.log.span(ctx.task, ctx.run, "stage", "citations"):
        finish_draft(ctx, st, draft, labels, notes)


def _research(ctx: RunContext, plan: ResearchPlan, st: RunState) -> None:
    queries = list(plan.queries)
    for rnd in range(1, ctx.limits.max_rounds + 1):
        done = {q for q, n in st.notes.items() if not n.failed}
        for batch in planner.batches(plan.model_copy(update={"queries": queries}), done):
            ctx.check_cancel()
            _run_batch(ctx, batch, rnd, st)
        pending = [n for n in st.notes.values() if n.failed or not n.sufficient]
        if rnd == ctx.limits.max_rounds or not pending:
            break
        # A gap naming something neither the question, the plan nor an on-topic finding names
        # is about a passage that only looked alike (a gap naming another river, from a search
        # for the river asked about): researching it reads more of the same.
        known = names(st.question).union(
            *(names(q.query) for q in plan.queries),
            *(names(f.claim) for n in st.notes.values() for f in n.on_topic()),
        )
        followups: list[ResearchQuery] = []
        for n in pending:
            if n.failed:  # only failed queries run again, under a fresh id
                followups.append(ResearchQuery(id=f"{n.query_id[:5]}r{rnd}", query=n.query))
            for gap in n.gaps:
                text = gap_query(gap)
                if len(text) >= 3 and text.lower() != n.query.lower() and names(text) <= known:
                    followups.append(
                        ResearchQuery(id=f"g{rnd}{len(followups) + 1}", query=text[:300])
                    )
        followups = followups[:MAX_FOLLOWUPS]
        if not followups:
            break
        # A gap has no dependency to take its subject from: "Why is operating margin not a
        # useful metric for a company like this?" reads every company's filings.
        followups = planner.keep_subjects(
            plan.model_copy(update={"queries": followups}), st.question
        ).queries
        ctx.log.append(
            ctx.task, ctx.run, "followups", f"followups/r{rnd}", [q.model_dump() for q in followups]
        )
        ctx.emit("stage", stage="follow-up", text=f"round {rnd + 1}: {len(followups)} queries")
        queries = followups


def _seeded(ctx: RunContext, seed: ResearchNotes) -> ResearchNotes:
    """``seed`` as this run read it: each passage fetched again (a citation is backed by a
    fetch of the current run), the findings whose passages all were, and nothing left to do."""
    read = []
    for ev_id in seed.fetched_ids:
        fetch = functools.partial(ctx.tools.fetch_evidence, ev_id)
        res = ctx.tool(f"seed/fetch/{ev_id}", "fetch_evidence", fetch, cache=False)
        if ctx.fetched.get(ev_id) is not None and not res.error:
            read.append(ev_id)
    kept = [f for f in seed.findings if f.evidence_ids and set(f.evidence_ids) <= set(read)]
    return seed.model_copy(update={"fetched_ids": read, "findings": kept, "sufficient": True})


def _run_batch(ctx: RunContext, batch: list[ResearchQuery], rnd: int, st: RunState) -> None:
    batch = [steps.resolve(q, st.notes, ctx.fetched.get) for q in batch]  # "#q1" -> its answer

    # What a dependent query builds on: only the on-topic findings of the queries it depends
    # on (a neighbour's finding about another river steers the next query's searches to rivers
    # instead of to the country the river asked about is in).
    def deps(q: ResearchQuery) -> list[ResearchNotes]:
        return [st.notes[d] for d in q.depends_on if d in st.notes]

    def context_for(q: ResearchQuery) -> str:
        return "\n".join(n.compressed(600, on_topic=True) for n in deps(q))

    def bridge_for(q: ResearchQuery) -> str:
        # A dependency's own answer names the next step's subject more sharply than its
        # findings, which also describe the passage around it.
        return " ".join(
            n.answer if steps.held(n, ctx.fetched.get) else " ".join(f.claim for f in n.on_topic())
            for n in deps(q)
        )

    def carried(q: ResearchQuery) -> list[str]:
        # Passages the notes carry: read again only last. One its dependency read but cited
        # for nothing is read like any other: its finding may be about a passage that only
        # looked alike, and the subject's own passage is then still to be read.
        return [i for n in deps(q) for f in n.on_topic() for i in f.evidence_ids]

    def focus_for(q: ResearchQuery) -> str:
        before = " ".join(n.query for n in deps(q))
        return focus_terms(q.query, before, bridge_for(q)) if before else ""

    workers = min(ctx.limits.max_workers, len(batch))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="researcher") as pool:
        futures = {
            q.id: pool.submit(
                run_worker,
                ctx,
                q,
                f"r{rnd}/{q.id}",
                context_for(q),
                bridge_for(q),
                focus_for(q),
                carried(q),
                steps.known_lines(deps(q), ctx.fetched.get),
            )
            for q in batch
        }
        stop: SourcebookError | None = None
        for q in batch:
            try:
                st.notes[q.id] = futures[q.id].result()
            except (CancelledError, RecordingFailed) as exc:
                if stop is None or isinstance(exc, RecordingFailed):
                    stop = exc
                ctx.cancel.set()  # the other workers stop at their next step
            except SourcebookError as exc:
                logger.warning("worker %s failed: %s", q.id, exc)
                ctx.flags.add("failed_workers", f"{q.id}: {exc}")
                st.notes[q.id] = ResearchNotes(
                    query_id=q.id,
                    query=q.query,
                    failed=True,
                    gaps=[q.query],
                    stop_reason=f"failed: {exc}",
                )
        if stop is not None:
            raise stop
