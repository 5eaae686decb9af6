"""One research run: question in, cited report out. See ARCHITECTURE.md, "Research".

Stages: (optional) routing -> plan (user's, planner's, or the recorded fallback) -> researcher
workers in dependency batches, concurrent up to ``max_workers`` -> sufficiency check and
follow-up rounds for gaps -> short cited answer -> writer (streamed) -> citation check with one
repair pass -> citation completion -> claim-support check -> sanitize and renumber ->
``Report`` with a status.

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
from core.library import Evidence, Library
from core.research import chain, planner, support, writer
from core.research.citations import (
    CitationChecker,
    bracket_labels,
    check_claims,
    citation_records,
    citation_tokens,
    cite_quotations,
    complete_citations,
    excerpt,
    mark_flagged,
    narrow_citations,
)
from core.research.consistency import other_answers
from core.research.context import EventFn, RunContext, StopSignal
from core.research.pipeline import apply, changes, record, stage_on
from core.research.prompts import fit_messages
from core.research.researcher import run_worker
from core.research.sanitize import renumber, sanitize_links, sources_section
from core.research.schemas import (
    WITHHELD_ANSWER,
    Boundary,
    CitationRecord,
    FlaggedClaim,
    RemovedCitation,
    Report,
    ResearchLimits,
    ResearchNotes,
    ResearchPlan,
    ResearchQuery,
    RunStatus,
)
from core.research.tools import Fetched, Scope, Tools
from core.research.trail import trail_lines, trail_section
from core.research.words import focus_terms, gap_query, names
from core.tasks import RecordingFailed, TaskLease, TaskLog
from models.llm import LLM, ChatMessage

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
            {"boundary": req.boundary.model_dump(mode="json"), "limits": req.limits.model_dump()},
        )
    except RecordingFailed as exc:
        return Report(
            task=task, question=req.question, status="recording_failed", status_reasons=[str(exc)]
        )
    ctx = _context(library, log, task, run, models, req, stop, on_event)
    state = _State(task=task, question=req.question)
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


class _State:
    """What the run has produced so far (kept when it is cancelled midway)."""

    def __init__(self, task: str, question: str) -> None:
        self.task = task
        self.question = question
        self.status: RunStatus | None = None
        self.reasons: list[str] = []
        self.plan: ResearchPlan | None = None
        self.fallback = False
        self.notes: dict[str, ResearchNotes] = {}
        self.markdown = ""
        self.citations: list[CitationRecord] = []
        self.removed: list[RemovedCitation] = []
        self.flagged: list[FlaggedClaim] = []
        self.answer_withheld = False  # the answer line's support check failed

    def report(self) -> Report:
        return Report(
            task=self.task,
            question=self.question,
            status=self.status or "partial",
            status_reasons=self.reasons,
            markdown=self.markdown,
            citations=self.citations,
            removed_citations=self.removed,
            flagged_claims=self.flagged,
            plan=self.plan,
            plan_fallback=self.fallback,
            notes=list(self.notes.values()),
        )


def _run(
    ctx: RunContext, req: ResearchRequest, st: _State, on_token: Callable[[str], None] | None
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
        if stage_on(ctx, "short_answer"):
            answer = writer.short_answer(ctx, req.question, st.plan, evidence, labels)
            if answer and on_token is not None:
                on_token(answer + "\n\n")
        draft = writer.write(ctx, req.question, st.plan, notes, evidence, labels, on_token, answer)
        draft = bracket_labels(draft, labels)
        by_id = {ev.evidence_id: ev.text for ev in evidence}
        quoted = {k: by_id[v] for k, v in labels.items()}
        draft = apply(ctx, "cite_quotations", draft, lambda d: cite_quotations(d, quoted))
        draft = apply(ctx, "method_talk", draft, writer.without_method_talk)
        fell_back = False
        if not citation_tokens(draft):
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
            body = apply(ctx, "answer_copy", draft, lambda d: writer.without_answer_copy(d, answer))
            draft = f"{answer}\n\n{body}"
        if stage_on(ctx, "trail") and not fell_back:
            cited = {labels.get(t, t).lower() for t in citation_tokens(draft)}
            lines = trail_lines(
                req.question, notes, ctx.fetched.get, ctx.library.embedder.embed, draft, cited
            )
            if lines:
                lines = ctx.log.append(ctx.task, ctx.run, "trail", "trail", lines)
                draft = f"{draft.rstrip()}\n\n{trail_section(lines)}"
    ctx.emit("stage", stage="checking citations")
    with ctx.log.span(ctx.task, ctx.run, "stage", "citations"):
        _finish(ctx, st, draft, labels, notes)


def _research(ctx: RunContext, plan: ResearchPlan, st: _State) -> None:
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


def _run_batch(ctx: RunContext, batch: list[ResearchQuery], rnd: int, st: _State) -> None:
    # What a dependent query builds on: only the on-topic findings of the queries it depends
    # on (a neighbour's finding about another river steers the next query's searches to rivers
    # instead of to the country the river asked about is in).
    def deps(q: ResearchQuery) -> list[ResearchNotes]:
        return [st.notes[d] for d in q.depends_on if d in st.notes]

    def context_for(q: ResearchQuery) -> str:
        return "\n".join(n.compressed(600, on_topic=True) for n in deps(q))

    def bridge_for(q: ResearchQuery) -> str:
        return " ".join(f.claim for n in deps(q) for f in n.on_topic())

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


def _finish(
    ctx: RunContext, st: _State, draft: str, labels: dict[str, str], notes: list[ResearchNotes]
) -> None:
    def lookup(ev_id: str) -> Evidence | None:
        try:
            return ctx.library.evidence(ev_id)
        except SourcebookError:
            return None

    def fetched_or_span(ev_id: str) -> Evidence | None:
        ev = ctx.fetched.get(ev_id)
        if ev is None and "#" in ev_id and ctx.fetched.get(ev_id.split("#")[0]) is not None:
            ev = lookup(ev_id)
        return ev

    checker = CitationChecker(labels, fetched_or_span, lookup, ctx.scope.allows)
    invalid = checker.invalid(draft)
    if invalid:
        # Repair: ids that exist inside the boundary are fetched; the rest go back to the writer.
        for tok, _reason in invalid:
            ev_id = checker.fetchable(tok)
            if ev_id is not None:
                ctx.tool(
                    f"repair/fetch/{ev_id}",
                    "fetch_evidence",
                    functools.partial(ctx.tools.fetch_evidence, ev_id),
                    cache=False,
                )
        still = checker.invalid(draft)
        if still:
            ctx.emit("stage", stage="repairing citations", text=", ".join(t for t, _ in still))
            draft = bracket_labels(writer.repair(ctx, draft, [t for t, _ in still], labels), labels)
    text, removed = checker.canonicalize(draft)
    text = apply(
        ctx,
        "narrow_citations",
        text,
        lambda t: narrow_citations(t, fetched_or_span, keep_lines=writer.ANSWER_MARK),
    )
    # passages the writer was shown first, then the rest the run fetched, as the checker allows
    citable = [i for i in [*labels.values(), *ctx.fetched.ids()] if checker.resolve(i)[0]]
    assembled: dict[str, list[str]] = {}
    if stage_on(ctx, "complete_citations"):
        before = text
        text, assembled = complete_citations(text, fetched_or_span, citable, st.question)
        record(ctx, "complete_citations", changes(before, text))
    st.removed = removed
    if removed:
        st.reasons.append(f"{len(removed)} citation(s) could not be verified and were removed.")
    st.flagged = []
    if stage_on(ctx, "claim_check"):
        st.flagged = check_claims(
            text,
            fetched_or_span,
            lambda xs: ctx.library.embedder.embed(xs),
            st.question,
            answer_lines=writer.ANSWER_MARK,
            assembled=assembled,
        )
        record(ctx, "claim_check", {"flagged": [excerpt(f.sentence) for f in st.flagged]})
    if stage_on(ctx, "support_check"):
        st.flagged += _support_flags(ctx, st, text, fetched_or_span)
    if stage_on(ctx, "withhold_answer"):
        text, st.answer_withheld = withhold_unsupported_answer(text, st.flagged)
        record(ctx, "withhold_answer", {"withheld": st.answer_withheld})
    if stage_on(ctx, "answer_consistency"):
        others = other_answers(
            text,
            st.question,
            writer.ANSWER_MARK,
            withheld=st.answer_withheld,
            skip={f.sentence for f in st.flagged},
        )
        st.flagged += others
        record(ctx, "answer_consistency", {"flagged": [excerpt(f.sentence) for f in others]})
    if st.answer_withheld:
        st.reasons.append(
            "The answer the writer gave is not supported by the passages it cites, so it is "
            "not stated; the report gives what the sources do state."
        )
    body_flags = [f for f in st.flagged if f.sentence in text]
    if body_flags:
        st.reasons.append(
            f"{len(body_flags)} claim(s) are uncited or not clearly supported by their citation "
            "(marked ⚠)."
        )
    text = mark_flagged(sanitize_links(text), st.flagged)

    docs: dict[str, str] = {}

    def doc_of(ev_id: str) -> str:
        ev = fetched_or_span(ev_id)
        docs[ev_id] = ev.doc_id if ev else ev_id
        return docs[ev_id]

    body, numbers = renumber(text, doc_of)
    st.citations = _records(ctx, numbers, fetched_or_span)
    if st.flagged:
        body = (
            body.rstrip()
            + "\n\n## Flagged claims\n\n"
            + "\n".join(f"- ⚠ “{excerpt(f.sentence)}”: {f.reason}" for f in st.flagged)
            + "\n"
        )
    st.markdown = body.rstrip() + "\n\n" + (sources_section(st.citations) if st.citations else "")
    st.status = _status(ctx, st, notes)


def check_draft(ctx: RunContext, question: str, draft: str, labels: dict[str, str]) -> Report:
    """``draft`` (labels or ids cited) through the checks of a run's draft, as the report of
    task ``ctx.task``: citation check and repair, the post-draft stages, sanitize, renumber,
    status. For drafts written outside a run (Ask's answers)."""
    st = _State(ctx.task, question)
    _finish(ctx, st, draft, labels, [])
    return st.report()


def _support_flags(
    ctx: RunContext, st: _State, text: str, get: Callable[[str], Evidence | None]
) -> list[FlaggedClaim]:
    """The claims the model judges its passages do not state (:mod:`core.research.support`),
    among those the lexical checks let stand; the judgements are logged."""
    role = "checker" if "checker" in ctx.models else "writer"  # the writer's model by default
    llm = ctx.model(role)

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        if answer is not None:
            values = {"passages": passages, "question": st.question, "answer": answer}
            return fit_messages(llm, "support_answer", values, {"passages": "head"}, 1)
        values = {"passages": passages, "claim": claim}
        return fit_messages(llm, "support", values, {"passages": "head"}, 1)

    mark = writer.ANSWER_MARK
    judged = support.judge_claims(
        text,
        get,
        lambda key, msgs: ctx.model_choose(role, key, msgs, support.OPTIONS)[0],
        messages,
        question=st.question,
        answer_mark=writer.ANSWER_MARK,
        skip={f.sentence for f in st.flagged},
        embed=ctx.library.embedder.embed,
        on_chain=(
            (lambda held: chain.carries(_answer_line(text), text, st.question, held, mark))
            if stage_on(ctx, "chain_support") and chain.chain_lines(text)
            else None
        ),
    )
    flagged = support.flags(judged)
    record(
        ctx,
        "support_check",
        {
            "judged": len(judged),
            "flagged": [excerpt(f.sentence) for f in flagged],
            "support": [round(j.support, 3) for j in judged],
            "answer_by_chain": any(j.by_chain for j in judged),
        },
    )
    return flagged


def withhold_unsupported_answer(text: str, flagged: list[FlaggedClaim]) -> tuple[str, bool]:
    """``text`` with an answer line that a flag concerns replaced by ``WITHHELD_ANSWER``, and
    whether it was: an answer is stated only when its check passes; the flagged answer stays
    quoted, with its reason, in the Flagged claims list."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(writer.ANSWER_MARK):
            if any(f.sentence in line for f in flagged):
                lines[i] = WITHHELD_ANSWER
                return chain.withheld_head("\n".join(lines)), True
            break
    return text, False


def _answer_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.lstrip().startswith(writer.ANSWER_MARK)), "")


def _records(
    ctx: RunContext, numbers: dict[str, int], get: Callable[[str], Evidence | None]
) -> list[CitationRecord]:
    evs = {i: ev for i, ev in ((i, get(i)) for i in numbers) if ev is not None}
    return citation_records(evs, numbers, ctx.library.store.get_document)


def _status(ctx: RunContext, st: _State, notes: list[ResearchNotes]) -> RunStatus:
    if not st.citations:
        st.reasons.append("The report has no verified citation.")
        return "insufficient_evidence"
    budget = [
        n for n in notes if n.stop_reason in ("max_steps", "max_tool_calls") and not n.sufficient
    ]
    if budget:
        st.reasons.append(
            "A researcher ran out of its budget: "
            + ", ".join(f"{n.query_id} ({n.stop_reason})" for n in budget)
        )
    errors = (
        [e for n in notes for e in n.tool_errors] + ctx.flags.tool_errors + ctx.flags.failed_workers
    )
    if errors:
        st.reasons.append("Some retrieval failed: " + "; ".join(dict.fromkeys(errors))[:500])
    if st.answer_withheld:  # first: no answer is what the reader must see; the why follows
        return "insufficient_evidence"
    if budget:
        return "budget_exhausted"
    if errors:
        return "partial_retrieval"
    writer_fallback = any(r.startswith("The writer cited nothing") for r in st.reasons)
    if st.removed or st.flagged or writer_fallback:
        return "partial"
    return "answered"
