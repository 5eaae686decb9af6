"""The research commands of the command line: ``research``, ``tasks [show NAME]``, ``export``,
``eval``, ``eval-rescore``.

``add_parsers(subparsers)`` adds them and returns ``{command: handler}``; ``core.cli`` registers
the handlers next to its own. Progress goes to stderr, the streamed report to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.cli_progress import ResearchProgress
from core.errors import ConfigError, ModelError
from core.eval_metrics import shareable
from core.export import BINARY_FORMATS, FORMATS, ExportFormat, check_out, format_for
from core.research.pipeline import STAGES
from core.research.schemas import ROLES, Boundary, ResearchPlan, RunEvent
from core.service import Sourcebook
from core.tasks import timing_summary
from models.llm import LLM

Handler = Callable[[Sourcebook, argparse.Namespace], int]
EXIT_OK, EXIT_PARTIAL, EXIT_USAGE = 0, 1, 2

#: The stages of a run (its stage spans, core.research.run) a replay can start from.
REPLAY_STAGES = ("writing", "citations")


def add_parsers(sub: Any) -> dict[str, Handler]:
    r = sub.add_parser("research", help="Research a question in the library; print a cited report.")
    r.add_argument("question", nargs="?")
    r.add_argument(
        "--from-conversation",
        metavar="NAME",
        help="Research the current question of this Ask conversation, inside its sources, "
        "starting from the passages it read (instead of QUESTION).",
    )
    r.add_argument("--doc", action="append", default=[], help="Only this document (repeat).")
    r.add_argument("--collection", action="append", default=[], help="Only this collection.")
    r.add_argument("--web", action="store_true", help="Allow web sources (off by default).")
    r.add_argument("--task", help="Task name; rerunning a name resumes it.")
    r.add_argument("--fresh", action="store_true", help="Run again even if the task finished.")
    r.add_argument("--out", type=Path, help="Also write the report to this file.")
    r.add_argument("--format", choices=FORMATS, help="Format for --out (default: by suffix).")
    r.add_argument("--plan-file", type=Path, help="Use this (edited) plan JSON; skips planning.")
    r.add_argument("--answer", action="append", default=[], help="Answer to a clarification.")
    r.add_argument("--clarify", action="store_true", help="Ask clarification questions first.")
    r.add_argument("--route", action="store_true", help="Advisory source routing first.")
    r.add_argument(
        "--trail",
        action="store_true",
        help="End the report with its research trail (each step's cited finding); off unless "
        "asked for here or in the settings (research.trail).",
    )
    r.add_argument("--model", help="Model for every role.")
    for role in ROLES:
        r.add_argument(f"--model-{role}", help=f"Model for the {role} role.")
    r.add_argument("--quiet", action="store_true", help="No progress on stderr.")

    t = sub.add_parser("tasks", help="List research tasks, or `tasks show NAME`.")
    t.add_argument("action", nargs="?", choices=["show"])
    t.add_argument("name", nargs="?")
    t.add_argument("--json", action="store_true")

    e = sub.add_parser(
        "export",
        help="Export a task's report: md, html, pdf, docx, json (provenance), bib (BibTeX) or "
        "csl (CSL-JSON).",
    )
    e.add_argument("task")
    e.add_argument(
        "--format",
        choices=FORMATS,
        help="Default: by the --out suffix (.md .html .pdf .docx .json .bib .csl.json), else md.",
    )
    e.add_argument(
        "--out", type=Path, help="Write to this file (default: stdout; pdf and docx need it)."
    )

    v = sub.add_parser(
        "eval",
        help="Evaluate research runs on MuSiQue- or FinanceBench-format questions.",
        description="Ingest the corpus (or PDFs) into a fresh library, run one research run per "
        "question, and report gold-passage recall@k of plain hybrid search, the run's "
        "fetched-evidence recall, answer EM/F1, citation precision/recall, page accuracy, "
        "invalid citations and time. Rerunning with the same --library (and --tag) reuses "
        "finished runs.",
    )
    v.add_argument("questions", type=Path, metavar="QUESTIONS.jsonl")
    src = v.add_mutually_exclusive_group()
    src.add_argument("--corpus", type=Path, help="MuSiQue-format JSONL corpus to ingest.")
    src.add_argument("--docs", type=Path, help="Folder of documents (PDFs) to ingest.")
    v.add_argument(
        "--library",
        type=Path,
        help="Home of the evaluation library (kept; ingested only if it holds no documents). "
        "Default: a temporary home, removed afterwards.",
    )
    v.add_argument("--model", help="Model for every role (default: the settings' models).")
    v.add_argument("--limit", type=int, help="Only the first N questions.")
    v.add_argument("--only", action="append", default=[], help="Only this question id (repeat).")
    v.add_argument("--k", default="2,5,10", help="Cut-offs for baseline recall (default 2,5,10).")
    v.add_argument("--out", type=Path, help="Write the results as JSON (updated per question).")
    v.add_argument(
        "--shareable",
        action="store_true",
        help="Write --out fit to commit or share: question ids, figures, statuses and timings, "
        "without the benchmark's questions and answers or the reports (which restate them); "
        "paths relative to the project or ../shared. With --library, the full result is kept "
        "in the library's results folder (for eval-rescore).",
    )
    v.add_argument(
        "--tag",
        default="",
        help="Name for this series of runs: task names are eval-MODEL[-TAG]-QID, so a rerun with "
        "the same tag and --library reuses finished runs and a new tag runs them anew.",
    )
    v.add_argument(
        "--own-docs",
        action="store_true",
        help="FinanceBench: each run (and the baseline search) reads only the filing(s) its "
        "question names (doc_name), FinanceBench's single-document setting. Default: the whole "
        "library.",
    )
    v.add_argument(
        "--replay",
        metavar="TAG",
        help="Reuse the plan and research of the series run with this --tag (same library, "
        "model and --own-docs), running only the writing and the checks anew: a writer-side "
        "change is measured in minutes on the same evidence.",
    )
    v.add_argument(
        "--replay-from",
        choices=REPLAY_STAGES,
        default="writing",
        help="With --replay: the stage the new runs start from (writing: plans and research "
        "reused; citations: the drafts too, only the checks run anew, in seconds).",
    )
    v.add_argument(
        "--off",
        action="append",
        default=[],
        choices=list(STAGES),
        metavar="STAGE",
        help="Switch a research stage off for these runs (repeat): " + ", ".join(STAGES) + ".",
    )
    v.add_argument(
        "--mode",
        choices=["research", "ask"],
        default="research",
        help="Answer each question by a full research run (default) or by Ask (one search, "
        "one model call, the same checks); its runs are a series of their own.",
    )
    v.add_argument("--quiet", action="store_true", help="No run progress on stderr.")

    rs = sub.add_parser(
        "eval-rescore",
        help="Score a saved `eval` result again against its question file (no model runs).",
        description="Read a full result file of `sourcebook eval --out` (a shareable one keeps "
        "no reports: use the full copy in the evaluation library's results folder), score each "
        "question's trust figures again from the report it stored (asserted or abstained, right "
        "or confidently wrong, claims supported) against the gold answers of the question file, "
        "matched by question id, recompute the summary's trust figures and write the result "
        "back. Every other figure is kept. A shareable result is written shareable again.",
    )
    rs.add_argument("result", type=Path, metavar="RESULT.json")
    rs.add_argument(
        "--questions", type=Path, required=True, metavar="QUESTIONS.jsonl", help="Its questions."
    )
    rs.add_argument("--out", type=Path, help="Write here instead of over RESULT.json.")
    rs.add_argument("--shareable", action="store_true", help="Write it shareable (see `eval`).")
    return {
        "research": cmd_research,
        "tasks": cmd_tasks,
        "export": cmd_export,
        "eval": cmd_eval,
        "eval-rescore": cmd_eval_rescore,
    }


def build_models(app: Sourcebook, args: argparse.Namespace) -> Mapping[str, LLM]:
    """One LLM per role from settings and ``--model`` / ``--model-ROLE``."""
    injected = getattr(args, "models", None)
    if injected is not None:
        return dict(injected)
    overrides = {r: getattr(args, f"model_{r}", None) for r in ROLES if r != "clarifier"}
    return app.role_models(default=args.model, overrides={k: v for k, v in overrides.items() if v})


def _fmt_for(path: Path, fmt: str | None) -> ExportFormat:
    chosen = format_for(path, fmt)
    if chosen is None:
        raise ConfigError(
            f"Cannot tell the format of {path}.", hint=f"Pass --format {'|'.join(FORMATS)}."
        )
    return chosen


def cmd_research(app: Sourcebook, args: argparse.Namespace) -> int:
    if not args.question and not args.from_conversation:
        raise ConfigError("What is the question?", hint='Use `sourcebook research "question"`.')
    if args.out:  # a wrong --out is told before the run, not after it
        _fmt_for(args.out, args.format)
        check_out(args.out)
    boundary = Boundary(doc_refs=tuple(args.doc), collections=tuple(args.collection), web=args.web)
    plan = None
    if args.plan_file:
        try:
            plan = ResearchPlan.model_validate_json(args.plan_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"Cannot use the plan file {args.plan_file}: {exc}") from exc
    models = build_models(app, args)
    try:
        if args.clarify and not args.answer and not args.from_conversation:
            questions = app.clarify(args.question, models=models, boundary=boundary)
            if questions:
                print('Before researching, please answer (rerun with --answer "..."):')
                for q in questions:
                    print(f"  - {q}")
                return EXIT_PARTIAL
        quiet = args.quiet
        limits = app.research_limits(trail=True) if args.trail else None
        progress = ResearchProgress(
            None if quiet else app.research_estimate(models=models, limits=limits, route=args.route)
        )
        progress.start()

        def on_event(ev: RunEvent) -> None:
            if not quiet:
                progress.event(ev)

        streamed: list[str] = []

        def on_token(tok: str) -> None:
            if not quiet:
                streamed.append(tok)
                print(tok, end="", file=sys.stderr, flush=True)

        research = (
            functools.partial(app.research_from_conversation, args.from_conversation)
            if args.from_conversation
            else functools.partial(
                app.research,
                args.question,
                task=args.task,
                boundary=boundary,
                answers=args.answer,
                plan=plan,
                route=args.route,
            )
        )
        report = research(
            models=models,
            fresh=args.fresh,
            limits=limits,
            on_event=on_event,
            on_token=on_token,
        )
        if streamed:
            print("\n--- verified report ---", file=sys.stderr)
    finally:
        for llm in {id(m): m for m in models.values()}.values():
            with contextlib.suppress(ModelError):
                llm.close()
    print(report.markdown)
    print(f"status: {report.status} (task {report.task})")
    for reason in report.status_reasons:
        print(f"  - {reason}")
    if args.out:
        app.export_report(report, _fmt_for(args.out, args.format), args.out)
        print(f"wrote {args.out}")
    return EXIT_OK if report.status == "answered" else EXIT_PARTIAL


def cmd_tasks(app: Sourcebook, args: argparse.Namespace) -> int:
    if args.action == "show":
        if not args.name:
            raise ConfigError("Which task?", hint="Use `sourcebook tasks show NAME`.")
        info, spans = app.task(args.name)
        if args.json:
            print(
                json.dumps(
                    {
                        "task": info.model_dump(mode="json"),
                        "spans": [s.model_dump() for s in spans],
                    },
                    indent=2,
                )
            )
            return EXIT_OK
        print(f"{info.name}: {info.status}  ({info.runs} run(s))\nquestion: {info.question}")
        total = sum(s.seconds for s in spans if s.kind == "stage")
        print(f"\nwhere the time went ({total:.1f} s in stages):")
        print(f"  {'span':<32} {'count':>5} {'seconds':>8} {'prompt tok':>10} {'gen tok':>8}")
        for name, count, secs, ptok, ctok in timing_summary(spans):
            print(f"  {name:<32} {count:>5} {secs:>8.2f} {ptok:>10} {ctok:>8}")
        return EXIT_OK
    tasks = app.tasks()
    if args.json:
        print(json.dumps([t.model_dump(mode="json") for t in tasks], indent=2))
        return EXIT_OK
    if not tasks:
        print('No research tasks yet. Start one with `sourcebook research "question"`.')
    log = app.task_log()
    try:
        now = time.time()
        for t in tasks:
            status = t.status
            if status == "running":  # a run that is going on holds the task's lease
                holder = log.lease_holder(t.name)
                alive = holder is not None and not holder.stale(now)
                status = f"running (pid {holder.pid})" if alive and holder else "interrupted"
            asked = "ask: " if t.params.get("kind") == "conversation" else ""
            print(f"{t.name:<40} {status:<22} {asked}{t.question[:60]}")
    finally:
        log.close()
    return EXIT_OK


def cmd_export(app: Sourcebook, args: argparse.Namespace) -> int:
    fmt: ExportFormat = args.format or (_fmt_for(args.out, None) if args.out else "md")
    if args.out is None and fmt in BINARY_FORMATS:
        raise ConfigError(f"A {fmt} export needs a file.", hint=f"Pass --out FILE.{fmt}.")
    data = app.export(args.task, fmt, args.out)
    if args.out is None:
        sys.stdout.write(data.decode("utf-8"))
    else:
        print(f"wrote {args.out} ({len(data)} bytes)")
    return EXIT_OK


# ----------------------------------------------------------------------------- eval


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        ks = []
    if not ks or ks[0] < 1:
        raise ConfigError(f"Bad --k {text!r}.", hint="Use positive integers, like --k 2,5,10.")
    return ks


SERIES_CHARS = 60  # of a series name after "eval-"


def _series(model: str, tag: str, own_docs: bool) -> str:
    """The task-name prefix of an evaluation series: eval-MODEL[-TAG][-own-docs].

    A name too long to keep whole (several role models, a long tag) is cut and ends with a
    digest of the whole: cut alone, it lost the tag and ``own-docs``, and a second series of the
    same models would have resumed the first one's tasks as its own."""
    series = f"{model} {tag} {'own-docs' if own_docs else ''}"
    name = re.sub(r"[^a-z0-9.]+", "-", series.strip().lower())
    if len(name) > SERIES_CHARS:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: SERIES_CHARS - 9].rstrip('-')}-{digest}"
    return "eval-" + name


