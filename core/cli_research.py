"""The research commands of the command line: ``research``, ``tasks [show NAME]``, ``export``.

``add_parsers(subparsers)`` adds them and returns ``{command: handler}``; ``core.cli`` registers
the handlers next to its own. Progress goes to stderr, the streamed report to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.errors import ConfigError, ModelError
from core.export import FORMATS, ExportFormat, export_report
from core.research.schemas import ROLES, Boundary, ResearchPlan, RunEvent
from core.service import Sourcebook
from core.tasks import timing_summary
from models.llm import LLM

Handler = Callable[[Sourcebook, argparse.Namespace], int]
EXIT_OK, EXIT_PARTIAL, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any) -> dict[str, Handler]:
    r = sub.add_parser("research", help="Research a question in the library; print a cited report.")
    r.add_argument("question")
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
    r.add_argument("--model", help="Model for every role.")
    for role in ROLES:
        r.add_argument(f"--model-{role}", help=f"Model for the {role} role.")
    r.add_argument("--quiet", action="store_true", help="No progress on stderr.")

    t = sub.add_parser("tasks", help="List research tasks, or `tasks show NAME`.")
    t.add_argument("action", nargs="?", choices=["show"])
    t.add_argument("name", nargs="?")
    t.add_argument("--json", action="store_true")

    e = sub.add_parser("export", help="Export a task's report: md, html, pdf or json.")
    e.add_argument("task")
    e.add_argument("--format", choices=FORMATS, default="md")
    e.add_argument("--out", type=Path, help="Write to this file (default: stdout; pdf needs it).")
    return {"research": cmd_research, "tasks": cmd_tasks, "export": cmd_export}


def build_models(app: Sourcebook, args: argparse.Namespace) -> Mapping[str, LLM]:
    """One LLM per role from settings and ``--model`` / ``--model-ROLE``."""
    injected = getattr(args, "models", None)
    if injected is not None:
        return dict(injected)
    overrides = {r: getattr(args, f"model_{r}", None) for r in ROLES if r != "clarifier"}
    return app.role_models(default=args.model, overrides={k: v for k, v in overrides.items() if v})


def _fmt_for(path: Path, fmt: str | None) -> ExportFormat:
    chosen = fmt or path.suffix.lstrip(".").lower()
    chosen = {"markdown": "md", "htm": "html"}.get(chosen, chosen)
    if chosen not in FORMATS:
        raise ConfigError(
            f"Cannot tell the format of {path}.", hint="Pass --format md|html|pdf|json."
        )
    return chosen


def cmd_research(app: Sourcebook, args: argparse.Namespace) -> int:
    boundary = Boundary(doc_refs=tuple(args.doc), collections=tuple(args.collection), web=args.web)
    plan = None
    if args.plan_file:
        try:
            plan = ResearchPlan.model_validate_json(args.plan_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"Cannot use the plan file {args.plan_file}: {exc}") from exc
    models = build_models(app, args)
    try:
        if args.clarify and not args.answer:
            questions = app.clarify(args.question, models=models, boundary=boundary)
            if questions:
                print('Before researching, please answer (rerun with --answer "..."):')
                for q in questions:
                    print(f"  - {q}")
                return EXIT_PARTIAL
        quiet = args.quiet

        def on_event(ev: RunEvent) -> None:
            if quiet:
                return
            who = f"[{ev.worker}] " if ev.worker else ""
            print(f"… {ev.stage or ev.kind}: {who}{ev.text}".rstrip(": "), file=sys.stderr)

        streamed: list[str] = []

        def on_token(tok: str) -> None:
            if not quiet:
                streamed.append(tok)
                print(tok, end="", file=sys.stderr, flush=True)

        report = app.research(
            args.question,
            models=models,
            task=args.task,
            boundary=boundary,
            answers=args.answer,
            plan=plan,
            route=args.route,
            fresh=args.fresh,
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
        args.out.write_bytes(export_report(report, _fmt_for(args.out, args.format)))
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
    for t in tasks:
        print(f"{t.name:<40} {t.status:<22} {t.question[:60]}")
    return EXIT_OK


def cmd_export(app: Sourcebook, args: argparse.Namespace) -> int:
    fmt: ExportFormat = args.format
    if args.out is None and fmt == "pdf":
        raise ConfigError("A PDF needs a file.", hint="Pass --out FILE.pdf.")
    data = app.export(args.task, fmt, args.out)
    if args.out is None:
        sys.stdout.write(data.decode("utf-8"))
    else:
        print(f"wrote {args.out} ({len(data)} bytes)")
    return EXIT_OK
