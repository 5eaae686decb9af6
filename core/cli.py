"""The `sourcebook` command line.

Exit codes: 0 success; 1 some inputs failed (the rest was done); 2 usage or settings error;
3 not found; 4 any other Sourcebook error (the message says what to do); 75 the task is being
run by another process (sysexits' EX_TEMPFAIL: try again later); 130 interrupted; 141 the reader
of the output went away (``| head``), the code a tool stopped by SIGPIPE reports.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from core.cli_ask import add_parsers as add_ask_parsers
from core.cli_research import add_parsers
from core.errors import ConfigError, NotFoundError, SourcebookError, TaskBusyError
from core.ingest import text_lost
from core.ingest.web import looks_like_url
from core.library import AddProgress, LibraryChanges, ProgressFn
from core.llms import list_models, probe_local_runtime
from core.logging_setup import configure_logging
from core.service import Sourcebook
from models.probe import RuntimeCrashed

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_ERROR = 0, 1, 2, 3, 4
EXIT_BUSY, EXIT_BROKEN_PIPE = 75, 141


def _pages(start: int | None, end: int | None) -> str:
    if start is None:
        return "-"
    return f"p. {start + 1}" if end in (None, start) else f"pp. {start + 1}-{(end or 0) + 1}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sourcebook",
        description="Offline research assistant: a local library of documents, cited answers.",
    )
    p.add_argument("--home", type=Path, help="Folder for settings, library and logs.")
    p.add_argument("-v", "--verbose", action="store_true", help="Log more detail.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    a = sub.add_parser(
        "add",
        help="Add files or folders (PDF, text, Markdown, HTML, JSONL) or web pages (http(s) URLs, "
        "when web.enabled is set).",
    )
    a.add_argument("paths", nargs="+", type=_path_or_url, metavar="PATH_OR_URL")
    a.add_argument("--collection", help="Also put the added documents in this collection.")
    a.add_argument("--title-field", default="title", help="JSONL: field holding the title.")
    a.add_argument("--text-field", default="text", help="JSONL: field holding the text.")
    a.add_argument("--id-field", help="JSONL: field holding the record's own id.")
    a.add_argument("--quiet", action="store_true", help="No progress bar.")

    d = sub.add_parser("docs", help="List documents with pages, passages, status, problems.")
    d.add_argument("--json", action="store_true", help="Print JSON.")
    d.add_argument("--all", action="store_true", help="Include superseded versions.")

    r = sub.add_parser("remove", help="Remove a document (id, id prefix, title or file name).")
    r.add_argument("doc")

    s = sub.add_parser("search", help="Hybrid search of the library.")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=None, help="Number of hits (default 10).")
    s.add_argument("--doc", action="append", default=[], help="Only this document (repeat).")
    s.add_argument("--collection", action="append", default=[], help="Only this collection.")
    s.add_argument("--graph", action="store_true", help="Expand through the knowledge graph.")
    s.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    s.add_argument("--json", action="store_true", help="Print JSON.")

    sh = sub.add_parser("show", help="Show an evidence id: text, document, page, boxes.")
    sh.add_argument("evidence_id")
    sh.add_argument("--json", action="store_true", help="Print JSON.")

    sub.add_parser("collections", help="List collections.")

    rb = sub.add_parser(
        "reembed",
        help="Recompute every passage's vector with the current embedder (after changing "
        "models.embedder_runtime); documents and passages are kept.",
    )
    rb.add_argument("--force", action="store_true", help="Also when the vectors already match.")
    rb.add_argument("--quiet", action="store_true", help="No progress bar.")

    m = sub.add_parser("models", help="List the language models Sourcebook can use.")
    m.add_argument(
        "--path", action="append", default=[], type=Path, help="Also scan this folder for GGUF."
    )
    m.add_argument("--json", action="store_true", help="Print JSON.")
    m.add_argument(
        "--probe",
        action="store_true",
        help="Test the local runtime again (a one-token run in a child process) even when its "
        "result for this build is known.",
    )
    mc = sub.add_parser(
        "mcp",
        help="Serve the library's evidence tools to an MCP client (stdio; --http for HTTP on "
        "127.0.0.1). Read-only unless --allow-add.",
    )
    mc.add_argument("--doc", action="append", default=[], help="Only this document (repeat).")
    mc.add_argument("--collection", action="append", default=[], help="Only this collection.")
    mc.add_argument(
        "--allow-add",
        action="append",
        default=[],
        type=Path,
        metavar="FOLDER",
        help="Let the client add files from this folder (repeat); they join the sources.",
    )
    mc.add_argument("--http", action="store_true", help="Streamable HTTP on 127.0.0.1.")
    mc.add_argument("--port", type=int, default=8765, help="Port for --http (default 8765).")
    mc.add_argument("--model", help="Model for every role of the research tool.")
    COMMANDS.update(add_parsers(sub))  # research, tasks, export
    COMMANDS.update(add_ask_parsers(sub))  # ask
    return p


def _progress_printer(quiet: bool) -> tuple[ProgressFn, Callable[[], None]]:
    """A progress callback drawing one tqdm bar over the batch, and a closer."""
    if quiet or (not sys.stderr.isatty() and os.environ.get("SOURCEBOOK_PROGRESS") != "1"):
        return (lambda _ev: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=0, unit="doc", file=sys.stderr, leave=False)
    lock = threading.Lock()

    def on(ev: AddProgress) -> None:
        with lock:
            if ev.total and bar.total != ev.total:
                bar.total = ev.total
            name = Path(ev.source).name[:40]
            detail = f" {ev.done}/{ev.of}" if ev.of else ""
            bar.set_description(f"{ev.stage} {name}{detail}")
            if ev.stage == "done":
                bar.update(1)

    return on, bar.close


def _passage_bar(quiet: bool) -> tuple[ProgressFn, Callable[[], None]]:
    """A progress callback drawing one tqdm bar over passages (``done``/``of``), and a closer."""
    if quiet or (not sys.stderr.isatty() and os.environ.get("SOURCEBOOK_PROGRESS") != "1"):
        return (lambda _ev: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=0, unit="passage", file=sys.stderr, leave=False)

    def on(ev: AddProgress) -> None:
        bar.total = ev.of
        bar.set_description(f"{ev.stage} {ev.source[:40]}")
        bar.update(ev.done - bar.n)

    return on, bar.close


def _print_changes(changes: LibraryChanges) -> int:
    counts: dict[str, int] = {}
    for r in changes.results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
        if r.outcome in ("added", "new_version"):
            extra = f" (new version; {r.superseded} superseded)" if r.superseded else ""
            print(f"added    {r.doc_id}  {r.title}{extra}")
            for prob in r.problems:
                print(f"         note: {prob}")
        elif r.outcome == "unchanged":
            print(f"skipped  {r.doc_id}  {r.title} (already in the library, unchanged)")
    if changes.skipped:
        print(_skipped_line(changes.skipped))
    failed = changes.failed
    if failed:
        print(f"\n{len(failed)} file(s) could not be added:", file=sys.stderr)
        for r in failed:
            print(f"  {r.source}: {r.error}", file=sys.stderr)
            if r.hint:
                print(f"    -> {r.hint}", file=sys.stderr)
    summary = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(counts.items()))
    print(f"done: {summary or 'nothing to add'}")
    return EXIT_PARTIAL if failed else EXIT_OK


def _skipped_line(skipped: list[str], shown: int = 10) -> str:
    """One line naming the folders' files left out for their type (the first few of many)."""
    n = len(skipped)
    more = f" and {n - shown} more" if n > shown else ""
    names = ", ".join(skipped[:shown])
    return f"Skipped {n} file{'s' if n != 1 else ''} of unsupported type: {names}{more}"