def cmd_eval(app: Sourcebook, args: argparse.Namespace) -> int:
    from core import eval as ev
    from core import eval_data

    ks = _parse_ks(args.k)
    if args.shareable and args.out is None:
        raise ConfigError("--shareable says how to write --out.", hint="Add --out FILE.json.")
    dataset, questions = eval_data.load_questions(args.questions)
    questions = ev.select(questions, only=args.only, limit=args.limit)
    for path in (args.corpus, args.docs):
        if path is not None and not path.exists():
            raise ConfigError(f"{path} does not exist.")
    temp = args.library is None
    home = Path(tempfile.mkdtemp(prefix="sourcebook-eval-")) if temp else args.library
    # The evaluation library lives under its own home: the user's library is never touched.
    settings = app.settings.model_copy(
        update={"library": app.settings.library.model_copy(update={"path": None})}
    )
    models = build_models(app, args)
    model = ", ".join(sorted({m.name for m in models.values()}))
    lab = Sourcebook(home, settings=settings, embedder=app.embedder, llms=models)
    out: Path | None = args.out
    # A shareable result's reports, for eval-rescore: kept with the library, never shared.
    full = home / "results" / out.name if out is not None and args.shareable and not temp else None

    def write(result: ev.EvalResult) -> None:
        assert out is not None
        if args.shareable:
            _write_json(out, shareable(result.model_dump(mode="json")))
            if full is not None:
                _write_json(full, result.model_dump(mode="json"))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(result.model_dump_json(indent=2), encoding="utf-8")

    try:
        print(f"evaluation library: {home}", file=sys.stderr)
        ingest = eval_data.prepare_library(lab, dataset, args.corpus, args.docs)
        if ingest.get("skipped"):
            print(f"using the {ingest['documents']} documents already there", file=sys.stderr)
        else:
            print(f"ingested: {ingest}", file=sys.stderr)
        if args.replay is not None and args.replay == args.tag:
            raise ConfigError(
                "--replay names the series this run would write.",
                hint="Give the new runs their own --tag.",
            )
        evaluator = ev.Evaluator(
            lab,
            dataset,
            models,
            ks=ks,
            task_prefix=_series(
                model, f"{args.tag} ask" if args.mode == "ask" else args.tag, args.own_docs
            ),
            corpus=args.corpus,
            own_docs=args.own_docs,
            on_event=None if args.quiet else _eval_progress,
            limits=lab.research_limits(stages_off=args.off) if args.off else None,
            replay_prefix=(
                None if args.replay is None else _series(model, args.replay, args.own_docs)
            ),
            replay_from=args.replay_from,
            mode=args.mode,
        )

        def on_result(i: int, r: ev.QuestionResult, so_far: ev.EvalResult) -> None:
            print(f"[{i}/{len(questions)}] {_result_line(r)}", file=sys.stderr, flush=True)
            if out is not None:
                write(so_far)

        result = ev.run_eval(
            evaluator,
            questions,
            questions_file=args.questions,
            library=home,
            model=model,
            ingest=ingest,
            on_result=on_result,
        )
    finally:
        lab.close()
        for llm in {id(m): m for m in models.values()}.values():
            with contextlib.suppress(ModelError):
                llm.close()
        if temp:
            shutil.rmtree(home, ignore_errors=True)
    print(format_eval(result))
    if out is not None:
        write(result)
        print(f"wrote {out}")
        if full is not None:
            print(f"wrote the full result (reports, questions) to {full}", file=sys.stderr)
    return EXIT_OK if result.summary.invalid_citations == 0 else EXIT_PARTIAL


