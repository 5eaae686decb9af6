"""An Ask conversation as the task log keeps it: its turns, what they read, and its report.

A conversation is a named task (kind ``conversation``); each turn is a task of its own
(``NAME/turn-N``, kind ``ask-turn``) holding that turn's steps, spans and report, so a turn
resumes like a research run: completed steps are reused, fetches are made again. The
conversation's own events index its turns: ``turn/N`` when turn N starts (its question and
sources) and ``turn/N/done`` (an :class:`AskTurn`) when its checks are done. The conversation's
stored report is every finished turn in order, renumbered as one report
(:func:`conversation_report`), so it opens and exports like any report.

Events are data: nothing read back from the log is treated as an instruction.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from core.research.citations import excerpt
from core.research.sanitize import sources_section
from core.research.schemas import (
    Boundary,
    CitationRecord,
    Finding,
    FlaggedClaim,
    RemovedCitation,
    Report,
    ResearchNotes,
    RunStatus,
)
from core.research.writer import ANSWER_MARK
from core.tasks import TaskLog

CONVERSATION = "conversation"
TURN = "ask-turn"
#: Earlier passages a turn reads again (most recent first), so they stay citable.
MAX_CARRIED = 24
#: Earlier turns the model reads as the conversation so far.
MAX_HISTORY = 3

_CITE = re.compile(r"(?<!\\)\[(\d{1,4})\](?![(:])")
_CITES = re.compile(r"\s*\[(?:\d{1,4}|E\d{1,3}|ev1:[^\]\s]*)\]")


class AskTurn(BaseModel):
    """One finished question and answer of a conversation."""

    number: int
    question: str
    task: str = Field(description="The turn's own task: its steps, spans and report.")
    status: RunStatus
    prompt: str = Field("", description="The user message the model read (passages, question).")
    reply: str = Field("", description="What the model wrote, when its answer was asserted.")
    labels: dict[str, str] = Field(
        default_factory=dict, description="Passage labels (E1 ...) of the conversation so far."
    )
    read: list[str] = Field(default_factory=list, description="Passages shown in this turn.")
    answer: str = Field("", description="The asserted answer line's words, without citations.")
    report: Report


def turn_task(conversation: str, number: int) -> str:
    return f"{conversation}/turn-{number}"


def is_turn(params: dict[str, object]) -> bool:
    """Whether a task's params mark it as one turn of a conversation (listed under it)."""
    return params.get("kind") == TURN


def conversation_of(task: str) -> str:
    """The conversation a turn's task belongs to (a conversation's own name is its own)."""
    return re.sub(r"/turn-\d+$", "", task)


class Conversation(BaseModel):
    """What a conversation holds so far (loaded from the task log; see the module docstring)."""

    name: str
    turns: list[AskTurn] = Field(default_factory=list, description="Finished turns, in order.")
    started: dict[int, str] = Field(
        default_factory=dict, description="Turn number -> its question, for every turn begun."
    )
    boundary: Boundary | None = Field(None, description="The sources of its latest turn.")

    @classmethod
    def load(cls, log: TaskLog, name: str) -> Conversation:
        conv = cls(name=name)
        for e in log.events(name):
            p = e.payload
            if not isinstance(p, dict):
                continue
            if e.kind == "ask_question":
                conv.started[int(p["number"])] = str(p["question"])
                if isinstance(p.get("boundary"), dict):
                    conv.boundary = Boundary.model_validate(p["boundary"])
            elif e.kind == "ask_turn":
                conv.turns.append(AskTurn.model_validate(p))
        conv.turns.sort(key=lambda t: t.number)
        return conv

    @property
    def exists(self) -> bool:
        return bool(self.started)

    @property
    def last(self) -> AskTurn | None:
        return self.turns[-1] if self.turns else None

    def pending(self) -> tuple[int, str] | None:
        """(number, question) of the latest turn when it started and never finished."""
        if not self.started:
            return None
        n = max(self.started)
        done = {t.number for t in self.turns}
        return None if n in done else (n, self.started[n])

    @property
    def next_number(self) -> int:
        return max(self.started, default=0) + 1

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.last.labels) if self.last else {}

    def read(self) -> list[str]:
        """Passages the conversation read, the most recent turn's first, each once."""
        return list(dict.fromkeys(i for t in reversed(self.turns) for i in t.read))

    def current_question(self) -> str:
        return self.last.question if self.last else ""


