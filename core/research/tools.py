"""The evidence tools a research worker may call, each enforcing the run's boundary.

Every tool returns a :class:`ToolResult` (text for the model, the evidence ids it names) and
never raises for a bad argument: the error goes back to the worker as data, so the worker can go
on with what it has. A passage outside the boundary is treated exactly like one that does not
exist: its text, title and id never come back.

Tool docstrings and ``TOOL_HELP`` are written for the small model that reads them; the
researcher prompt lists the tools from :meth:`Tools.tool_help`, so a tool a run does not have is
never shown.

Web tools (``fetch_url``, ``web_search``) exist only when the run's boundary allows the web
(``Boundary.web``) *and* ``web.enabled`` is on; ``web_search`` also needs a configured provider
(:mod:`core.ingest.websearch`). The rules:

- **Only addresses seen in the run.** ``fetch_url`` opens an address only if it appeared in the
  run's context: in the user's question or clarification answers, in the text of a passage the
  run fetched (``fetch_evidence``, or a page ``fetch_url`` returned), among the links of a page
  ``fetch_url`` returned, or in ``web_search`` results. Anything else is refused as a tool
  error, so an address a model invents or a page tells it to visit is never fetched unless the
  user or the sources named it. The registry of seen addresses is kept in the task log, so a
  resumed run still knows them.
- **Fetching.** Through the library (``Library.add_paths``), hence through the guarded fetcher
  of :mod:`core.ingest.web` (SSRF guard on every hop, size, time and redirect caps, no cookies).
  The page becomes an ordinary library document (evidence ids, versions, kept bytes).
- **Scope.** The fetched document, and only it, joins the run's scope (:meth:`Scope.admit`);
  collections and the boundary itself are unchanged. Admissions are kept in the task log and
  replayed when the task resumes with the web still allowed.
- **Errors** (refused host, too big, timeout, web off, not seen) come back as tool errors.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, create_model

from core.errors import SourcebookError, WebAccessError
from core.evidence import Evidence
from core.ingest.web import normalise_url, stored_copy
from core.ingest.websearch import SearchProvider, find_urls, page_links, search_provider
from core.library import Library
from core.research.schemas import ActionName, Boundary, ResearchLimits, ToolResult, action_model
from core.tasks import TaskLog
from graph.errors import GraphError
from graph.ids import parse_evidence_id
from graph.schemas import Document

logger = logging.getLogger(__name__)


MAX_PAGE_LINKS = 10  # links of a fetched page listed (and made fetchable)
MAX_SEEN_URLS = 300  # addresses remembered per run


class Scope:
    """The boundary resolved to document ids once, at the start of a run.

    ``allowed`` is None for "the whole library". It changes only through :meth:`admit`, which
    adds exactly one document (a page ``fetch_url`` added to the library in this run).
    Thread-safe: ``admit`` swaps in a new frozenset under a lock; readers see the old or the new
    set, never a partial one.
    """

    def __init__(self, library: Library, boundary: Boundary) -> None:
        self.boundary = boundary
        self._lock = threading.Lock()
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
        allowed = self.allowed
        return allowed is None or doc_id in allowed

    def admit(self, doc_id: str) -> None:
        """Let one more document into the run (with the whole library in scope: a no-op)."""
        with self._lock:
            if self.allowed is not None:
                self.allowed = self.allowed | {doc_id}

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


class SeenUrls:
    """The addresses that appeared in a run's context, in order (see the module docstring).

    Every new address is appended to the task log (kind ``web_url``) before it counts, and a
    resumed run reloads them. Thread-safe (one lock; the log has its own).
    """

    def __init__(self, log: TaskLog, task: str, run: int, *, load: bool = True) -> None:
        self._log, self._task, self._run = log, task, run
        self._lock = threading.Lock()
        self._urls: dict[str, None] = {}
        for e in log.events(task) if load else ():
            if e.kind == "web_url" and isinstance(e.payload, dict):
                self._urls.setdefault(str(e.payload.get("url", "")), None)

    def add(self, urls: Iterable[str]) -> None:
        with self._lock:
            for url in urls:
                if url in self._urls or len(self._urls) >= MAX_SEEN_URLS:
                    continue
                key = f"web_url/{hashlib.sha256(url.encode()).hexdigest()[:20]}"
                self._log.append(self._task, self._run, "web_url", key, {"url": url})
                self._urls[url] = None

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return url in self._urls


class Tools:
    """The tools of one run, bound to its library, scope, limits and task log.

    Threading contract: workers call tools concurrently; reads go to the library (safe from any
    thread), the fetched registry and the seen addresses have their own locks, and the task log
    serialises its writes. ``fetch_url`` is the one tool that writes to the library: its adds
    run under the run's ``_write_lock``, one at a time (the network fetch included, bounded by
    ``web.timeout_s``), which keeps the library's one-writer contract inside the run. A run
    that allows the web is therefore a library write as a whole: start it where library writes
    may run (the desktop's exclusive pool, like any add).
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
        *,
        seed_text: Sequence[str] = (),
        search: SearchProvider | None = None,
    ) -> None:
        """``seed_text``: the question and clarification answers (their addresses may be
        fetched); ``search`` replaces the provider built from ``web`` settings (tests)."""
        self.library = library
        self.scope = scope
        self.limits = limits
        self.log = log
        self.task = task
        self.run = run
        self.fetched = fetched
        self.preferred_docs = preferred_docs
        web = library.settings.web
        self.web_allowed = scope.boundary.web and web.enabled
        self.search = (search or search_provider(web)) if self.web_allowed else None
        self.seed_urls: list[str] = []
        self.urls = SeenUrls(log, task, run, load=self.web_allowed)
        self._write_lock = threading.Lock()
        self._pages: dict[str, str | WebAccessError] = {}  # url -> doc id or error (this run)
        if self.web_allowed:
            self.seed_urls = list(dict.fromkeys(u for t in seed_text for u in find_urls(t)))
            self.urls.add(self.seed_urls)
            for e in log.events(task):  # a resumed run: pages fetched earlier stay in scope
                if e.kind == "web_document" and isinstance(e.payload, dict):
                    self._readmit(str(e.payload.get("doc_id", "")))

    # ------------------------------------------------------------------ what this run offers

    def tool_help(self) -> dict[str, str]:
        """``name -> one line`` for the tools this run has (shown to the researcher model)."""
        names = self.web_tool_names()
        items = [(k, v) for k, v in TOOL_HELP.items() if k != "finish"]
        also = " or from web_search" if "web_search" in names else ""
        items += [(k, WEB_TOOL_HELP[k].format(also)) for k in names]
        return dict([*items, ("finish", TOOL_HELP["finish"])])

    def web_tool_names(self) -> list[str]:
        if not self.web_allowed:
            return []
        return ["fetch_url", "web_search"] if self.search is not None else ["fetch_url"]

    def action_model(self, known_ids: list[str], known_urls: list[str]) -> type[BaseModel]:
        """The researcher's action schema: :func:`action_model`, plus the web tools this run
        has and a ``url`` enum of the addresses the worker has seen."""
        base = action_model(known_ids)
        names = self.web_tool_names()
        if not names:
            return base
        fields: dict[str, Any] = {"action": (Literal[(*get_args(ActionName), *names)], ...)}
        urls = [u for u in dict.fromkeys(known_urls) if u in self.urls]
        if urls:
            fields["url"] = (Literal[tuple(urls)] | None, None)
        return create_model("ResearchAction", __base__=base, **fields)

    def urls_in(self, result: ToolResult) -> list[str]:
        """The fetchable addresses a tool result shows (empty without the web)."""
        if not self.web_allowed or result.error:
            return []
        return [u for u in find_urls(result.text) if u in self.urls]

    def _readmit(self, doc_id: str) -> None:
        try:
            self.library.store.get_document(doc_id)
        except (GraphError, SourcebookError):
            return
        self.scope.admit(doc_id)

    # ------------------------------------------------------------------ helpers

    def _in_scope_evidence(self, evidence_id: str) -> Evidence | None:
        try:
            parse_evidence_id(evidence_id)
            ev = self.library.evidence(evidence_id)
        except (ValueError, SourcebookError, GraphError):
            return None
        return ev if self.scope.allows(ev.doc_id) else None

    def passage(self, evidence_id: str) -> Evidence | None:
        """The passage an id names, or None when it is not in the run's scope (not a tool:
        the worker ranks its hits by their titles)."""
        return self._in_scope_evidence(evidence_id)

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
                graph=self.limits.discover_graph,
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
        if self.web_allowed:
            self.urls.add(find_urls(ev.text))
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

    # ------------------------------------------------------------------ web

    def fetch_url(self, url: str) -> ToolResult:
        """Read a web page and add it to the library. Only addresses from the question, from a
        passage you read or from web_search work. The page's passages come back with evidence
        ids you can cite, like fetch_evidence."""
        name = "fetch_url"
        if not self.web_allowed:
            return ToolResult(tool=name, text="", error="Web access is off for this run.")
        try:
            key = normalise_url(url)
        except WebAccessError as exc:
            return ToolResult(tool=name, text="", error=exc.message)
        if key not in self.urls:
            return ToolResult(
                tool=name,
                text="",
                error=f"{key} did not appear in this research run: fetch_url opens only "
                "addresses from the question, from passages you fetched, or from web_search.",
            )
        with self._write_lock:  # one library write at a time; a URL is fetched once per run
            outcome = self._pages.get(key)
            if outcome is None:
                outcome = self._pages[key] = self._add_page(key)
        if isinstance(outcome, WebAccessError):
            return ToolResult(tool=name, text="", error=outcome.message)
        return self._page_result(outcome)

    def _add_page(self, url: str) -> str | WebAccessError:
        """Fetch ``url`` into the library (caller holds the write lock): its doc id, or why not."""
        try:
            changes = self.library.add_paths([url])
        except SourcebookError as exc:
            return WebAccessError(exc.message, path=url)
        res = changes.results[0] if changes.results else None
        if res is None or res.doc_id is None or res.outcome in ("failed", "cancelled"):
            why = res.error if res is not None and res.error else "The page was not added."
            logger.info("fetch_url %s failed: %s", url, why)
            return WebAccessError(why, path=url)
        self.log.append(
            self.task,
            self.run,
            "web_document",
            f"web_document/{res.doc_id}",
            {"url": url, "doc_id": res.doc_id, "outcome": res.outcome},
        )
        self.scope.admit(res.doc_id)
        return res.doc_id

    def _page_result(self, doc_id: str) -> ToolResult:
        """The page's passages from its start, up to ``fetch_chars`` (whole passages; those
        shown are citable), the ids of the rest, and the page's links."""
        store = self.library.store
        try:
            doc = store.get_document(doc_id)
            passages = sorted(store.get_document_passages(doc_id), key=lambda p: p.ordinal)
            shown: list[Evidence] = []
            rest: list[str] = []
            used = 0
            for p in passages:
                if rest or used + len(p.text) > self.limits.fetch_chars:
                    rest.append(p.passage_id)
                    continue
                shown.append(self.library.evidence(p.passage_id))
                used += len(p.text)
            first = self.library.evidence(rest[0]) if rest and not shown else None
            links = page_links(self._stored_bytes(doc), doc.source_uri, limit=MAX_PAGE_LINKS)
        except (GraphError, SourcebookError, OSError) as exc:
            return ToolResult(tool="fetch_url", text="", error=f"reading the page failed: {exc}")
        head = f"Web page {doc.title!r} ({doc.source_uri}), now in the library and in the sources"
        blocks = [f"{head} of this run; {len(passages)} passage(s)."]
        for ev in shown:
            self.fetched.add(ev)
            self.urls.add(find_urls(ev.text))
            blocks.append(f"{self._label(ev.evidence_id, ev.title, ev.pages)}\n{ev.text}")
        if first is not None:  # one passage longer than the limit: shown cut, not citable
            cut = first.text[: self.limits.fetch_chars] + " [truncated: not citable]"
            blocks.append(f"{self._label(first.evidence_id, first.title, first.pages)}\n{cut}")
        if rest:
            blocks.append("More passages (read them with fetch_evidence): " + ", ".join(rest[:20]))
        if links:
            self.urls.add(u for _, u in links)
            blocks.append(
                "Links on the page (open with fetch_url):\n"
                + "\n".join(f"- {text or '(link)'}: {u}" for text, u in links)
            )
        return ToolResult(
            tool="fetch_url",
            text="\n\n".join(blocks),
            ids=[ev.evidence_id for ev in shown] + rest[:20],
            complete=not rest,
        )

    def _stored_bytes(self, doc: Document) -> bytes:
        if doc.kind != "web":
            return b""
        kept = stored_copy(self.library.root / "web", doc.content_sha256)
        return kept.read_bytes() if kept is not None else b""

    def web_search(self, query: str) -> ToolResult:
        """Search the web for QUERY. Returns page titles, addresses and snippets; read a page
        with fetch_url before using it (search results cannot be cited)."""
        name = "web_search"
        if self.search is None:
            return ToolResult(tool=name, text="", error="Web search is not available in this run.")
        query = " ".join(query.split())[:300]
        if not query:
            return ToolResult(tool=name, text="", error="The query is empty.")
        try:
            results = self.search.search(query, count=self.library.settings.web.search_results)
        except WebAccessError as exc:
            return ToolResult(tool=name, text="", error=f"web search failed: {exc.message}")
        self.urls.add(r.url for r in results)
        lines = [f"{i}. {r.title}\n   {r.url}\n   {r.snippet}" for i, r in enumerate(results, 1)]
        return ToolResult(tool=name, text="\n".join(lines) or "No web pages found.")

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
WEB_TOOL_HELP = {
    "fetch_url": "url = a web address from the question or a passage{} -> reads the page and "
    "adds it to the library; its passages come back with evidence ids you can cite",
    "web_search": "query -> web pages (title, address, snippet); read one with fetch_url",
}
