"""Ask: a cited answer in seconds, and follow-up questions. See ARCHITECTURE.md, "Ask".

One turn of a conversation (:mod:`core.research.conversation` keeps them):

1. one hybrid+graph search inside the chosen sources (``discover_evidence``, the research
   tool, so the boundary is the same hard filter); a follow-up searches for its question with
   the previous answer, which names what "he" or "it" refers to;
2. the candidates are the new hits and the passages the conversation read before; the model is
   shown their :data:`ASK_SENTENCES` sentences most like the question (the short-answer step's
   view, :func:`core.research.writer.key_sentences`), under labels ``[E1]`` that stay the same
   for the whole conversation. Every passage shown, and every passage read in earlier turns, is
   fetched in this turn, so all of them are citable and nothing else is;
3. one model call (``resources/prompts/ask.jinja``, after the earlier turns as chat messages,
   so a model that keeps its states continues from the last turn instead of reading it again),
   streamed as it is written; none when the program reads the answer off the statement rows
   shown (stage ``row_lookup``: one line item in one year, its change, a ratio, a rise);
4. the checks of a research run's draft, by the run's own code (citation check and repair,
   narrowing, claim and support checks, an unsupported answer withheld, sanitize, renumber,
   status): the answer is asserted only when its checks pass, otherwise the report says what
   the sources do state.

Why a follow-up always searches again: a search costs milliseconds beside a model call of
seconds, and whether what was read suffices is not known before the model reads it. The
earlier passages stay candidates beside the new hits and compete by one ranking, so a follow-up
about the same passage reuses it and one about something new brings the new passage in.

Why plain text and not a schema with an ``enum`` of labels: the model protocol streams plain
text and constrains JSON only as a whole, and the answer must appear as it is written. The
labels are checked after instead: a citation of anything not shown or read in the
conversation is removed (after the one repair pass) and the claim it carried is flagged.

Threading: one turn at a time per conversation (it holds the conversation's lease); the
context's parts are those of a research run (see :mod:`core.research.context`).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Mapping

from pydantic import BaseModel, Field

from core.errors import CancelledError, ModelError, SourcebookError, translate_errors
from core.evidence import Evidence
from core.library import Library
from core.research import checks
from core.research import run as research_run
from core.research.chain import CHAIN_HEAD
from core.research.citations import bracket_labels, cite_quotations, states_absence
from core.research.context import EventFn, RunContext, StopSignal
from core.research.conversation import (
    CONVERSATION,
    MAX_CARRIED,
    MAX_HISTORY,
    TURN,
    AskTurn,
    Conversation,
    answer_words,
    conversation_report,
    turn_task,
)
from core.research.drafts import (
    citations_joined,
    without_method_talk,
    without_passage_talk,
    without_prompt_echo,
    writer_stop,
)
from core.research.pipeline import apply, stage_on
from core.research.prompts import answer_budget, fit_messages
from core.research.schemas import Boundary, Report, ResearchLimits
from core.research.tools import Fetched, Scope, Tools
from core.research.writer import ANSWER_MARK, key_sentences, row_answer, with_tables
from core.tasks import RecordingFailed, TaskLease, TaskLog
from models.llm import LLM, ChatMessage

logger = logging.getLogger(__name__)

ROLE = "writer"  # Ask writes the answer: the writer's model (the default's when none is set)
ASK_SENTENCES = 10  # sentences shown, across the passages
ASK_MAX_TOKENS = 200  # an answer line and up to three short sentences
ASK_MAX_LINES = 4  # ... on their own lines; a fifth is cut (a small model pasting passages)
#: What the next turns read as the answer of a turn whose answer was not asserted: the model
#: must not build on an answer the checks rejected.
NO_ANSWER_REPLY = "The passages given did not establish an answer to that question."
# what opens the model's answer line: "**Answer:**", "Final answer: - ", not the answer's own
# "$" or minus sign
_LEAD = re.compile(r"^\W*(?:final\s+|short\s+)?answer\s*\W*:[\s*_]*(?:-\s+)?", re.IGNORECASE)
# the prompt's "Line 1:" copied, or the line numbered as a list ("1. 1921 [E2]"); not a number
# that is the answer ("1.5 million [E2]")
_LINE_MARK = re.compile(r"^(?:line\s*1\s*:|1[.)](?=\s+\S))\s*", re.IGNORECASE)


class AskRequest(BaseModel):
    """One question of a conversation."""

    question: str = Field(..., min_length=3)
    conversation: str | None = Field(None, description="Its name; default: from the question.")
    boundary: Boundary | None = Field(
        None,
        description="The sources; None: the conversation's (the whole library for a new one).",
    )
    limits: ResearchLimits = Field(default_factory=ResearchLimits)
    fresh: bool = Field(False, description="Ask again when the last turn asked this already.")


def conversation_name(question: str) -> str:
    return f"ask-{research_run.task_name(question)}"


def new_conversation_name(log: TaskLog, question: str) -> str:
    """The name of a new conversation opened by ``question``: the question's own name, as a
    research task's is, so asking it again resumes or returns that conversation; but when a
    conversation of that name went on to other questions, the next free ``NAME-2``, ``NAME-3``:
    a new conversation never continues an old one."""
    base = conversation_name(question)
    number = 1
    while True:
        name = base if number == 1 else f"{base}-{number}"
        asked = set(Conversation.load(log, name).started.values())
        if not asked or asked == {question}:
            return name
        number += 1


def ask_question(
    library: Library,
    log: TaskLog,
    models: Mapping[str, LLM],
    req: AskRequest,
    *,
    cancel: threading.Event | None = None,
    on_event: EventFn | None = None,
    on_token: Callable[[str], None] | None = None,
) -> Report:
    """Answer ``req.question`` in its conversation (or resume the turn that asked it), and
    return the turn's checked report. Never raises for a turn that started (the status says
    what happened); raises before it starts for sources that do not exist and, with
    ``TaskBusyError``, when another live process holds the conversation."""
    name = req.conversation or new_conversation_name(log, req.question)
    stop = StopSignal(cancel)
    try:
        lease = log.acquire(name, on_lost=stop.set)
    except RecordingFailed as exc:
        return _stopped(name, req.question, "recording_failed", str(exc))
    try:
        return _leased(library, log, models, req, name, stop, lease, on_event, on_token)
    finally:
        lease.release()


def _stopped(task: str, question: str, status: str, reason: str) -> Report:
    return Report.model_validate(
        {"task": task, "question": question, "status": status, "status_reasons": [reason]}
    )


def _leased(
    library: Library,
    log: TaskLog,
    models: Mapping[str, LLM],
    req: AskRequest,
    name: str,
    stop: StopSignal,
    lease: TaskLease,
    on_event: EventFn | None,
    on_token: Callable[[str], None] | None,
) -> Report:
    conv = Conversation.load(log, name)
    pending = conv.pending()
    last = conv.last
    if last is not None and pending is None and last.question == req.question and not req.fresh:
        return last.report  # asked just now: the saved answer, as a finished research task
    number = pending[0] if pending and pending[1] == req.question else conv.next_number
    chosen = req.boundary or conv.boundary or Boundary()
    boundary = chosen.model_copy(update={"web": False})  # Ask reads the library only
    scope = Scope(library, boundary)  # unknown sources fail here, before anything is written
    params = {
        "kind": CONVERSATION,
        "boundary": boundary.model_dump(mode="json"),
        "limits": req.limits.model_dump(),
    }
    task = turn_task(name, number)
    try:
        conv_run = log.begin(name, req.question, params)
        start = {"number": number, "question": req.question, "boundary": params["boundary"]}
        log.append(name, conv_run, "ask_question", f"turn/{number}", start)
        run = log.begin(task, req.question, {**params, "kind": TURN, "conversation": name})
    except RecordingFailed as exc:
        return _stopped(task, req.question, "recording_failed", str(exc))
    fetched = Fetched()
    tools = Tools(library, scope, req.limits, log, task, run, fetched)
    ctx = RunContext(
        library, log, task, run, models, req.limits, scope, tools, fetched, stop, on_event
    )
    turn: AskTurn | None = None
    try:
        with translate_errors():
            turn = answer_turn(ctx, conv, number, req.question, on_token)
        report = turn.report
    except CancelledError:
        report = _stopped(task, req.question, "cancelled", "Cancelled; ask again to continue.")
    except RecordingFailed as exc:
        report = _stopped(task, req.question, "recording_failed", str(exc))
    except SourcebookError as exc:
        logger.warning("ask %s failed: %s", task, exc)
        report = _stopped(task, req.question, "partial", f"The answer stopped: {exc}")
    if lease.lost.is_set():  # the conversation's record is the new holder's to write
        report.status = "cancelled"
        report.status_reasons.append("Another process took this conversation over.")
        return report
    try:
        log.finish(task, report.status, report.model_dump(mode="json"))
        if turn is not None:
            log.append(name, conv_run, "ask_turn", f"turn/{number}/done", turn.model_dump())
            conv.turns.append(turn)
        whole = conversation_report(name, conv.turns) if conv.turns else None
        log.finish(name, report.status, whole.model_dump(mode="json") if whole else None)
    except RecordingFailed as exc:
        report.status = "recording_failed"
        report.status_reasons.append(str(exc))
    ctx.emit("stage", stage="done", text=report.status)
    return report


def answer_turn(
    ctx: RunContext,
    conv: Conversation,
    number: int,
    question: str,
    on_token: Callable[[str], None] | None = None,
) -> AskTurn:
    """Search, read, answer (streamed to ``on_token``) and check one turn (module docstring)."""
    earlier = conv.last
    query = question if earlier is None else f"{question} {earlier.answer or earlier.question}"
    ctx.emit("stage", stage="searching")
    with ctx.log.span(ctx.task, ctx.run, "stage", "search"):
        shown, sentences = _read(ctx, conv, question, query)
    labels = conv.labels
    by_id = {v: k for k, v in labels.items()}
    for ev in shown:
        if ev.evidence_id not in by_id:
            by_id[ev.evidence_id] = label = f"E{len(labels) + 1}"
            labels[label] = ev.evidence_id
    read = [ev.evidence_id for ev in shown]
    if not shown:
        report = Report(
            task=ctx.task,
            question=question,
            status="insufficient_evidence",
            status_reasons=["No passage inside the chosen sources matches this question."],
            markdown="The chosen sources do not contain evidence that answers this question.\n",
        )
        return AskTurn(
            number=number, question=question, task=ctx.task, status=report.status, report=report
        )
    block = "\n\n".join(
        f"[{by_id[ev.evidence_id]}] {ev.title}\n" + " … ".join(sentences[ev.evidence_id])
        for ev in shown
    )
    messages = _messages(ctx.model(ROLE), conv, question, block)
    ctx.emit("stage", stage="answering", text=f"{len(shown)} passages")
    with ctx.log.span(ctx.task, ctx.run, "stage", "answer"):
        # what statement rows answer is read off them by the program, as in a research run
        text = row_answer(ctx, question, shown, labels) if stage_on(ctx, "row_lookup") else ""
        if text and on_token is not None:
            on_token(text)
        if not text:
            budget = answer_budget(ctx.model(ROLE), ASK_MAX_TOKENS)
            text, _ = ctx.model_text(
                ROLE,
                "answer",
                messages,
                max_tokens=budget,
                stream_to=on_token,
                stop_at=_answer_stop(ctx),
            )
    draft = answer_draft(bracket_labels(text, labels))  # labels bracketed, then joined
    quoted = {k: got.text for k, v in labels.items() if (got := ctx.fetched.get(v)) is not None}
    draft = apply(ctx, "prompt_echo", draft, lambda d: without_prompt_echo(d, question))
    draft = apply(ctx, "cite_quotations", draft, lambda d: cite_quotations(d, quoted))
    draft = apply(ctx, "method_talk", draft, without_method_talk)
    draft = apply(ctx, "passage_talk", draft, without_passage_talk)
    ctx.emit("stage", stage="checking citations")
    with ctx.log.span(ctx.task, ctx.run, "stage", "citations"):
        report = checks.check_draft(ctx, question, draft, labels)
    words = answer_words(report)
    return AskTurn(
        number=number,
        question=question,
        task=ctx.task,
        status=report.status,
        prompt=messages[-1].content,
        reply=text if words else NO_ANSWER_REPLY,
        labels=labels,
        read=read,
        answer=words,
        report=report,
    )


def _read(
    ctx: RunContext, conv: Conversation, question: str, query: str
) -> tuple[list[Evidence], dict[str, list[str]]]:
    """The passages to show (hits first, then earlier reads) and their sentences to show;
    fetches what is shown and what the conversation read (both citable in this turn)."""
    found = ctx.tool(
        "search",
        "discover_evidence",
        functools.partial(ctx.tools.discover_evidence, query),
        args={"query": query},
    )
    earlier = conv.read()[:MAX_CARRIED]
    ids = list(dict.fromkeys([*found.ids, *earlier]))
    candidates = [ev for ev in map(ctx.tools.passage, ids) if ev is not None]
    queries = list(dict.fromkeys([question, query]))
    view = with_tables(ctx, candidates)
    sentences = key_sentences(queries, view, ctx.library.embedder.embed, ASK_SENTENCES)
    shown = [ev for ev in candidates if ev.evidence_id in sentences]
    for ev_id in dict.fromkeys([*(ev.evidence_id for ev in shown), *earlier]):
        ctx.tool(
            f"fetch/{ev_id}",
            "fetch_evidence",
            functools.partial(ctx.tools.fetch_evidence, ev_id),
            args={"evidence_id": ev_id},
            cache=False,
        )
    return [ev for ev in shown if ctx.fetched.get(ev.evidence_id) is not None], sentences


def _messages(llm: LLM, conv: Conversation, question: str, block: str) -> list[ChatMessage]:
    """System, the earlier turns (as many of the last :data:`MAX_HISTORY` as fit beside the
    whole of this turn's passages), then this turn's passages and question; the passages are
    cut only when this turn alone does not fit."""
    budget = answer_budget(llm, ASK_MAX_TOKENS)
    values = {"question": question, "passages": block}
    turns = [t for t in conv.turns if t.prompt][-MAX_HISTORY:]
    while turns:
        history = [
            m
            for t in turns
            for m in (
                ChatMessage(role="user", content=t.prompt),
                ChatMessage(role="assistant", content=t.reply or NO_ANSWER_REPLY),
            )
        ]
        reserve = llm.count_message_tokens(history)
        try:  # this turn whole beside the history, or one turn less
            msgs = fit_messages(llm, "ask", values, {}, budget, reserve=reserve)
            return [msgs[0], *history, *msgs[1:]]
        except ModelError:
            turns = turns[1:]
    return fit_messages(llm, "ask", values, {"passages": "head"}, budget)


def _answer_stop(ctx: RunContext) -> Callable[[str], int | None]:
    """Where the answer should end: where the writer's text would (:func:`writer_stop`), or
    where a line past :data:`ASK_MAX_LINES` begins."""
    writer_cut = writer_stop(ctx)

    def stop(text: str) -> int | None:
        cut = writer_cut(text)
        starts = [m.end() for m in re.finditer(r"\n\s*(?=\S)", text.lstrip())]
        if len(starts) >= ASK_MAX_LINES:
            at = len(text) - len(text.lstrip()) + starts[ASK_MAX_LINES - 1]
            cut = at if cut is None else min(cut, at)
        return cut

    return stop


def answer_draft(text: str) -> str:
    """The model's text as a draft: its first line is the answer line (``**Answer:**``, which
    the checks hold to the question), unless it says the passages do not answer; the rest is
    the body."""
    lines = citations_joined(text).strip().splitlines()
    if not lines:
        return ""
    first = _LEAD.sub("", _LINE_MARK.sub("", lines[0].strip())).strip()
    rest = "\n".join(lines[1:]).strip()
    if not first or states_absence(first):
        return f"{first}\n{rest}".strip()
    if not first.endswith((".", "!", "?")):
        first += "."  # the answer line is one sentence: "1921 [E2]."
    gap = "\n\n" if rest.startswith(CHAIN_HEAD) else "\n"  # the chain under a program's answer
    return f"{ANSWER_MARK} {first}{gap}{rest}".strip()