def cmd_eval_rescore(app: Sourcebook, args: argparse.Namespace) -> int:
    from core import eval as ev
    from core import eval_data

    try:
        saved = json.loads(args.result.read_text(encoding="utf-8"))
        dataset = saved["summary"]["dataset"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"Cannot read the result {args.result}: {exc}") from exc
    kind, questions = eval_data.load_questions(args.questions)
    if kind != dataset:
        raise ConfigError(
            f"{args.result} is a {dataset} result, {args.questions} holds {kind} questions.",
            hint="Pass the question file the result was made from.",
        )
    result = ev.rescore(saved, {q.qid: q.answers for q in questions})
    if args.shareable or saved.get("redacted"):
        result = shareable(result)
    print(format_eval(ev.EvalResult.model_validate(result)))
    out: Path = args.out or args.result
    _write_json(out, result)
    print(f"wrote {out}")
    return EXIT_OK


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def _eval_progress(qid: str, ev: RunEvent) -> None:
    if ev.kind in ("stage", "worker"):
        who = f"[{ev.worker}] " if ev.worker else ""
        print(f"  {qid[:24]} {ev.stage or ev.kind}: {who}{ev.text}"[:160], file=sys.stderr)


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _hops(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)}" if flags else "-"


def _verdict(trust: Any) -> str:
    if trust is None:
        return "-"
    if not trust.asserted:
        return "abst"
    return "right" if trust.right else "WRONG"


