"""Data of a research run: the plan, notes, report, statuses and limits.

Two kinds of models live here:

- LLM-facing models (``ResearchPlan``, ``ResearchQuery``, the per-call ``action_model`` /
  ``notes_model`` / ``routing_model`` built at run time) use ``extra="forbid"`` and bound every
  string and list, so a small model's output stays short and a malformed one fails loudly. The
  evidence ids a model may name are an enum built per call from what the run has actually seen,
  so the model cannot invent a citation.
- Records the run produces (``ResearchNotes``, ``Report``, ``CitationRecord`` ...), which cross
  the service boundary and are stored in the task log.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    create_model,
)
from pydantic.json_schema import SkipJsonSchema

from core.research.words import content_words
from core.settings import ResearchLimits as ResearchLimits  # a run's limits: the settings' own
from graph.schemas import Word

RunStatus = Literal[
    "answered",
    "insufficient_evidence",
    "partial",
    "partial_retrieval",
    "budget_exhausted",
    "recording_failed",
    "cancelled",
]
AnswerShape = Literal["report", "brief_answer", "table", "comparison"]
ToolName = Literal[
    "discover_evidence",
    "fetch_evidence",
    "find_entities",
    "explore",
    "navigate",
    "think",
    "record_decision",
    "search_decisions",
]
ActionName = Literal[
    "discover_evidence",
    "fetch_evidence",
    "find_entities",
    "explore",
    "navigate",
    "think",
    "record_decision",
    "search_decisions",
    "finish",
]
EventKind = Literal["stage", "worker", "token", "info"]
Role = Literal["router", "clarifier", "planner", "researcher", "writer"]
ROLES: tuple[Role, ...] = ("router", "clarifier", "planner", "researcher", "writer")

_FORBID = ConfigDict(extra="forbid")


# A small model sometimes copies the schema's bound into its text ("… Northport is at most 300
# characters"); that phrase is never content.
_SCHEMA_ECHO_RE = re.compile(r"[\s,;:(]*\b(?:(?:is|are)\s+)?at most \d+ characters\b\)?", re.I)


def _cut(n: int) -> Any:
    """Whitespace collapsed, then cut to ``n`` characters; idempotent (a cut after a word drops
    the space it ends at), so validating a logged value again (resume, replay) reads what the
    run read."""

    def cut(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        return " ".join(_SCHEMA_ECHO_RE.sub("", v).split())[:n].rstrip()

    return cut


def _at_least(n: int) -> Any:
    def check(v: str) -> str:
        if len(v.strip()) < n:
            raise ValueError(f"needs at least {n} characters")
        return v

    return check


def Short(n: int, min_chars: int = 0) -> Any:
    """A string bounded to ``n`` characters (longer output is cut, not rejected).

    The bound is stated in the JSON schema's description rather than as ``maxLength``: a
    ``maxLength`` of hundreds becomes hundreds of nested grammar rules, which makes llama.cpp's
    constrained decoding crawl. ``max_tokens`` bounds the generation itself.
    """
    schema: dict[str, Any] = {"type": "string", "description": f"at most {n} characters"}
    validators: list[Any] = [BeforeValidator(_cut(n))]
    if min_chars:
        validators.append(AfterValidator(_at_least(min_chars)))
    return Annotated[str, *validators, WithJsonSchema(schema)]


def _desc(n: int) -> dict[str, Any]:
    return {"type": "string", "description": f"at most {n} characters"}


Text40 = Annotated[str, BeforeValidator(_cut(40)), WithJsonSchema(_desc(40))]
Text120 = Annotated[str, BeforeValidator(_cut(120)), WithJsonSchema(_desc(120))]
Text200 = Annotated[str, BeforeValidator(_cut(200)), WithJsonSchema(_desc(200))]
Text500 = Annotated[str, BeforeValidator(_cut(500)), WithJsonSchema(_desc(500))]
Query300 = Annotated[
    str, BeforeValidator(_cut(300)), AfterValidator(_at_least(3)), WithJsonSchema(_desc(300))
]


# ----------------------------------------------------------------------------- run inputs


class Boundary(BaseModel):
    """The data-source boundary the user chose: a hard filter nothing in the run can widen.

    No documents and no collections means the whole library. Documents and collections add up
    (the union of what was picked). ``web`` allows web tools; it is off unless the user says so.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_refs: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()
    web: bool = False