def _path_or_url(arg: str) -> Path | str:
    """URLs stay strings (a Path would fold ``//``); everything else is a path."""
    return arg.strip() if looks_like_url(arg) else Path(arg)


def _cmd_add(app: Sourcebook, args: argparse.Namespace) -> int:
    on, close = _progress_printer(args.quiet)
    try:
        jsonl = [p for p in args.paths if isinstance(p, Path) and p.suffix.lower() == ".jsonl"]
        others = [p for p in args.paths if p not in jsonl]
        changes = LibraryChanges()
        if others:
            changes = app.add(others, collection=args.collection, progress=on)
        for path in jsonl:
            more = app.add_jsonl(
                path,
                title_field=args.title_field,
                text_field=args.text_field,
                id_field=args.id_field,
                collection=args.collection,
                progress=on,
            )
            changes.results.extend(more.results)
    finally:
        close()
    return _print_changes(changes)


def _cmd_docs(app: Sourcebook, args: argparse.Namespace) -> int:
    docs = app.documents(include_superseded=args.all)
    if args.json:
        print(json.dumps([d.model_dump(mode="json") for d in docs], indent=2))
        return EXIT_OK
    if not docs:
        print("The library is empty. Add documents with `sourcebook add PATH`.")
        return EXIT_OK
    print(f"{'id':<21} {'pages':>5} {'passages':>8}  {'status':<10} title")
    for d in docs:
        status = "superseded" if d.superseded_by else d.status
        ver = f" (v{d.version})" if d.version > 1 or d.superseded_by else ""
        print(f"{d.doc_id:<21} {d.page_count:>5} {d.passage_count:>8}  {status:<10} {d.title}{ver}")
        for prob in d.problems:  # "!" text left unread; "note:" how text was read (OCR, ...)
            print(f"{'':<48}{'!' if text_lost(prob) else 'note:'} {prob}")
    mismatch = app.embedder_mismatch()
    if mismatch is None:
        print(f"\nvectors made by {app.embedder_identity()}")
    else:
        print(f"warning: {mismatch}", file=sys.stderr)
    return EXIT_OK


