"""The evidence tools a research worker may call, each enforcing the run's boundary.

Every tool returns a :class:`ToolResult` (text for the model, the evidence ids it names) and
never raises for a bad argument: the error goes back to the worker as data, so the worker can go
on with what it has. A passage outside the boundary is treated exactly like one that does not
exist: its text, title and id never come back.

Tool docstrings are written for the model that reads them (``tool_descriptions``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from core.errors import SourcebookError
from core.library import Evidence, Library
from core.research.schemas import Boundary, ResearchLimits, ToolResult
from core.tasks import TaskLog
from graph.errors import GraphError
from graph.ids import parse_evidence_id

logger = logging.getLogger(__name__)


class Scope:
    """The boundary resolved to document ids once, at the start of a run.

    ``allowed`` is None for "the whole library". Immutable after construction; safe to share.
    """

    def __init__(self, library: Library, boundary: Boundary) -> None:
        self.boundary = boundary
        ids: set[str] = set()
        for ref in boundary.doc_refs:
            ids.add(library.resolve_document(ref).doc_id)
        if boundary.collections:
            cols = {c.name: c for c in library.store.list_collections()}
            for name in boundary.collections:
                if name in cols:
                    ids.update(cols[name].doc_ids)
        picked = bool(boundary.doc_refs or boundary.collections)
        self.allowed: frozenset[str] | None = frozenset(ids) if picked else None

    def allows(self, doc_id: str) -> bool:
        return self.allowed is None or doc_id in self.allowed

    def describe(self) -> str:
        if self.allowed is None:
            return "the whole library"
        return f"{len(self.allowed)} chosen document(s)"


@dataclass
class Fetched:
    """What the run has read: id -> evidence, for ids fetched completely."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    evidence: dict[str, Evidence] = field(default_factory=dict)

    def add(self, ev: Evidence) -> None:
        with self.lock:
            self.evidence[ev.evidence_id] = ev

    def get(self, evidence_id: str) -> Evidence | None:
        with self.lock:
            return self.evidence.get(evidence_id)

    def ids(self) -> list[str]:
        with self.lock:
            return list(self.evidence)


