"""A research worker: one query, a loop of tool calls with a thought each, then notes.

Hard limits (tool calls, steps) and stop rules (enough evidence; the last two searches returned
the same passages) end the loop; a worker must search before it may finish, and before its notes
it reads its best unread hits up to ``read_top`` passages (best-ranked first; among equal ranks,
the latest search's first; ahead of them, hits whose title the worker's subject names, see
:meth:`Worker._tier`). When the model's action is invalid even after its retry, a
deterministic default action keeps the worker moving (search first, then fetch the best unread
hit, then finish), so a small model still completes. With ``tool_loop`` off (the default unless
the run may use the web) there is no loop: after its automatic searches a worker reads its best
hits and writes its notes, one model call.

The notes' findings may cite only ids this worker fetched completely (an enum built per call).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from core.errors import ModelError
from core.research.context import RunContext, invalid_output
from core.research.line_items import line_item_query
from core.research.prompts import answer_budget, fit_messages, schema_reserve
from core.research.schemas import (
    Finding,
    ResearchNotes,
    ResearchQuery,
    ToolResult,
    notes_model,
)
from core.research.words import fold, title_named

logger = logging.getLogger(__name__)

ACTION_MAX_TOKENS = 160
NOTES_MAX_TOKENS = 500
MAX_ENUM_IDS = 40
MAX_ENUM_URLS = 20
TRACE_RESULT_CHARS = 900
BRIDGE_QUERY_CHARS = 400  # first search of a dependent query: its text plus what it builds on


class Worker:
    """Runs one query. Threading contract: one instance per thread; shares only ``ctx``."""

    def __init__(
        self,
        ctx: RunContext,
        query: ResearchQuery,
        prefix: str,
        context: str = "",
        bridge: str = "",
        focus: str = "",
        read_before: Sequence[str] = (),
        known: Sequence[str] = (),
    ) -> None:
        self.ctx = ctx
        self.q = query
        self.prefix = prefix
        self.context = context
        self.bridge = bridge
        self.focus = focus
        self.known: list[str] = []
        self.urls: list[str] = list(ctx.tools.seed_urls)  # addresses this worker has seen
        self.discovered: list[str] = []
        self.hit_rank: dict[str, tuple[int, int]] = {}  # id -> (best rank, -hit list number)
        self.hit_lists = 0
        self.fetched: list[str] = []
        self.trace: list[str] = []
        self.searches: list[frozenset[str]] = []
        self.tool_calls = 0
        self.steps = 0
        self.errors: list[str] = []
        self.decisions: list[str] = []
        self.asked = fold(query.query)
        self.found = fold(bridge)
        self.read_before = frozenset(read_before)  # what the findings it builds on cite
        self.links: list[str] = []  # folded texts of read passages about the subject
        self.read_texts: list[str] = []  # folded texts of every passage this worker read
        self.titles: dict[str, str] = {}  # id -> title (of the hits ranked so far)
        self.answers_before = list(known)  # "question -> answer" of the steps it builds on

    # ------------------------------------------------------------------ loop

    def run(self) -> ResearchNotes:
        limits = self.ctx.limits
        stop = ""
        last: tuple[str, str, str] = ("", "", "")
        if limits.auto_search:
            # A dependent query ("the state where that singer died") names its subject only
            # through the answers it depends on: the first search carries them (IRCoT-style
            # retrieval conditioned on what the run has found so far).
            first = f"{self.q.query} {self.bridge}".strip()[:BRIDGE_QUERY_CHARS]
            self._call("discover_evidence", {"query": first})
            last = ("discover_evidence", first, "")
            if self.focus and not self._read_now():
                # The full query embeds close to the passage the last hop already read (its
                # subject is in it); the new words alone ("lighthouse country Norland")
                # find the next hop's passage.
                self._call("discover_evidence", {"query": self.focus})
                last = ("discover_evidence", self.focus, "")
            items = line_item_query(self.q.query)
            if items and not self._read_now():
                # A metric's numbers stand in its statement under their line items ("net cash
                # provided by operating activities"), not under the metric's name.
                self._call("discover_evidence", {"query": items})
                last = ("discover_evidence", items, "")
        if not self.ctx.tool_loop and self.searches:
            stop = "read_best"  # no tool choices: the best hits are read below
        while not stop:
            self.ctx.check_cancel()
            if self.steps >= limits.max_steps:
                stop = "max_steps"
                break
            if self.tool_calls >= limits.max_tool_calls:
                stop = "max_tool_calls"
                break
            self.steps += 1
            self.ctx.tools.set_step(self.q.id, self.steps, f"{self.prefix} step {self.steps}")
            action = self._next_action()
            name = str(action.get("action") or "finish")
            thought = str(action.get("thought") or "")
            if thought:
                self.trace.append(f"thought: {thought}")
            if name == "finish":
                if not self.searches:
                    self.trace.append("(You must search before finishing.)")
                    name, action = "discover_evidence", {"query": self.q.query}
                else:
                    stop = "finished"
                    break
            if name == "think":
                continue
            signature = (
                name,
                str(action.get("query") or ""),
                str(action.get("evidence_id") or action.get("url") or ""),
            )
            if signature == last or (
                not self.searches and name != "discover_evidence" and self.steps > 1
            ):
                # A repeated call returns what it returned before, and a worker searches before
                # anything else: take the default action instead (search, read, finish).
                self.trace.append(f"({name} again is not useful; the default action was taken)")
                action = self._default_action()
                name = str(action["action"])
                if name == "finish":
                    stop = "finished"
                    break
                signature = (
                    name,
                    str(action.get("query") or ""),
                    str(action.get("evidence_id") or action.get("url") or ""),
                )
            last = signature
            if name != "fetch_evidence" and self._read_now():
                self.trace.append("(The last tool call reads the best hit: nothing is read yet.)")
                name, action = "fetch_evidence", {"evidence_id": self._unread()[0]}
            self._call(name, action)
            if len(self.searches) >= 2 and self.searches[-1] == self.searches[-2]:
                stop = "repeated_results"
            elif len(self.fetched) >= limits.enough_fetches:
                stop = "enough_evidence"
        if stop in ("max_steps", "max_tool_calls"):
            self.ctx.flags.add("budget_hits", f"{self.q.id}: {stop}")
        self._fetch_before_notes()
        notes = self._notes()
        notes.stop_reason = stop
        self.ctx.emit(
            "worker", worker=self.q.id, text=f"done ({stop}), {len(notes.findings)} finding(s)"
        )
        return notes

    def _read_now(self) -> bool:
        """Whether the worker's last tool call must read its best hit: it has read nothing and
        its searches found passages. Whether a worker concludes there is no evidence must not
        depend on which tools a model happened to spend its budget on."""
        left = self.ctx.limits.max_tool_calls - self.tool_calls
        return left <= 1 and not self.fetched and bool(self._unread())

    def _default_action(self) -> dict[str, Any]:
        if not self.searches:
            return {"action": "discover_evidence", "query": self.q.query}
        unread = self._unread()
        if unread and len(self.fetched) < 3:
            return {"action": "fetch_evidence", "evidence_id": unread[0]}
        return {"action": "finish"}

    def _next_action(self) -> dict[str, Any]:
        ctx = self.ctx
        llm = ctx.model("researcher")
        schema = ctx.tools.action_model(self.known[-MAX_ENUM_IDS:], self.urls[-MAX_ENUM_URLS:])
        budget = answer_budget(llm, ACTION_MAX_TOKENS)
        variables = {
            "query": self.q.query,
            "purpose": self.q.purpose,
            "context": self.context,
            "tools": [f"{k}: {v}" for k, v in ctx.tools.tool_help().items()],
            "trace": "\n".join(self.trace),
            "searched": bool(self.searches),
            "calls_left": ctx.limits.max_tool_calls - self.tool_calls,
        }
        try:
            msgs = fit_messages(
                llm,
                "researcher",
                variables,
                {"trace": "tail", "context": "head"},
                budget,
                reserve=schema_reserve(llm, schema),
            )
            out, _ = ctx.model_json(
                "researcher",
                f"{self.prefix}/s{self.steps}",
                msgs,
                schema,
                max_tokens=budget,
            )
            return out.model_dump()
        except ModelError as exc:
            if not invalid_output(exc):
                raise
            logger.info("%s: invalid action (%s); using the default action", self.q.id, exc)
            self.trace.append("(invalid action; the default action was taken)")
            return self._default_action()

    # ------------------------------------------------------------------ tools

    def _remember(self, ids: list[str]) -> None:
        for i in ids:
            if i in self.known:
                self.known.remove(i)
            self.known.append(i)

    def _call(self, name: str, action: dict[str, Any]) -> ToolResult:
        ctx, tools = self.ctx, self.ctx.tools
        query = str(action.get("query") or "").strip()
        ev_id = str(action.get("evidence_id") or "").strip()
        key = f"{self.prefix}/t{self.tool_calls + 1}"
        if name in ("fetch_evidence", "explore", "navigate") and not ev_id:
            unread = self._unread()
            if name == "fetch_evidence" and unread:
                ev_id = unread[0]
            else:
                res = ToolResult(tool=name, text="", error="evidence_id is required.")
                self.trace.append(f"{name}() -> error: {res.error}")
                return res
        self.tool_calls += 1
        url = str(action.get("url") or "").strip() or query  # fetch_url: the enum, else query
        arg = ev_id or (url if name == "fetch_url" else query)
        if name == "discover_evidence":
            res = ctx.tool(
                key,
                name,
                lambda: tools.discover_evidence(query or self.q.query),
                args={"query": query or self.q.query},
            )
            self.searches.append(frozenset(res.ids))
            self._discover(res.ids)
        elif name == "fetch_evidence":
            res = ctx.tool(
                key,
                name,
                lambda: tools.fetch_evidence(ev_id),
                args={"evidence_id": ev_id},
                cache=False,
            )
            if not res.error and res.complete and ev_id not in self.fetched:
                self.fetched.append(ev_id)
                ev = ctx.fetched.get(ev_id)
                if ev is not None:
                    self.read_texts.append(fold(ev.text))
                    if self._tier(ev_id) < 2:  # about the subject or the next hop
                        self.links.append(self.read_texts[-1])
        elif name == "find_entities":
            res = ctx.tool(
                key,
                name,
                lambda: tools.find_entities(query or self.q.query),
                args={"query": query or self.q.query},
            )
            self._discover(res.ids)
        elif name == "explore":
            res = ctx.tool(key, name, lambda: tools.explore(ev_id), args={"evidence_id": ev_id})
        elif name == "navigate":
            direction = str(action.get("direction") or "next")
            res = ctx.tool(
                key,
                name,
                lambda: tools.navigate(ev_id, direction),
                args={"evidence_id": ev_id, "direction": direction},
            )
        elif name == "record_decision":
            res = ctx.tool(key, name, lambda: tools.record_decision(self.q.id, self.steps, query))
            if not res.error:
                self.decisions.append(query)  # confirmed: the write returned
        elif name == "search_decisions":
            res = ctx.tool(key, name, lambda: tools.search_decisions(query))
        elif name == "fetch_url":  # a page's passages come back fetched (citable) or listed
            res = ctx.tool(key, name, lambda: tools.fetch_url(url), args={"url": url}, cache=False)
            for i in res.ids:
                if ctx.fetched.get(i) is not None:
                    if i not in self.fetched:
                        self.fetched.append(i)
                elif i not in self.discovered:
                    self.discovered.append(i)
        elif name == "web_search":
            q = query or self.q.query
            res = ctx.tool(key, name, lambda: tools.web_search(q), args={"query": q})
        else:
            res = ToolResult(tool=name, text="", error=f"Unknown tool {name!r}.")
        self._remember(res.ids)
        self.urls.extend(u for u in tools.urls_in(res) if u not in self.urls)
        ctx.emit(
            "worker",
            worker=self.q.id,
            text=f"step {self.steps}: {name}"
            f"{' (error)' if res.error else ''} — "
            f"{self.tool_calls}/{ctx.limits.max_tool_calls} tool calls",
        )
        if res.error:
            self.errors.append(res.error)
            self.trace.append(f"{name}({arg}) -> error: {res.error}")
        else:
            text = (
                res.text
                if len(res.text) <= TRACE_RESULT_CHARS
                else res.text[:TRACE_RESULT_CHARS] + "…"
            )
            self.trace.append(f"{name}({arg}) ->\n{text}")
        return res

    def _discover(self, ids: list[str]) -> None:
        """Remember a search's hits with their rank in it (a later search ranks ties first)."""
        self.hit_lists += 1
        for rank, ev_id in enumerate(ids):
            key = (rank, -self.hit_lists)
            if ev_id not in self.hit_rank:
                self.discovered.append(ev_id)
                self.hit_rank[ev_id] = key
            else:
                self.hit_rank[ev_id] = min(self.hit_rank[ev_id], key)

    def _title(self, ev_id: str) -> str:
        if ev_id not in self.titles:
            ev = self.ctx.tools.passage(ev_id)
            self.titles[ev_id] = ev.title if ev is not None else ""
        return self.titles[ev_id]

    def _tier(self, ev_id: str) -> int:
        """0: a hit about a name the query does not say but what it builds on found (the singer,
        given "Northport is a single by Ann Lake"), or a passage read about the subject names
        (the band a song's passage names): the next hop; 1: a hit about the query's own subject
        ("Northport (song)" for "the state where Northport's performer died"); 2: a hit some
        other passage this worker read names (a country, named by the passage about one of its
        orchestras); 3: the rest; 4: a passage the findings this one builds on cite (their
        notes carry it: the next hop is elsewhere). By the hit's title, as the query, the
        findings or the passages name it."""
        title = self._title(ev_id)
        if ev_id in self.read_before:
            return 4
        if not title:
            return 3
        if title_named(title, self.asked):
            return 1
        if title_named(title, self.found) or any(title_named(title, t) for t in self.links):
            return 0
        return 2 if any(title_named(title, t) for t in self.read_texts) else 3

    def _unread(self) -> list[str]:
        """Hits not read yet, best first: by :meth:`_tier` (the hop's subject before passages
        that only look alike: a small model's second search drifts to another person's
        birthplace, and its hits would push the subject's own passage out of the reads), then
        rank 1 of any search before rank 2 of any, and among equal ranks the latest search's (a
        worker's later searches are usually its sharper ones: "lighthouse in Norland" after the
        question's own words)."""
        unread = [i for i in self.discovered if i not in self.fetched]
        return sorted(unread, key=lambda i: (self._tier(i), *self.hit_rank[i]))

    def _fetch_before_notes(self) -> None:
        """Read the best unread hits until ``read_top`` passages are read (within the budget).

        A small model tends to stop after one read, usually because its second search returned
        the same passages; the gold passage of a multi-hop question is often the second or third
        hit. Hits are read best first (:meth:`_unread`).
        """
        limits = self.ctx.limits
        while len(self.fetched) < limits.read_top and self.tool_calls < limits.max_tool_calls:
            unread = self._unread()  # again after each read: what it names moves hits up
            if not unread:
                break
            self.ctx.check_cancel()
            before = len(self.fetched)
            self._call("fetch_evidence", {"evidence_id": unread[0]})
            if len(self.fetched) == before:  # not citable (truncated or gone): not again
                self.discovered.remove(unread[0])

    # ------------------------------------------------------------------ notes

    def _notes(self) -> ResearchNotes:
        ctx = self.ctx
        notes = ResearchNotes(
            query_id=self.q.id,
            query=self.q.query,
            raw=list(self.trace),
            fetched_ids=list(self.fetched),
            tool_calls=self.tool_calls,
            steps=self.steps,
            tool_errors=list(self.errors),
            decisions=list(self.decisions),
        )
        if not self.fetched:
            notes.gaps = [self.q.query]
            return notes
        blocks = []
        for ev_id in self.fetched:
            ev = ctx.fetched.get(ev_id)
            if ev is not None:
                blocks.append(f"[{ev_id}] {ev.title}\n{ev.text}")
        llm = ctx.model("researcher")
        gaps = ctx.limits.max_rounds > 1  # a gap is what a follow-up round researches
        schema = notes_model(self.fetched, gaps=gaps)
        budget = answer_budget(llm, NOTES_MAX_TOKENS)
        try:
            msgs = fit_messages(
                llm,
                "notes",
                {
                    "query": self.q.query,
                    "known": self.answers_before,
                    "evidence": "\n\n".join(blocks),
                    "gaps": gaps,
                },
                {"evidence": "head"},
                budget,
                reserve=schema_reserve(llm, schema),
            )
            out, _ = ctx.model_json(
                "researcher", f"{self.prefix}/notes", msgs, schema, max_tokens=budget
            )
            data = out.model_dump()
            notes.findings = [
                Finding(claim=f["claim"], evidence_ids=list(f["evidence_ids"]))
                for f in data["findings"]
            ]
            notes.gaps = [g for g in data["gaps"] if g.strip()]
            notes.sufficient = bool(data["sufficient"]) and bool(notes.findings)
            if data["answer"].strip() and data["answer_id"]:
                notes.answer = data["answer"].strip().rstrip(" .")
                notes.answer_id = data["answer_id"]
        except ModelError as exc:
            if not invalid_output(exc):
                raise
            logger.info("%s: notes failed (%s); keeping extractive notes", self.q.id, exc)
            for ev_id in self.fetched[:3]:
                ev = ctx.fetched.get(ev_id)
                if ev is not None:
                    notes.findings.append(
                        Finding(claim=" ".join(ev.text.split())[:200], evidence_ids=[ev_id])
                    )
        return notes