def _cmd_search(app: Sourcebook, args: argparse.Namespace) -> int:
    hits = app.search(
        args.query,
        k=args.k,
        doc_refs=args.doc,
        collections=args.collection,
        graph=True if args.graph else None,
        mode=args.mode,
    )
    if args.json:
        print(json.dumps([h.model_dump(mode="json") for h in hits], indent=2))
        return EXIT_OK
    if not hits:
        print("No results. Check the spelling, or add documents with `sourcebook add`.")
        return EXIT_OK
    for i, h in enumerate(hits, 1):
        flag = " [superseded]" if h.superseded else ""
        print(f"{i:>2}. {h.evidence_id}  {h.title}, {_pages(h.page_start, h.page_end)}{flag}")
        print(f"    score {h.score:.3f} via {'+'.join(h.signals)}")
        snippet = " ".join(h.snippet.split())
        print(textwrap.fill(snippet, 96, initial_indent="    ", subsequent_indent="    "))
    return EXIT_OK


def _cmd_show(app: Sourcebook, args: argparse.Namespace) -> int:
    ev = app.evidence(args.evidence_id)
    if args.json:
        print(ev.model_dump_json(indent=2))
        return EXIT_OK
    pages = ", ".join(str(p) for p in ev.pages) or "-"
    print(f"{ev.evidence_id}\n{ev.title}  ({ev.kind}, {ev.source_uri})")
    print(f"page(s): {pages}   heading: {' > '.join(ev.heading_path) or '-'}")
    if ev.superseded:
        print("note: this document version has been superseded by a newer one")
    print()
    print(textwrap.fill(ev.text, 96))
    if ev.boxes:
        print(f"\n{len(ev.boxes)} word boxes (page: x0,y0,x1,y1):")
        for w in ev.boxes[:8]:
            x0, y0, x1, y1 = w.rect
            print(
                f"  p{w.page_index + 1}: {x0:.1f},{y0:.1f},{x1:.1f},{y1:.1f}  "
                f"{ev.passage_text[w.start : w.end]}"
            )
        if len(ev.boxes) > 8:
            print(f"  ... {len(ev.boxes) - 8} more (use --json)")
    return EXIT_OK


def _cmd_collections(app: Sourcebook, _args: argparse.Namespace) -> int:
    cols = app.collections()
    if not cols:
        print("No collections. Use `sourcebook add PATH --collection NAME`.")
    for c in cols:
        print(f"{c.name}: {len(c.doc_ids)} document(s)")
    return EXIT_OK


def _cmd_remove(app: Sourcebook, args: argparse.Namespace) -> int:
    doc = app.library.resolve_document(args.doc)
    app.remove(doc.doc_id)
    print(f"removed {doc.doc_id}  {doc.title}")
    return EXIT_OK


def _cmd_reembed(app: Sourcebook, args: argparse.Namespace) -> int:
    if app.embedder_mismatch() is None and not args.force:
        print(
            f"Nothing to do: the vectors were made by the current embedder, "
            f"{app.embedder_identity()}. Use --force to recompute them anyway."
        )
        return EXIT_OK
    print(f"re-embedding with {app.embedder_identity()}", file=sys.stderr)
    on, close = _passage_bar(args.quiet)
    try:
        result = app.reembed(progress=on)
    except KeyboardInterrupt:
        print(
            "interrupted; documents and passages are intact, and the library stays flagged "
            "until `sourcebook reembed` finishes.",
            file=sys.stderr,
        )
        return 130
    finally:
        close()
    print(
        f"re-embedded {result.passages} passage(s) of {result.documents} document version(s) "
        f"in {result.seconds:.1f} s; vectors made by {result.embedder}"
    )
    return EXIT_OK