class Tools:
    """The tools of one run, bound to its library, scope, limits and task log.

    Threading contract: workers call tools concurrently; reads go to the library (safe from any
    thread), the fetched registry has its own lock, and the task log serialises its writes.
    """

    def __init__(
        self,
        library: Library,
        scope: Scope,
        limits: ResearchLimits,
        log: TaskLog,
        task: str,
        run: int,
        fetched: Fetched,
        preferred_docs: frozenset[str] = frozenset(),
    ) -> None:
        self.library = library
        self.scope = scope
        self.limits = limits
        self.log = log
        self.task = task
        self.run = run
        self.fetched = fetched
        self.preferred_docs = preferred_docs

    # ------------------------------------------------------------------ helpers

    def _in_scope_evidence(self, evidence_id: str) -> Evidence | None:
        try:
            parse_evidence_id(evidence_id)
            ev = self.library.evidence(evidence_id)
        except (ValueError, SourcebookError, GraphError):
            return None
        return ev if self.scope.allows(ev.doc_id) else None

    def _label(self, ev_id: str, title: str, pages: list[int]) -> str:
        where = (
            f"p. {pages[0]}"
            if len(pages) == 1
            else (f"pp. {pages[0]}-{pages[-1]}" if pages else "")
        )
        return f"{ev_id} | {title}{', ' + where if where else ''}"

    def _describe_passages(self, ids: list[str], snippet_chars: int = 160) -> ToolResult:
        lines, kept = [], []
        for pid in ids:
            ev = self._in_scope_evidence(pid)
            if ev is None:
                continue
            kept.append(pid)
            snippet = " ".join(ev.text.split())[:snippet_chars]
            lines.append(f"{self._label(pid, ev.title, ev.pages)}\n  {snippet}")
        return ToolResult(tool="", text="\n".join(lines) or "No passages found.", ids=kept)

    # ------------------------------------------------------------------ tools

    def discover_evidence(self, query: str) -> ToolResult:
        """Search the library for passages about QUERY. Returns evidence ids with short
        snippets. Read a passage with fetch_evidence before citing it."""
        query = query.strip()
        if not query:
            return ToolResult(tool="discover_evidence", text="", error="The query is empty.")
        try:
            hits = self.library.search(
                query,
                k=self.limits.discover_k,
                doc_refs=sorted(self.scope.allowed) if self.scope.allowed is not None else (),
            )
        except SourcebookError as exc:
            return ToolResult(tool="discover_evidence", text="", error=f"search failed: {exc}")
        hits = [h for h in hits if self.scope.allows(h.doc_id)]
        hits.sort(key=lambda h: h.doc_id not in self.preferred_docs)  # stable: advisory only
        lines = []
        for h in hits:
            pages = (
                []
                if h.page_start is None
                else list(
                    range(
                        h.page_start + 1,
                        (h.page_end if h.page_end is not None else h.page_start) + 2,
                    )
                )
            )
            snippet = " ".join(h.snippet.split())[:200]
            lines.append(f"{self._label(h.evidence_id, h.title, pages)}\n  {snippet}")
        return ToolResult(
            tool="discover_evidence",
            text="\n".join(lines) or "No passages found.",
            ids=[h.evidence_id for h in hits],
        )

    def fetch_evidence(self, evidence_id: str) -> ToolResult:
        """Read the full text of one passage (by its evidence id). Only passages you fetched
        completely can be cited."""
        ev = self._in_scope_evidence(evidence_id.strip())
        if ev is None:
            return ToolResult(
                tool="fetch_evidence", text="", error=f"No passage {evidence_id!r} in the sources."
            )
        limit = self.limits.fetch_chars
        complete = len(ev.text) <= limit
        if complete:
            self.fetched.add(ev)
        text = ev.text if complete else ev.text[:limit] + " [truncated: not citable]"
        return ToolResult(
            tool="fetch_evidence",
            text=f"{self._label(ev.evidence_id, ev.title, ev.pages)}\n{text}",
            ids=[ev.evidence_id],
            complete=complete,
        )

    def find_entities(self, name: str) -> ToolResult:
        """Find people, organisations, places, dates or amounts whose name contains NAME, and
        the passages that mention them."""
        name = name.strip()
        if not name:
            return ToolResult(tool="find_entities", text="", error="The name is empty.")
        try:
            found = self.library.store.find_entities(name, limit=5)
            for word in sorted(set(name.split()), key=len, reverse=True):
                if found or len(word) < 3:
                    break
                found = self.library.store.find_entities(word, limit=5)
            lines: list[str] = []
            ids: list[str] = []
            for ent_id, ent_name, ent_type, _count in found:
                pids = self._describe_passages(self.library.store.passages_for_entity(ent_id)[:8])
                pids.ids = pids.ids[:3]
                if not pids.ids:
                    continue
                ids.extend(p for p in pids.ids if p not in ids)
                lines.append(f"{ent_name} ({ent_type}): {', '.join(pids.ids)}")
        except GraphError as exc:
            return ToolResult(tool="find_entities", text="", error=f"entity lookup failed: {exc}")
        return ToolResult(
            tool="find_entities", text="\n".join(lines) or "No entities found.", ids=ids
        )

    def explore(self, evidence_id: str) -> ToolResult:
        """List passages related to one passage in the knowledge graph (neighbours and passages
        sharing names)."""
        pid = evidence_id.split("#", 1)[0].strip()
        if self._in_scope_evidence(pid) is None:
            return ToolResult(
                tool="explore", text="", error=f"No passage {evidence_id!r} in the sources."
            )
        try:
            related = self.library.store.explore(pid, limit=8)
        except GraphError as exc:
            return ToolResult(tool="explore", text="", error=f"explore failed: {exc}")
        res = self._describe_passages([p for p in related if p != pid][:5])
        res.tool = "explore"
        return res

    def navigate(self, evidence_id: str, direction: str) -> ToolResult:
        """Move from one passage to the previous or next passage of its document, or to the
        start of its section (parent)."""
        pid = evidence_id.split("#", 1)[0].strip()
        if self._in_scope_evidence(pid) is None:
            return ToolResult(
                tool="navigate", text="", error=f"No passage {evidence_id!r} in the sources."
            )
        try:
            if direction in ("previous", "next"):
                target = self.library.store.neighbours(pid).get(direction)
            elif direction == "parent":
                target = self._section_start(pid)
            else:
                return ToolResult(
                    tool="navigate", text="", error="direction must be previous, next or parent."
                )
        except GraphError as exc:
            return ToolResult(tool="navigate", text="", error=f"navigate failed: {exc}")
        if not target:
            return ToolResult(tool="navigate", text=f"There is no {direction} passage.")
        res = self._describe_passages([target], snippet_chars=400)
        res.tool = "navigate"
        return res

    def _section_start(self, pid: str) -> str | None:
        p = self.library.store.get_passage(pid)
        passages = self.library.store.get_document_passages(p.doc_id)
        same = [q for q in passages if q.heading_path == p.heading_path and q.ordinal <= p.ordinal]
        first = min(same, key=lambda q: q.ordinal) if same else None
        if first is not None and first.passage_id != pid:
            return first.passage_id
        parent_path = p.heading_path[:-1]
        up = [q for q in passages if q.heading_path == parent_path and q.ordinal < p.ordinal]
        return min(up, key=lambda q: q.ordinal).passage_id if up else None

    def think(self, thought: str) -> ToolResult:
        """Write down your reasoning about what you found and what to do next."""
        return ToolResult(tool="think", text="Noted.")

    # ------------------------------------------------------------------ progress and decisions

    def set_step(self, worker: str, step: int, what: str) -> None:
        """Record a worker's progress in the task log."""
        self.log.append(
            self.task,
            self.run,
            "step",
            f"{worker}/progress/{step}@{self.run}",
            {"worker": worker, "step": step, "what": what[:200]},
        )

    def record_decision(self, worker: str, step: int, decision: str) -> ToolResult:
        """Save a decision you made (what to look for next, what to leave out) so it survives a
        restart. It counts only once saved."""
        decision = decision.strip()[:300]
        if not decision:
            return ToolResult(tool="record_decision", text="", error="The decision is empty.")
        saved = self.log.append(
            self.task,
            self.run,
            "decision",
            f"{worker}/decision/{step}",
            {"worker": worker, "decision": decision},
        )
        return ToolResult(tool="record_decision", text=f"Saved: {saved['decision']}")

    def search_decisions(self, query: str) -> ToolResult:
        """Look up decisions saved earlier in this task (by any worker) that contain QUERY."""
        q = query.strip().lower()
        found = [
            e.payload["decision"]
            for e in self.log.events(self.task)
            if e.kind == "decision" and q in str(e.payload.get("decision", "")).lower()
        ]
        return ToolResult(
            tool="search_decisions",
            text="\n".join(f"- {d}" for d in found[:10]) or "No decisions saved.",
        )


TOOL_HELP = {
    "discover_evidence": "query -> passages about it (ids + snippets)",
    "fetch_evidence": "evidence_id -> full text; only fetched passages can be cited",
    "find_entities": "query = a name -> passages mentioning it",
    "explore": "evidence_id -> related passages",
    "navigate": "evidence_id + direction (previous/next/parent) -> nearby passage",
    "think": "thought only; no tool runs",
    "record_decision": "query = a decision to save",
    "search_decisions": "query -> decisions saved earlier",
    "finish": "stop and write notes (only after at least one search)",
}