def run_worker(
    ctx: RunContext,
    query: ResearchQuery,
    prefix: str,
    context: str = "",
    bridge: str = "",
    focus: str = "",
    read_before: Sequence[str] = (),
    known: Sequence[str] = (),
) -> ResearchNotes:
    """Run one worker; a completed worker of an earlier run is reused, its fetches redone.

    ``context`` is the compressed notes of the queries this one depends on; ``bridge`` their
    findings' claims, added to the worker's first search; ``focus`` the words that are new in
    this query and in those findings (:func:`core.research.words.focus_terms`), searched next;
    ``read_before`` the passages their findings cite, read last (:meth:`Worker._tier`);
    ``known`` their answers ("question -> answer"), shown with the notes' passages so the
    query's own answer can be read from them."""

    def work() -> ResearchNotes:
        ctx.emit("worker", worker=query.id, text=f"researching: {query.query}")
        return Worker(ctx, query, prefix, context, bridge, focus, read_before, known).run()

    notes, reused = ctx.log.step(
        ctx.task,
        ctx.run,
        f"{prefix}/worker",
        work,
        dump=lambda n: n.model_dump(mode="json"),
        load=ResearchNotes.model_validate,
    )
    if reused:
        # Citations are fetched again in the current run: only a fetch of this run counts.
        still: list[str] = []
        for ev_id in notes.fetched_ids:
            res = ctx.tool(
                f"{prefix}/refetch/{ev_id}",
                "fetch_evidence",
                functools.partial(ctx.tools.fetch_evidence, ev_id),
                cache=False,
            )
            if not res.error and res.complete:
                still.append(ev_id)
        notes.fetched_ids = still
        notes.findings = [
            f.model_copy(update={"evidence_ids": [e for e in f.evidence_ids if e in still]})
            for f in notes.findings
        ]
        notes.findings = [f for f in notes.findings if f.evidence_ids]
        ctx.emit("worker", worker=query.id, text="reused from the earlier run")
    return notes
