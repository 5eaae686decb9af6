"""The ``ask`` command: a cited answer in seconds, and follow-ups in a named conversation.

``sourcebook ask "question"`` starts a conversation (named from the question, or by
``--conversation NAME``); ``sourcebook ask --conversation NAME "follow-up"`` continues it.
The answer streams to stderr as the model writes it; the checked answer, with its Sources, goes
to stdout. ``sourcebook ask --conversation NAME`` without a question reopens it: a turn that was
interrupted is resumed, otherwise the whole conversation is printed.

``add_parsers(subparsers)`` adds the command and returns ``{command: handler}``, which
``core.cli`` registers next to its own.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from core.cli_research import EXIT_OK, EXIT_PARTIAL, Handler, _fmt_for, build_models
from core.errors import ConfigError, ModelError
from core.export import FORMATS, check_out
from core.research.conversation import conversation_of
from core.research.schemas import ROLES, Boundary, RunEvent
from core.service import Sourcebook


def add_parsers(sub: Any) -> dict[str, Handler]:
    a = sub.add_parser(
        "ask",
        help="Ask a question: one search, one model call, the answer checked and cited in "
        "seconds; follow up with --conversation NAME.",
        description="Answer a question from the library in seconds: one search inside the "
        "sources, one model call (streamed), then the citation and support checks of a "
        "research run. The answer is stated only when its checks pass. Follow-up questions in "
        "the same --conversation reuse what it read and search again for what is new.",
    )
    a.add_argument("question", nargs="?", help="The question (omit it to reopen --conversation).")
    a.add_argument(
        "--conversation",
        "-c",
        metavar="NAME",
        help="Conversation to start or continue (default: a new one named from the question).",
    )
    a.add_argument("--doc", action="append", default=[], help="Only this document (repeat).")
    a.add_argument("--collection", action="append", default=[], help="Only this collection.")
    a.add_argument(
        "--fresh", action="store_true", help="Ask again when it is the conversation's last."
    )
    a.add_argument("--model", help="Model for every role.")
    for role in ROLES:
        a.add_argument(f"--model-{role}", help=argparse.SUPPRESS)
    a.add_argument("--out", type=Path, help="Also write the checked answer to this file.")
    a.add_argument("--format", choices=FORMATS, help="Format for --out (default: by suffix).")
    a.add_argument("--quiet", action="store_true", help="No progress or streaming on stderr.")
    return {"ask": cmd_ask}


def cmd_ask(app: Sourcebook, args: argparse.Namespace) -> int:
    question: str | None = args.question
    if not question and not args.conversation:
        raise ConfigError(
            "What is the question?",
            hint='Use `sourcebook ask "question"`, or `--conversation NAME` to reopen one.',
        )
    if args.out:  # a wrong --out is told before the model runs
        _fmt_for(args.out, args.format)
        check_out(args.out)
    if question is None:
        conv = app.conversation(args.conversation)
        pending = conv.pending()
        if pending is None:
            print(app.report(conv.name).markdown, end="")
            print(f"conversation {conv.name}: {len(conv.turns)} question(s)")
            return EXIT_OK
        question = pending[1]
        if not args.quiet:
            print(f"… resuming: {question}", file=sys.stderr)
    picked = bool(args.doc or args.collection)
    boundary = (
        Boundary(doc_refs=tuple(args.doc), collections=tuple(args.collection)) if picked else None
    )
    quiet = args.quiet
    streamed: list[str] = []

    def on_event(ev: RunEvent) -> None:
        if not quiet and ev.kind == "stage" and ev.stage != "done":
            print(f"… {ev.stage}" + (f": {ev.text}" if ev.text else ""), file=sys.stderr)

    def on_token(tok: str) -> None:
        if not quiet:
            streamed.append(tok)
            print(tok, end="", file=sys.stderr, flush=True)

    models = build_models(app, args)
    try:
        report = app.ask(
            question,
            conversation=args.conversation,
            models=models,
            boundary=boundary,
            fresh=args.fresh,
            on_event=on_event,
            on_token=on_token,
        )
    finally:
        for llm in {id(m): m for m in models.values()}.values():
            with contextlib.suppress(ModelError):
                llm.close()
    if streamed:
        print("\n--- checked answer ---", file=sys.stderr)
    name = conversation_of(report.task)
    print(report.markdown, end="" if report.markdown.endswith("\n") else "\n")
    print(f"status: {report.status} (conversation {name}, task {report.task})")
    for reason in report.status_reasons:
        print(f"  - {reason}")
    if not quiet:
        print(
            f'follow up: sourcebook ask --conversation {name} "..."; research it in full: '
            f"sourcebook research --from-conversation {name}",
            file=sys.stderr,
        )
    if args.out:
        app.export_report(report, _fmt_for(args.out, args.format), args.out)
        print(f"wrote {args.out}")
    return EXIT_OK if report.status == "answered" else EXIT_PARTIAL