def answer_words(report: Report) -> str:
    """The asserted answer of a checked report, without its mark and citations ("" when it
    states none: no answer line, or one withheld or flagged)."""
    for line in report.markdown.splitlines():
        if line.lstrip().startswith(ANSWER_MARK):
            if "⚠" in line or report.status == "insufficient_evidence":
                return ""
            return " ".join(_CITES.sub("", line.replace(ANSWER_MARK, "")).split()).rstrip(".")
    return ""


def body_of(report: Report) -> str:
    """A report's text without the Sources and Flagged claims sections appended to it."""
    text = report.markdown
    for head in ("\n## Sources", "\n## Flagged claims"):
        at = text.rfind(head)
        if at >= 0:
            text = text[:at]
    return text.strip()


def conversation_report(name: str, turns: list[AskTurn]) -> Report:
    """Every turn's checked answer under its question, in order, as one report: citation
    numbers run across the conversation (one per document version, as in a report), the flagged
    claims and removed citations of every turn are kept, and the status and reasons are the
    latest turn's."""
    doc_number: dict[str, int] = {}
    records: dict[str, CitationRecord] = {}
    flagged: list[FlaggedClaim] = []
    removed: list[RemovedCitation] = []
    parts: list[str] = []
    for t in turns:
        r = t.report
        local: dict[int, int] = {}
        for c in r.citations:
            number = doc_number.setdefault(c.doc_id, len(doc_number) + 1)
            local[c.number] = number
            records.setdefault(c.evidence_id, c.model_copy(update={"number": number}))
        body = _renumbered(body_of(r), local)
        parts.append(f"## {_heading(t.question)}\n\n{body}")
        flagged += r.flagged_claims
        removed += r.removed_citations
    markdown = "\n\n".join(parts)
    if flagged:
        markdown += "\n\n## Flagged claims\n\n" + "\n".join(
            f"- ⚠ “{excerpt(f.sentence)}”: {f.reason}" for f in flagged
        )
    cited = sorted(records.values(), key=lambda c: c.number)
    if cited:
        markdown += "\n\n" + sources_section(cited)
    last = turns[-1].report if turns else None
    return Report(
        task=name,
        question=turns[-1].question if turns else "",
        status=last.status if last else "insufficient_evidence",
        status_reasons=list(last.status_reasons) if last else [],
        markdown=markdown.rstrip() + "\n",
        citations=cited,
        removed_citations=removed,
        flagged_claims=flagged,
    )


def _renumbered(text: str, numbers: dict[int, int]) -> str:
    return _CITE.sub(lambda m: f"[{numbers.get(int(m.group(1)), int(m.group(1)))}]", text)


def _heading(question: str) -> str:
    return " ".join(re.sub(r"([\\`*_\[\]<>#])", r"\\\1", question).split())


def seed_notes(conv: Conversation, limit: int = MAX_CARRIED) -> ResearchNotes:
    """What a research run started from the conversation begins with: the passages it read
    (most recent first) and, as findings, each asserted answer with the passages it cites."""
    findings = []
    for t in conv.turns:
        words = answer_words(t.report)
        ids = [c.evidence_id for c in t.report.citations]
        if words and ids:
            findings.append(Finding(claim=f"{t.question} — {words}"[:300], evidence_ids=ids[:3]))
    return ResearchNotes(
        query_id="conversation",
        query=conv.current_question() or conv.name,
        findings=findings[-6:],
        fetched_ids=conv.read()[:limit],
        sufficient=True,
        stop_reason="read in the conversation",
    )