#: Joins a worked-out answer to its calculation: "**Answer:** 16.7%, worked out as ...".
WORKED_AS = ", worked out as "

#: Ends the answer line of a report whose answer failed its checks: the answer found is shown
#: (marked ⚠) as a lead, not stated as a finding.
UNVERIFIED_NOTE = (
    "*Not verified: the checks could not confirm this answer from the passages it cites; treat "
    "it as a lead, not a finding (Flagged claims says why).*"
)
#: The answer line that replaced such an answer before :data:`UNVERIFIED_NOTE` (saved reports).
WITHHELD_ANSWER = (
    "**Answer:** The sources read do not establish an answer: the one found is not supported "
    "by the passages it cites (see Flagged claims)."
)


# ----------------------------------------------------------------------------- LLM-facing


# "#q1" in a query: the answer of query q1 (an analyst's plan may chain its steps so; the run
# writes the answer in, :func:`core.research.steps.resolve`)
STEP_REF = re.compile(r"#(q\d{1,2})\b", re.I)


class ResearchQuery(BaseModel):
    """One self-contained research question a worker can answer on its own."""

    model_config = _FORBID

    id: Text40 = Field(..., description="short id like q1; the run renames ids to q1, q2, ...")
    query: Query300
    purpose: Text200 = ""
    preferred_tool: ToolName = "discover_evidence"
    fallback_tool: ToolName = "find_entities"
    depends_on: list[Text40] = Field(default_factory=list, max_length=3)

    def refs(self) -> list[str]:
        """The ids of the queries whose answers this query writes as "#q1", in order."""
        return list(dict.fromkeys(m.group(1).lower() for m in STEP_REF.finditer(self.query)))


class ResearchPlan(BaseModel):
    """The planner's output; the user may edit it before research starts."""

    model_config = _FORBID

    task_analysis: Text500
    answer_shape: AnswerShape = "report"
    components: list[Text120] = Field(default_factory=list, max_length=6)
    constraints: list[Text120] = Field(default_factory=list, max_length=6)
    queries: list[ResearchQuery] = Field(..., min_length=1, max_length=5)


# The plan as the planner writes it when workers choose no tools (``tool_loop`` off): the run
# reads neither a query's tools nor its purpose, which took ~100 of the ~240 tokens a 1.5B plan
# wrote; without them it writes ~180 (MuSiQue dev: the planner 19 s -> 15 s a question). They
# are left out of the schema (so of the grammar and the schema instruction), not out of the
# model, so a plan saved with them still loads. A docstring here is part of the schema the
# model reads, as the parents' are. The task analysis, components and constraints stay although
# the run reads only the components (the prose writer): written before the queries, they are the
# planner's reasoning. Left out too (s38, the first 9 MuSiQue dev questions), first-sentence F1
# fell from .54 to .19 and fetched-evidence recall from .81 to .61, and runs were slower.


class PlanQuery(ResearchQuery):
    """One self-contained research question a worker can answer on its own."""

    purpose: SkipJsonSchema[Text200] = ""
    preferred_tool: SkipJsonSchema[ToolName] = "discover_evidence"
    fallback_tool: SkipJsonSchema[ToolName] = "find_entities"


class LeanPlan(ResearchPlan):
    """The planner's output; the user may edit it before research starts."""

    queries: list[PlanQuery] = Field(..., min_length=1, max_length=5)  # type: ignore[assignment]


class Clarification(BaseModel):
    """Questions to the user about scope and output shape (empty when none are needed)."""

    model_config = _FORBID

    questions: list[Text200] = Field(default_factory=list, max_length=3)


def _id_enum(ids: list[str]) -> Any:
    return Literal[tuple(ids)]  # a Literal built at run time: an enum in the JSON schema


def _list_of(item: Any) -> Any:
    return list[item]


