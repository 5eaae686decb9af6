"""``sourcebook eval``: research runs measured against gold answers and gold evidence.

Reads question files in the two formats of ``../shared/eval`` as they are:

- MuSiQue-style records (``qid``, ``question``, ``answer``, ``answer_aliases``,
  ``gold_passage_ids``, ``decomposition``) over a JSONL corpus (``passage_id``, ``title``,
  ``text``) imported one document per record with the record id as the document's external id.
  The gold unit is the corpus record: a passage counts as gold when its document's external id
  is gold (a record chunked into several passages counts once).
- FinanceBench-style records (``financebench_id``, ``question``, ``answer``, gold ``evidence``
  items with ``doc_name`` and 0-based ``evidence_page_num``) over a folder of PDFs. The gold
  unit is a page: (file name stem = ``doc_name``, 0-based page index). A passage counts for
  every page its words lie on.

For each question: the baseline (plain hybrid search for the question, no graph expansion,
recall of gold units among the first k hits), then one full research run, scored by
:mod:`core.eval_metrics`: the share of gold units among everything the run fetched (the
notes' fetched ids plus every complete fetch of the run in the task log), per-hop recall
(MuSiQue), answer EM/F1 (first sentence and best sentence), citation precision and recall on
gold units, a re-check of every citation (invalid citations), whether each cited text is
really in its source: on the cited PDF pages (read again with PyMuPDF), or in the corpus record,
and the trust figures (answer asserted or abstained, right or confidently wrong, claims that
stood). :func:`rescore` scores a saved result's trust figures again from its reports, given the
question file, so a shareable result (no gold answers) can be brought up to date without runs.
Runs read the whole library; with ``own_docs`` (FinanceBench), each run and its baseline search
read only the filings its question names, the benchmark's usual single-document setting.

Threading: one :class:`Evaluator` runs questions one after another on the calling thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pymupdf

from core.errors import ConfigError, NotFoundError, SourcebookError, TaskBusyError
from core.eval_data import (
    EvalQuestion,
    UnitMap,
    corpus_records,
    pages0,
)
from core.eval_metrics import (
    CitationCheck,
    Dataset,
    EvalMode,
    EvalResult,
    QuestionResult,
    mean,
    numeric_match,
    precision,
    recall,
    report_body,
    score_answer,
    score_trust,
    summarize,
    summarize_trust,
    text_held,
)
from core.research.run import FINAL
from core.research.schemas import Boundary, Report, ResearchLimits, RunEvent
from core.service import Sourcebook
from models.llm import LLM

logger = logging.getLogger(__name__)

__all__ = [
    "CitationCheck",
    "Dataset",
    "EvalResult",
    "Evaluator",
    "QuestionResult",
    "rescore",
    "run_eval",
    "select",
]

SEARCH_TOOLS = {"discover_evidence", "find_entities", "explore", "navigate"}
_MARKER = re.compile(r"\[(\d{1,3})\]")
_LEFTOVER = re.compile(r"\[(?:E\d{1,3}|ev1:[^\]]*)\]")


# ----------------------------------------------------------------------------- evaluation


class Evaluator:
    """Runs and scores questions against one library. See the module docstring."""

    def __init__(
        self,
        app: Sourcebook,
        dataset: Dataset,
        models: Mapping[str, LLM],
        *,
        ks: list[int],
        task_prefix: str,
        corpus: Path | None = None,
        own_docs: bool = False,
        on_event: Callable[[str, RunEvent], None] | None = None,
        limits: ResearchLimits | None = None,
        replay_prefix: str | None = None,
        replay_from: str = "writing",
        mode: EvalMode = "research",
    ) -> None:
        """``limits``: the runs' limits (default: the library's settings). ``replay_prefix``: a
        task series (another tag's prefix) whose runs each new run reuses up to the stage
        ``replay_from`` (``writing``: the plans and research; ``citations``: the drafts too),
        running that stage and the rest anew (see :meth:`core.tasks.TaskLog.fork`). ``mode``
        ``ask``: each question is answered by Ask (one search, one model call, the same checks;
        :mod:`core.research.ask`) instead of a research run, and scored the same way."""
        if mode == "ask" and replay_prefix is not None:
            raise ConfigError(
                "A replay reuses research runs' plans and drafts; Ask has neither.",
                hint="Drop --replay for --mode ask.",
            )
        if own_docs and dataset != "financebench":
            raise ConfigError(
                "Only FinanceBench questions name the documents they are about.",
                hint="Drop --own-docs for MuSiQue questions.",
            )
        self.app = app
        self.dataset = dataset
        self.models = models
        self.ks = sorted(set(ks))
        self.task_prefix = task_prefix
        self.own_docs = own_docs
        self.on_event = on_event
        self.limits = limits
        self.replay_prefix = replay_prefix
        self.replay_from = replay_from
        self.mode = mode
        self.records, aliases = corpus_records(corpus)
        self.map = UnitMap(dataset, app.documents(include_superseded=False), aliases)
        self._pages: dict[str, list[str]] = {}
        self._ev_units: dict[str, list[str]] = {}

    def task_name(self, qid: str, prefix: str | None = None) -> str:
        name = prefix if prefix is not None else self.task_prefix
        return f"{name}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', qid)}"[:120]

    # -------------------------------------------------------------- one question

    def scope(self, q: EvalQuestion) -> tuple[str, ...]:
        """The documents a question's run and baseline search may read: with ``own_docs``, the
        filings it names; otherwise none named, which is the whole library."""
        if not self.own_docs:
            return ()
        ids = tuple(d for d, key in self.map.key.items() if key in q.docs)
        if not ids:
            raise NotFoundError(
                f"Question {q.qid} is about {', '.join(q.docs) or 'no named document'}, "
                "which is not in the evaluation library.",
                hint="Pass the folder holding its PDF with --docs and a new --library.",
            )
        return ids

    def evaluate(self, q: EvalQuestion) -> QuestionResult:
        gold = self.map.gold(q.gold)
        hops = self.map.gold(q.hops)
        scope = self.scope(q)
        hits = self.app.search(
            q.question, k=max(self.ks), doc_refs=scope, mode="hybrid", graph=False
        )
        ranked = [self.map.units(h.doc_id, pages0(h.page_start, h.page_end)) for h in hits]
        baseline = {f"@{k}": recall({u for us in ranked[:k] for u in us}, gold) for k in self.ks}
        k_hop = 5 if 5 in self.ks else max(self.ks)
        top_hop = {u for us in ranked[:k_hop] for u in us}
        task = self.task_name(q.qid)
        res = QuestionResult(
            qid=q.qid,
            question=q.question,
            gold_answer=q.answers[0],
            task=task,
            status="error",
            seconds=0.0,
            baseline_recall=baseline,
            hops_baseline=[h in top_hop for h in hops],
        )
        saved = self.app.task_log()
        try:
            info = saved.get(task)
            if self.replay_prefix is not None:
                res.replayed_from = self.task_name(q.qid, self.replay_prefix)
                if info is None:
                    saved.fork(res.replayed_from, task, before_stage=self.replay_from)
        except ValueError as exc:
            res.error = f"cannot replay {res.replayed_from}: {exc}"
            return res
        finally:
            saved.close()
        res.reused = bool(info and info.status in FINAL and info.report)
        listener = self.on_event

        def on_event(ev: RunEvent) -> None:
            if listener is not None:
                listener(q.qid, ev)

        t0 = time.perf_counter()
        try:
            if self.mode == "ask":
                report = self.app.ask(
                    q.question,
                    conversation=task,
                    models=self.models,
                    boundary=Boundary(doc_refs=scope),
                    limits=self.limits,
                    on_event=on_event,
                )
                task = res.task = report.task  # the turn's own task holds its reads and spans
            else:
                report = self.app.research(
                    q.question,
                    models=self.models,
                    task=task,
                    boundary=Boundary(doc_refs=scope),
                    limits=self.limits,
                    on_event=on_event,
                )
        except TaskBusyError:
            # Another evaluation is running this series in the same library: stop, rather than
            # leapfrog it question by question and both write one results file.
            raise
        except SourcebookError as exc:
            logger.warning("research for %s failed: %s", q.qid, exc)
            res.error = str(exc)
            res.seconds = time.perf_counter() - t0
            return res
        # a replayed run's research is timed as it was recorded
        recorded = res.reused or res.replayed_from is not None
        res.seconds = self._recorded_seconds(task) if recorded else time.perf_counter() - t0
        self._score(res, q, report, gold, hops)
        return res

    def _score(
        self,
        res: QuestionResult,
        q: EvalQuestion,
        report: Report,
        gold: list[str],
        hops: list[str],
    ) -> None:
        res.status, res.status_reasons = report.status, list(report.status_reasons)
        res.report_markdown = report.markdown
        res.plan_queries = [x.query for x in report.plan.queries] if report.plan else []
        noted = {i for n in report.notes for i in n.fetched_ids}
        logged, seen = self.run_evidence(res.task)
        fetched = noted | logged
        fetched_units = {u for i in fetched for u in self.evidence_units(i)}
        res.fetched = len(fetched)
        res.fetched_recall = recall(fetched_units, gold)
        res.fetched_gold = [u for u in gold if u in fetched_units]
        res.seen_recall = recall({u for i in seen | fetched for u in self.evidence_units(i)}, gold)
        res.hops_fetched = [h in fetched_units for h in hops]
        res.answer = score_answer(report.markdown, q.answers)
        if self.dataset == "financebench":
            res.numeric_match = numeric_match(report.markdown, q.answers[0])
        res.removed_citations = len(report.removed_citations)
        res.flagged_claims = len(report.flagged_claims)
        res.removed_claims = sum(f.removed for f in report.flagged_claims)
        res.trust = score_trust(
            self.dataset,
            report.markdown,
            report.status,
            res.answer,
            q.answers,
            res.flagged_claims,
            res.removed_claims,
        )
        res.citations = len(report.citations)
        res.checks, res.invalid_reasons = self.check_citations(report, fetched, set(gold))
        res.invalid_citations = len(res.invalid_reasons)
        cited = {u for c in res.checks for u in c.units}
        res.citation_precision = precision(cited, gold)
        res.citation_recall = recall(cited, gold)
        pages = [c.source_ok for c in res.checks if c.where == "page"]
        quotes = [c.source_ok for c in res.checks if c.where == "record"]
        res.page_accuracy = sum(map(bool, pages)) / len(pages) if pages else None
        res.quote_accuracy = sum(map(bool, quotes)) / len(quotes) if quotes else None

    # -------------------------------------------------------------- evidence

    def evidence_units(self, evidence_id: str) -> list[str]:
        if evidence_id not in self._ev_units:
            try:
                ev = self.app.evidence(evidence_id)
                self._ev_units[evidence_id] = self.map.units(ev.doc_id, [p - 1 for p in ev.pages])
            except SourcebookError:
                self._ev_units[evidence_id] = []
        return self._ev_units[evidence_id]

    def run_evidence(self, task: str) -> tuple[set[str], set[str]]:
        """(ids fetched completely, ids any search or lookup returned) in the task's latest run,
        as the task log recorded them (a search reused from an earlier run counts as seen)."""
        log = self.app.task_log()
        try:
            events = log.events(task)
        finally:
            log.close()
        if not events:
            return set(), set()
        last = max(e.run for e in events)
        fetched: set[str] = set()
        seen: set[str] = set()
        for e in events:
            p = e.payload
            if not isinstance(p, dict) or p.get("error") or not isinstance(p.get("ids"), list):
                continue
            if e.kind == "tool_result" and e.run == last and p.get("tool") == "fetch_evidence":
                if p.get("complete"):
                    fetched.update(p["ids"])
            elif e.kind == "result" and p.get("tool") in SEARCH_TOOLS:
                seen.update(p["ids"])
        return fetched, seen

    def _recorded_seconds(self, task: str) -> float:
        """Time of a reused task: its recorded stage spans summed over all its runs (a stage
        that was interrupted left no span)."""
        _info, spans = self.app.task(task)
        return sum(s.seconds for s in spans if s.kind == "stage")

    def check_citations(
        self, report: Report, fetched: set[str], gold: set[str]
    ) -> tuple[list[CitationCheck], list[str]]:
        """Re-check every citation of the final report, independently of the run's checker."""
        problems: list[str] = []
        body = report_body(report.markdown)
        numbers = {c.number for c in report.citations}
        used = {int(n) for n in _MARKER.findall(body)}
        problems += [f"[{n}] has no citation record" for n in sorted(used - numbers)]
        problems += [f"raw citation token left: {t}" for t in _LEFTOVER.findall(body)]
        checks: list[CitationCheck] = []
        for c in report.citations:
            pages0 = [p - 1 for p in c.pages]
            units = self.map.units(c.doc_id, pages0)
            check = CitationCheck(
                number=c.number,
                evidence_id=c.evidence_id,
                units=units,
                gold=bool(set(units) & gold),
            )
            try:
                ev = self.app.evidence(c.evidence_id)
            except SourcebookError:
                check.problem = "no such evidence in the library"
            else:
                digest = hashlib.sha256(ev.text.encode("utf-8")).hexdigest()
                if ev.text != c.quote or digest != c.content_sha256:
                    check.problem = "quote differs from the evidence text"
                elif c.evidence_id not in fetched and ev.passage_id not in fetched:
                    check.problem = "not fetched in this run"
                elif c.number not in used:
                    check.problem = "listed but never cited in the text"
            if check.problem:
                problems.append(f"[{c.number}] {c.evidence_id}: {check.problem}")
            self._check_source(check, c.quote, c.source_uri, pages0, c.doc_id)
            checks.append(check)
        return checks, problems

    def _check_source(
        self, check: CitationCheck, quote: str, source: str, pages0: list[int], doc_id: str
    ) -> None:
        path = Path(source)
        if pages0 and path.suffix.lower() == ".pdf":
            texts = self.page_texts(path)
            if texts is None or any(p < 0 or p >= len(texts) for p in pages0):
                check.where, check.source_ok = "page", False
                check.problem = check.problem or "cited page not readable"
                return
            check.where = "page"
            check.source_ok, check.coverage = text_held(quote, "\n".join(texts[p] for p in pages0))
            return
        ext = self.map.key.get(doc_id, "") if self.dataset == "musique" else ""
        record = self.records.get(ext)
        if record is None and ext:
            try:
                record = self.app.library.store.get_document_text(doc_id)
            except Exception:  # the check is best effort: no text means "not verified"
                record = None
        if record is not None:
            check.where = "record"
            check.source_ok, check.coverage = text_held(quote, record)

    def page_texts(self, path: Path) -> list[str] | None:
        """Every page's text, read again from the file with PyMuPDF (cached per file)."""
        key = str(path)
        if key not in self._pages:
            try:
                with pymupdf.open(path) as doc:
                    self._pages[key] = [page.get_text() for page in doc]
            except Exception as exc:  # a vanished or unreadable file fails its checks
                logger.warning("cannot read %s for the page check: %s", path, exc)
                return None
        return self._pages[key]


def run_eval(
    evaluator: Evaluator,
    questions: list[EvalQuestion],
    *,
    questions_file: Path,
    library: Path,
    model: str,
    ingest: dict[str, Any],
    on_result: Callable[[int, QuestionResult, EvalResult], None] | None = None,
) -> EvalResult:
    """Evaluate the questions in order; ``on_result`` sees each result and the totals so far."""
    for q in questions:
        evaluator.scope(q)  # a question about a missing filing fails before hours of runs
    gold_units = [u for q in questions for u in q.gold]
    unmapped = list(dict.fromkeys(evaluator.map.unmapped(gold_units)))
    if unmapped:
        logger.warning("%d gold unit(s) have no document in the library", len(unmapped))
    results: list[QuestionResult] = []

    def build() -> EvalResult:
        return EvalResult(
            summary=summarize(
                evaluator.dataset,
                results,
                questions_file=questions_file,
                library=library,
                model=model,
                ks=evaluator.ks,
                unmapped=unmapped,
            ),
            ingest=ingest,
            scope="own-docs" if evaluator.own_docs else "library",
            mode=evaluator.mode,
            questions=list(results),
        )

    for i, q in enumerate(questions, 1):
        results.append(evaluator.evaluate(q))
        if on_result is not None:
            on_result(i, results[-1], build())
    return build()


def select(
    questions: list[EvalQuestion], *, only: list[str], limit: int | None
) -> list[EvalQuestion]:
    if only:
        picked = [q for q in questions if q.qid in only]
        missing = set(only) - {q.qid for q in picked}
        if missing:
            close = sorted({q.qid for q in questions for m in missing if m in q.qid})[:3]
            raise NotFoundError(
                f"No question with id {', '.join(sorted(missing))}.",
                hint=f"Did you mean {', '.join(close)}?"
                if close
                else f"Ids are the file's question ids, such as {questions[0].qid}.",
            )
        questions = picked
    return questions[:limit] if limit is not None else questions


def rescore(result: Mapping[str, Any], answers: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A copy of an evaluation result (its full JSON form: a shareable one keeps no reports)
    with each question's trust figures (and a FinanceBench report's numeric match) scored
    again from its stored report and answer against ``answers`` (question id -> gold answer,
    then aliases), and the summary's recomputed from them. Every other figure, and any field
    this version does not know, is kept as it was: no model runs again."""
    out: dict[str, Any] = json.loads(json.dumps(result))
    dataset = out["summary"]["dataset"]
    if "report_markdown" in out.get("redacted", []):
        raise ConfigError(
            "This is a shareable result: it keeps no reports to score again.",
            hint="Rescore the full copy that `eval --shareable` kept in the evaluation "
            "library's results folder, with --shareable to write the result shareable again.",
        )
    missing = [q["qid"] for q in out["questions"] if q["qid"] not in answers]
    if missing:
        raise ConfigError(
            f"{len(missing)} question(s) of the result are not in the question file, "
            f"such as {missing[0]}.",
            hint="Pass the question file the result was made from.",
        )
    trusts = []
    matches: list[float | None] = []
    for q in out["questions"]:
        r = QuestionResult.model_validate(q)
        trust = None
        if r.error is None:
            trust = score_trust(
                dataset,
                r.report_markdown,
                r.status,
                r.answer,
                answers[r.qid],
                r.flagged_claims,
                r.removed_claims,
            )
            trusts.append(trust)
            if dataset == "financebench":
                q["numeric_match"] = numeric_match(r.report_markdown, answers[r.qid][0])
                matches.append(None if q["numeric_match"] is None else float(q["numeric_match"]))
        q["trust"] = None if trust is None else trust.model_dump(mode="json")
    out["summary"]["trust"] = summarize_trust(trusts).model_dump(mode="json")
    if dataset == "financebench":
        out["summary"]["numeric_match"] = mean(matches)
    return out