def _size(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def _cmd_models(app: Sourcebook, args: argparse.Namespace) -> int:
    entries = list_models(app.settings.models, args.path)
    if args.json:
        print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2))
        return EXIT_OK
    default = app.settings.models.default
    print(f"{'name':<44} {'size':>8} {'context':>8} {'quant':<8} where")
    for e in entries:
        mark = "*" if e.name == default else " "
        ctx = str(e.context_length or "-")
        print(
            f"{mark}{e.name:<43} {_size(e.size_bytes):>8} {ctx:>8} {e.quantization or '-':<8} "
            f"{e.source}: {e.location}"
        )
        if not e.available:
            why = e.error or "not installed"
            print(
                f"{'':<46}! {why}"
                + (f"; install: {e.install_command}" if e.install_command else "")
            )
    print("\n* default model (setting models.default). Select by any unique name prefix.")
    probed = probe_local_runtime(entries, default, force=args.probe)
    if probed is None:
        print("Local runtime (llama.cpp): not tested yet; it is tested at a model's first use.")
    else:
        entry, result = probed
        if result.ok:
            variant = f", CPU variant {result.variant}" if result.variant else ""
            print(
                f"Local runtime (llama.cpp): works on this CPU (a one-token test run of "
                f"{entry.name} in a child process{', earlier' if result.cached else ''}"
                f"{variant})."
            )
            for skipped in result.skipped:
                print(f"  skipped the better-ranked CPU variant {skipped}")
        elif result.crashed:
            print(
                f"Local runtime (llama.cpp): CRASHED in a test run of {entry.name}: "
                f"{result.detail}.\n{RuntimeCrashed.default_hint}"
            )
        else:
            print(
                f"Local runtime (llama.cpp): the test run of {entry.name} failed: {result.detail}."
            )
    return EXIT_OK


def _cmd_mcp(app: Sourcebook, args: argparse.Namespace) -> int:
    # Imported here: the SDK (and its web stack) is loaded only by the command that serves.
    from core.cli_research import build_models
    from core.mcp_server import LOOPBACK, serve
    from core.mcp_session import EvidenceSession
    from core.research.schemas import Boundary

    boundary = Boundary(doc_refs=tuple(args.doc), collections=tuple(args.collection))
    session = EvidenceSession(
        app, boundary, add_folders=args.allow_add, models=lambda: build_models(app, args)
    )
    try:
        where = f"http://{LOOPBACK}:{args.port}/mcp" if args.http else "stdio"
        mode = "read-only" if not session.add_folders else "adds allowed"
        line = f"sourcebook mcp: {session.describe()} ({mode}) on {where}"
        print(line, file=sys.stderr, flush=True)
        serve(session, http=args.http, port=args.port)
    finally:
        session.close()
    return EXIT_OK


COMMANDS = {
    "models": _cmd_models,
    "mcp": _cmd_mcp,
    "add": _cmd_add,
    "remove": _cmd_remove,
    "docs": _cmd_docs,
    "search": _cmd_search,
    "show": _cmd_show,
    "collections": _cmd_collections,
    "reembed": _cmd_reembed,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        # Flushed here rather than at exit, so a reader that went away is met below.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader closed the pipe (`| head`, `less` quit): stop quietly, as a pipeline's
        # tools do. Python's recipe: stdout now points at devnull, so the interpreter's last
        # flush of what is still buffered cannot fail again. Not 0: the output was cut short
        # (a later step, such as writing --out, may not have run); 141 = 128 + SIGPIPE is what
        # a tool killed by the closed pipe reports, so scripts see it like `yes | head`.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    app: Sourcebook | None = None
    try:
        app = Sourcebook(args.home)
        configure_logging(app.home / "logs", verbose=args.verbose)
        return COMMANDS[args.command](app, args)
    except KeyboardInterrupt:
        print("interrupted; nothing half-added was kept.", file=sys.stderr)
        return 130
    except SourcebookError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  -> {exc.hint}", file=sys.stderr)
        if isinstance(exc, ConfigError):
            return EXIT_USAGE
        if isinstance(exc, TaskBusyError):
            return EXIT_BUSY
        return EXIT_NOT_FOUND if isinstance(exc, NotFoundError) else EXIT_ERROR
    finally:
        if app is not None:
            app.close()


if __name__ == "__main__":
    sys.exit(main())