def action_model(known_ids: list[str]) -> type[BaseModel]:
    """The researcher's next step. ``evidence_id`` may only name ids the worker has seen."""
    fields: dict[str, Any] = {
        "thought": (Short(300), ""),
        "action": (ActionName, ...),
        "query": (Short(200), ""),
        "direction": (Literal["previous", "next", "parent"] | None, None),
    }
    if known_ids:
        fields["evidence_id"] = (_id_enum(known_ids) | None, None)
    return create_model("ResearchAction", __config__=_FORBID, **fields)


STEP_ANSWER_MAX = 120  # characters of a step's answer: a name, number, date or place


NOTE_CLAIM_MIN, NOTE_CLAIM_MAX = 3, 300  # characters of a finding's claim


def _without_empty_claims(items: Any) -> Any:
    """The findings without those whose claim is (nearly) empty: one such finding otherwise
    failed the whole notes, the step's answer with them (a grammar cannot bound a string's
    length cheaply, so the model may write ``"claim": ""``)."""
    if not isinstance(items, list):
        return items
    cut = _cut(NOTE_CLAIM_MAX)
    return [
        f
        for f in items
        if not (
            isinstance(f, dict)
            and isinstance(f.get("claim"), str)
            and len(cut(f["claim"]).strip()) < NOTE_CLAIM_MIN
        )
    ]


def notes_model(citable_ids: list[str], gaps: bool = True) -> type[BaseModel]:
    """A worker's notes: findings may cite only ids it fetched completely. After the findings,
    the step's own answer (the words that answer the worker's query, "" when no passage does)
    and the one passage stating it: the answer the steps that build on this one carry.
    ``gaps`` false (no follow-up round would research them) leaves the gaps out of the schema,
    not out of the model: notes saved with gaps still load."""
    ids = _id_enum(citable_ids)
    gap_list: Any = _list_of(Short(200))
    finding = create_model(
        "NoteFinding",
        __config__=_FORBID,
        claim=(Short(NOTE_CLAIM_MAX, NOTE_CLAIM_MIN), ...),
        evidence_ids=(_list_of(ids), Field(..., min_length=1, max_length=3)),
    )
    findings: Any = Annotated[_list_of(finding), BeforeValidator(_without_empty_claims)]
    return create_model(
        "NotesDraft",
        __config__=_FORBID,
        findings=(findings, Field(default_factory=list, max_length=6)),
        answer=(Short(STEP_ANSWER_MAX), ""),
        answer_id=(ids | None, None),
        gaps=(
            gap_list if gaps else SkipJsonSchema[gap_list],  # type: ignore[misc]
            Field(default_factory=list, max_length=3),
        ),
        sufficient=(bool, ...),
    )


FACT_MAX = 200  # characters of a short answer step's fact


def short_answer_model(labels: list[str]) -> type[BaseModel]:
    """The report's first line: the question answered hop by hop from labelled passages.

    The steps come first so a small model reasons before it answers; every step and the answer
    may cite only the passages' labels. A step's ``fact`` states its answer as one sentence,
    shown and checked as a link of the answer's chain (:mod:`core.research.chain`).
    ``calculation`` is the arithmetic for an answer worked out from figures ("" otherwise); the
    program computes it (:mod:`core.research.worked`)."""
    label = _id_enum(labels)
    step = create_model(
        "AnswerStep",
        __config__=_FORBID,
        question=(Short(150), ...),
        answer=(Short(150), ...),
        fact=(Short(FACT_MAX), ...),
        label=(label | None, None),
    )
    return create_model(
        "ShortAnswer",
        __config__=_FORBID,
        steps=(_list_of(step), Field(default_factory=list, max_length=4)),
        calculation=(Short(160), ...),
        answer=(Short(200), ...),
        labels=(_list_of(label), Field(default_factory=list, max_length=3)),
        answered=(bool, ...),
    )


def routing_model(doc_ids: list[str]) -> type[BaseModel]:
    """Advisory routing: the documents (inside the boundary) most likely to answer."""
    return create_model(
        "SourceRouting",
        __config__=_FORBID,
        preferred_doc_ids=(_list_of(_id_enum(doc_ids)), Field(default_factory=list, max_length=5)),
    )


