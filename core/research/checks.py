"""The checks a research draft goes through before it is a report, in order: citations resolved,
fetched where they can be and repaired once by the writer (what still fails is removed);
the post-draft stages (:mod:`core.research.pipeline`: narrowing and completing citations, the
claim and support checks, an answer whose check fails marked not verified, answer consistency,
the claims the checks find unstated removed);
flagged claims marked; links sanitised; citations renumbered with a Sources list; the status.

A run's draft comes here from :mod:`core.research.run`; Ask's answers through
:func:`check_draft`. Threading: called on the run's thread, after its workers are done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from core.errors import SourcebookError
from core.evidence import Evidence
from core.research import chain, drafts, support, writer
from core.research.arithmetic import calculations, is_change
from core.research.citations import (
    CitationChecker,
    bracket_labels,
    check_claims,
    citation_records,
    complete_citations,
    excerpt,
    mark_flagged,
    narrow_citations,
    without_unstated,
)
from core.research.consistency import other_answers
from core.research.context import RunContext
from core.research.pipeline import apply, changes, record, stage_on
from core.research.prompts import fit_messages
from core.research.sanitize import renumber, sanitize_links, sources_section
from core.research.schemas import (
    UNVERIFIED_NOTE,
    CitationRecord,
    FlaggedClaim,
    RemovedCitation,
    Report,
    ResearchNotes,
    ResearchPlan,
    RunStatus,
)
from models.llm import LLM, ChatMessage


class RunState:
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


def finish_draft(
    ctx: RunContext, st: RunState, draft: str, labels: dict[str, str], notes: list[ResearchNotes]
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

    read: dict[str, Evidence | None] = {}

    def as_read(ev_id: str) -> Evidence | None:
        """The passage as the writer read it (:func:`writer.with_tables`): a table row beside
        its periods, also those of a header the passage before it holds, so a claim naming a
        figure's year is checked against the table it is in, not the passage's cut alone."""
        if ev_id not in read:
            ev = fetched_or_span(ev_id)
            read[ev_id] = None if ev is None else writer.with_tables(ctx, [ev])[0]
        return read[ev_id]

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
        lambda t: narrow_citations(t, as_read, keep_lines=writer.ANSWER_MARK),
    )
    # passages the writer was shown first, then the rest the run fetched, as the checker allows
    citable = [i for i in [*labels.values(), *ctx.fetched.ids()] if checker.resolve(i)[0]]
    assembled: dict[str, list[str]] = {}
    if stage_on(ctx, "complete_citations"):
        before = text
        links = set(chain.chain_lines(text))
        text, assembled = complete_citations(
            text, as_read, citable, st.question, keep=links.__contains__
        )
        record(ctx, "complete_citations", changes(before, text))
    st.removed = removed
    if removed:
        st.reasons.append(f"{len(removed)} citation(s) could not be verified and were removed.")
    st.flagged = []
    if stage_on(ctx, "claim_check"):
        st.flagged = check_claims(
            text,
            as_read,
            lambda xs: ctx.library.embedder.embed(xs),
            st.question,
            answer_lines=writer.ANSWER_MARK,
            assembled=assembled,
        )
        record(ctx, "claim_check", {"flagged": [excerpt(f.sentence) for f in st.flagged]})
    if stage_on(ctx, "answer_subject"):
        mark = writer.ANSWER_MARK
        loose = chain.unanchored(text, st.question, as_read, mark)
        tie = chain.anchoring(text, st.question, as_read, citable, mark) if loose else None
        if tie is not None and chain.chain_lines(text):
            # cited where the reader sees it; an answer without a chain keeps its citations,
            # or it would join documents with no chain to carry it and go unjudged
            text = chain.cite_on_answer_line(text, tie, mark)
        elif loose is not None and tie is None:
            st.flagged.append(loose)
        record(ctx, "answer_subject", {"flagged": loose is not None and tie is None, "tie": tie})
    if stage_on(ctx, "support_check"):
        st.flagged += _support_flags(ctx, st, text, as_read)
    if stage_on(ctx, "answer_kind"):
        st.flagged += _kind_flags(ctx, st, text)
    if stage_on(ctx, "worked_change"):
        st.flagged += _change_flags(ctx, st, text)
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
    if stage_on(ctx, "unstated_claims"):
        before = text
        text, st.flagged = without_unstated(text, st.flagged, writer.ANSWER_MARK)
        if text != before:
            left = chain.heads_kept(text, (f.sentence for f in st.flagged))
            text = drafts.numbered_from_one(left)
        record(ctx, "unstated_claims", changes(before, text))
    if st.answer_withheld and stage_on(ctx, "asked_read"):
        before = text
        said = chain.asked_read(text, st.question, as_read, citable)
        text = chain.with_asked_read(text, said, writer.ANSWER_MARK)
        record(ctx, "asked_read", changes(before, text))
    if st.answer_withheld:
        st.reasons.append(
            "The answer found is not supported by the passages it cites, or is not the kind of "
            "thing the question asks for, so it is marked not verified; the report gives what "
            "the sources do state."
        )
    body_flags = [f for f in st.flagged if f.sentence in text]
    dropped = [f for f in st.flagged if f.removed]
    if dropped:
        st.reasons.append(
            f"{len(dropped)} claim(s) their cited passages do not state were removed (listed "
            "under Flagged claims)."
        )
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
    st = RunState(ctx.task, question)
    finish_draft(ctx, st, draft, labels, [])
    return st.report()


def _support_flags(
    ctx: RunContext, st: RunState, text: str, get: Callable[[str], Evidence | None]
) -> list[FlaggedClaim]:
    """The claims the model judges its passages do not state (:mod:`core.research.support`),
    among those the lexical checks let stand; the judgements are logged."""
    role, llm = _checker(ctx)

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        if answer is not None:
            values = {"passages": passages, "question": st.question, "answer": answer}
            return fit_messages(llm, "support_answer", values, {"passages": "head"}, 1)
        values = {"passages": passages, "claim": claim}
        return fit_messages(llm, "support", values, {"passages": "head"}, 1)

    mark = writer.ANSWER_MARK
    chained = stage_on(ctx, "chain_support") and bool(chain.chain_lines(text))
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
            if chained
            else None
        ),
        chain_links=chain.link_sentences(text) if chained else [],
        joins_need_chain=stage_on(ctx, "chain_support"),
        worked_needs_chain=stage_on(ctx, "chain_support"),
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
            "answer_unjudged": any(bool(j.unjudged) for j in judged),
        },
    )
    return flagged


def _checker(ctx: RunContext) -> tuple[str, LLM]:
    """The role that judges claims, and its model: the checker's, else the writer's."""
    role = "checker" if "checker" in ctx.models else "writer"
    return role, ctx.model(role)


def _kind_flags(ctx: RunContext, st: RunState, text: str) -> list[FlaggedClaim]:
    """The answer line, flagged when the model judges it not the kind of thing the question
    asks for (:func:`core.research.support.kind_flag`); not asked when a check flagged it."""
    sentence = support.answer_line_sentence(text, writer.ANSWER_MARK)
    if sentence is None or any(f.sentence == sentence for f in st.flagged):
        record(ctx, "answer_kind", {"p_yes": None, "flagged": False})  # nothing to ask
        return []
    role, llm = _checker(ctx)
    flag, p = support.kind_flag(
        sentence,
        writer.ANSWER_MARK,
        lambda key, msgs: ctx.model_choose(role, key, msgs, support.KIND_OPTIONS)[0],
        lambda answer: fit_messages(
            llm, "answer_kind", {"question": st.question, "answer": answer}, {}, 1
        ),
    )
    record(ctx, "answer_kind", {"p_yes": round(p, 3), "flagged": flag is not None})
    return [flag] if flag else []


def _change_flags(ctx: RunContext, st: RunState, text: str) -> list[FlaggedClaim]:
    """The answer line, flagged when it is worked out as the relative change of a figure
    (:func:`core.research.arithmetic.is_change`) and the model judges that the question asks
    for something else (:func:`core.research.support.change_flag`); not asked when a check
    flagged it, or when its calculation is not a change."""
    sentence = support.answer_line_sentence(text, writer.ANSWER_MARK)
    held = []  # its calculations that hold, as the support check takes a worked answer
    if sentence is not None and not any(f.sentence == sentence for f in st.flagged):
        held = [c for c in calculations(sentence) if c.holds]
    if sentence is None or not held or not is_change(held[0].text):
        record(ctx, "worked_change", {"p_change": None, "flagged": False})  # nothing to ask
        return []
    role, llm = _checker(ctx)
    flag, p = support.change_flag(
        sentence,
        lambda key, msgs: ctx.model_choose(role, key, msgs, support.CHANGE_OPTIONS)[0],
        fit_messages(llm, "asks_change", {"question": st.question}, {}, 1),
    )
    record(ctx, "worked_change", {"p_change": round(p, 3), "flagged": flag is not None})
    return [flag] if flag else []


def withhold_unsupported_answer(text: str, flagged: list[FlaggedClaim]) -> tuple[str, bool]:
    """``text`` with an answer line that a flag concerns ending in ``UNVERIFIED_NOTE``, and
    whether it does: an answer is stated only when its check passes. One that fails stays in
    view, marked ⚠ and said in words to be unverified: the reader learns what the sources
    point to without being told it is established (a bare "no answer" hides the lead, and the
    chain under it then reads as what the sources do state)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(writer.ANSWER_MARK):
            if any(f.sentence in line for f in flagged):
                lines[i] = f"{line.rstrip()} {UNVERIFIED_NOTE}"
                marked = "\n".join(lines)
                return chain.withheld_head(marked, (f.sentence for f in flagged)), True
            break
    return text, False


def _answer_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.lstrip().startswith(writer.ANSWER_MARK)), "")


def _records(
    ctx: RunContext, numbers: dict[str, int], get: Callable[[str], Evidence | None]
) -> list[CitationRecord]:
    evs = {i: ev for i, ev in ((i, get(i)) for i in numbers) if ev is not None}
    return citation_records(evs, numbers, ctx.library.store.get_document)


def _status(ctx: RunContext, st: RunState, notes: list[ResearchNotes]) -> RunStatus:
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
    if st.answer_withheld:  # first: no verified answer is what the reader must see
        return "insufficient_evidence"
    if budget:
        return "budget_exhausted"
    if errors:
        return "partial_retrieval"
    writer_fallback = any(r.startswith("The writer cited nothing") for r in st.reasons)
    if st.removed or st.flagged or writer_fallback:
        return "partial"
    return "answered"