def _claims(trust: Any) -> str:
    return "-" if trust is None else f"{trust.supported_claims}/{trust.claims}"


def _result_line(r: Any) -> str:
    return (
        f"{r.qid[:28]} {r.status} {r.seconds:.0f}s fetchedR={_f(r.fetched_recall)} "
        f"F1={_f(r.answer.first_f1)} citeR={_f(r.citation_recall)} invalid={r.invalid_citations}"
        + (f" error={r.error}" if r.error else "")
    )


def format_eval(result: Any) -> str:
    """The per-question table and the totals of an evaluation."""
    s = result.summary
    ks = [f"@{k}" for k in s.ks]
    head = (
        f"{'question':<30} {'status':<21}"
        + "".join(f"{'R' + k:>6}" for k in ks)
        + f"{'fetR':>6}{'hops':>6}{'EM':>5}{'F1':>6}{'F1*':>6}{'citP':>6}{'citR':>6}"
        + f"{'page':>6}{'inv':>4}{'ans':>6}{'sup':>7}{'sec':>7}"
    )
    scope = ", each within its own filing" if result.scope == "own-docs" else ""
    if result.mode == "ask":
        scope += ", answered by Ask"
    lines = [
        f"{s.dataset}: {s.questions} question(s), model {s.model}{scope}",
        head,
        "-" * len(head),
    ]
    for r in result.questions:
        acc = r.page_accuracy if r.page_accuracy is not None else r.quote_accuracy
        lines.append(
            f"{r.qid[:30]:<30} {(r.status if not r.error else 'error')[:21]:<21}"
            + "".join(f"{_f(r.baseline_recall.get(k)):>6}" for k in ks)
            + f"{_f(r.fetched_recall):>6}{_hops(r.hops_fetched):>6}"
            + f"{_f(r.answer.first_em, 0):>5}{_f(r.answer.first_f1):>6}{_f(r.answer.best_f1):>6}"
            + f"{_f(r.citation_precision):>6}{_f(r.citation_recall):>6}"
            + f"{_f(acc):>6}{r.invalid_citations:>4}"
            + f"{_verdict(r.trust):>6}{_claims(r.trust):>7}{r.seconds:>7.0f}"
        )
    acc = s.page_accuracy if s.page_accuracy is not None else s.quote_accuracy
    trust = s.trust
    lines.append("-" * len(head))
    lines.append(
        f"{'mean':<30} {'':<21}"
        + "".join(f"{_f(s.baseline_recall.get(k)):>6}" for k in ks)
        + f"{_f(s.fetched_recall):>6}{_f(s.hop_recall_fetched.get('all')):>6}"
        + f"{_f(s.em_first):>5}{_f(s.f1_first):>6}{_f(s.f1_best):>6}"
        + f"{_f(s.citation_precision):>6}{_f(s.citation_recall):>6}"
        + f"{_f(acc):>6}{s.invalid_citations:>4}"
        + f"{_f(trust.selective_accuracy if trust else None):>6}"
        + f"{_f(trust.claim_support_rate if trust else None):>7}"
        + f"{_f(s.seconds_mean, 0):>7}"
    )
    lines.append("")
    lines.append(
        "R@k: gold recall of plain hybrid search (baseline); fetR: gold share of what the run "
        "fetched; hops: hops whose gold the run fetched; EM/F1: first sentence of the report; "
        "F1*: best sentence; citP/citR: cited units that are gold / gold units cited; page: "
        "cited text found on the cited PDF page (or in the corpus record); inv: invalid citations; "
        "ans: the answer asserted and right, asserted and WRONG (confidently wrong), or abst "
        "(abstained: answer flagged ⚠, insufficient evidence, or none), mean: right among "
        "asserted; sup: claims the claim check let stand / claims it judged."
    )
    if s.hop_recall_fetched:
        hops = ", ".join(
            f"{k} {_f(v)}/{_f(s.hop_recall_baseline.get(k))}"
            for k, v in s.hop_recall_fetched.items()
        )
        lines.append(f"per-hop recall, run fetched / baseline top-5: {hops}")
    lines.append(
        f"gold share of everything the run's searches showed (fetched or not): {_f(s.seen_recall)}"
    )
    if s.numeric_match is not None:
        lines.append(f"numeric answer match (1% tolerance): {_f(s.numeric_match)}")
    lines.append(
        "statuses: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items()))
        + f"; total time {s.seconds_total:.0f} s"
    )
    if trust is not None:
        lines.append(
            f"trust: {trust.asserted} answer(s) asserted, {trust.abstained} abstained, "
            f"{trust.confidently_wrong} confidently wrong; selective accuracy (right among "
            f"asserted) {_f(trust.selective_accuracy)}; claims supported "
            f"{trust.supported_claims}/{trust.claims} ({_f(trust.claim_support_rate)})"
        )
    for name, t in s.targets.items():
        value = t["value"] if isinstance(t["value"], int) else _f(t["value"])
        lines.append(
            f"target {name}: {value} (target {t['target']}) {'met' if t['met'] else 'MISSED'}"
        )
    if s.unmapped_gold:
        lines.append(f"warning: {len(s.unmapped_gold)} gold unit(s) not in the library")
    return "\n".join(lines)