# ----------------------------------------------------------------------------- run records


class Finding(BaseModel):
    claim: str
    evidence_ids: list[str]


class ToolResult(BaseModel):
    """What a tool returned to a worker (``error`` set when it failed)."""

    tool: str
    text: str
    ids: list[str] = Field(default_factory=list, description="Evidence ids the result names.")
    complete: bool = True
    error: str | None = None


class ResearchNotes(BaseModel):
    """One worker's result: raw trace plus the compressed findings."""

    query_id: str
    query: str
    findings: list[Finding] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    sufficient: bool = False
    raw: list[str] = Field(default_factory=list, description="The worker's trace, uncompressed.")
    fetched_ids: list[str] = Field(default_factory=list)
    tool_calls: int = 0
    steps: int = 0
    stop_reason: str = ""
    tool_errors: list[str] = Field(default_factory=list)
    decisions: list[str] = Field(default_factory=list, description="Confirmed decisions.")
    failed: bool = False
    answer: str = Field("", description="The query's own answer, as a passage words it.")
    answer_id: str = Field("", description="The fetched passage that states the answer.")

    def on_topic(self) -> list[Finding]:
        """The findings about this query's own subject: those sharing the most content words
        with the query (ties kept; none when no finding shares one).

        A worker reads its top hits, and a small model writes a finding for each passage it
        read, including neighbours that only look alike (asked where one river is, it also
        noted where another river is). Those findings must not steer the queries that
        build on this one, nor push their passages ahead in the writer's list."""
        asked = content_words(self.query)
        scores = [len(content_words(f.claim) & asked) for f in self.findings]
        best = max(scores, default=0)
        return [f for f, s in zip(self.findings, scores, strict=True) if best and s == best]

    def compressed(self, max_chars: int = 1200, on_topic: bool = False) -> str:
        """The notes as short text; ``on_topic`` keeps only :meth:`on_topic` findings."""
        lines = [f"Query {self.query_id}: {self.query}"]
        for f in self.on_topic() if on_topic else self.findings:
            lines.append(f"- {f.claim} [{', '.join(f.evidence_ids)}]")
        if self.answer:
            lines.append(f"Answer: {self.answer} [{self.answer_id}]")
        if self.gaps:
            lines.append("Gaps: " + "; ".join(self.gaps))
        text = "\n".join(lines)
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


class CitationRecord(BaseModel):
    """One cited piece of evidence, enough for a reader outside the app to check the claim."""

    number: int
    evidence_id: str
    doc_id: str
    title: str
    source_uri: str
    pages: list[int] = Field(default_factory=list, description="1-based.")
    boxes: list[Word] = Field(default_factory=list)
    quote: str
    content_sha256: str
    superseded: bool = False
    credibility: float = Field(0.5, ge=0, le=1)


class RemovedCitation(BaseModel):
    evidence_id: str
    reason: str


class FlaggedClaim(BaseModel):
    sentence: str
    evidence_ids: list[str]
    reason: str
    #: The checks find its cited passages do not state it: a name or figure it asserts is not in
    #: them, or the support check's sure "no" (not a weak match, a part, an unsure yes or no).
    unstated: bool = False
    #: Taken out of the report for being unstated (stage ``unstated_claims``); its reason says so.
    removed: bool = False


class Report(BaseModel):
    """The result of a run."""

    task: str
    question: str
    status: RunStatus
    status_reasons: list[str] = Field(default_factory=list)
    markdown: str = ""
    citations: list[CitationRecord] = Field(default_factory=list)
    removed_citations: list[RemovedCitation] = Field(default_factory=list)
    flagged_claims: list[FlaggedClaim] = Field(default_factory=list)
    plan: ResearchPlan | None = None
    plan_fallback: bool = False
    notes: list[ResearchNotes] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class RunEvent(BaseModel):
    """Progress shown live (terminal, desktop): a stage change, worker step or writer token."""

    kind: EventKind
    stage: str = ""
    worker: str = ""
    text: str = ""
