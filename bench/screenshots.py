"""Screenshots of the desktop app on a real X display, for a reader to judge the window.

Starts a virtual X server (``Xvfb``; ``packaging/system-deps.sh`` installs it, and this script runs
it when ``Xvfb`` is missing) with a screen of ``--size`` (1366x768 by default, a common laptop;
``--size all`` runs 1366x768 and 1920x1080), opens the real app (``desktop.app.build_window``)
filling that screen, as a maximized window, on a fresh temporary home holding the bundled sample
library (``resources/samples/``, added through the facade before the window opens), and drives it
as an analyst would:

1. the first screen (how to begin);
2. a library search (``--search``), whose first hit opens in the evidence viewer;
3. the question typed, the sources and options unfolded, "review the plan" ticked;
4. Enter: the planner's plan under review;
5. the plan trimmed to one focused research question (``--query``; ``--query ''`` keeps the
   planner's first ``--max-queries``), the run, and the research panel as it left it;
6. the verified report, its first citation clicked (a real mouse click on the link), and the
   cited page with the words highlighted beside it;
7. the mouse resting on that citation: its hover card (quote and page).

The model is the real 0.5B starter by default (``--model``, any name ``sourcebook models``
lists), with small limits so the run takes a few minutes on two cores (1 round, 1 worker,
3 tool calls per research question); ``--scripted`` replays fixed answers
(``models.scripted.ScriptedLLM``) for a fast, deterministic run through the same panels.

Saves the whole screen at each step as ``1_start.png`` ... ``7_citation_tooltip.png`` (256-colour
PNGs of the screen's own colours, to keep them small) and ``screenshots.json`` (what was run and
shown) under ``bench/results/screenshots/WxH/`` (``--out`` for another folder). Exit code 0 when
every screenshot was taken, a citation was shown and its hover card appeared.

    .venv/bin/python bench/screenshots.py --scripted --size all   # both sizes, ~1 min each
    .venv/bin/python bench/screenshots.py                 # real 0.5B starter, a few minutes
    .venv/bin/python bench/screenshots.py --display :0    # use an existing X display
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from PySide6.QtCore import QEvent, QEventLoop, QPoint, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QGuiApplication, QHelpEvent, QImage, QPixmap, QTextCursor  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QToolTip, QWidget  # noqa: E402

import desktop.errors  # noqa: E402
from core.service import Report, Sourcebook  # noqa: E402
from desktop.app import build_window, create_application, shutdown_operations  # noqa: E402
from desktop.main_window import MainWindow  # noqa: E402
from desktop.research_inputs import starter_plan  # noqa: E402
from models.scripted import ScriptedLLM  # noqa: E402

OUT = REPO / "bench" / "results" / "screenshots"
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
SIZES = ("1366x768", "1920x1080")  # a common laptop screen and a common desktop one
SEARCH = "probable cause ground loop"
QUESTION = "Where did the accident of the aircraft N74SR happen, and what caused it?"
QUERY = "accident location and probable cause of aircraft N74SR"
SCRIPTED_ANSWER = (  # in the words of the NTSB sample report, so the citation check passes
    "The accident of the aircraft N74SR, a Sorrell SNJ-7, happened at Belen, NM, on "
    "11/27/2007 [{where}]. The probable cause was the pilot's loss of directional control "
    "during landing, resulting in a ground loop [{cause}]."
)


def say(text: str) -> None:
    print(f"screenshots: {text}", flush=True)


# ------------------------------------------------------------------------------ X display


@contextmanager
def x_display(display: str | None, size: tuple[int, int]) -> Iterator[str]:
    """Use ``display`` as it is, or start a private Xvfb of ``size`` for the block."""
    if display:
        yield display
        return
    if shutil.which("Xvfb") is None:
        say("Xvfb is missing: running packaging/system-deps.sh to install it")
        subprocess.run([str(REPO / "packaging" / "system-deps.sh")], check=False)
        if shutil.which("Xvfb") is None:
            raise SystemExit(
                "screenshots: Xvfb is not installed and could not be installed here.\n"
                "  -> Install it (Debian/Ubuntu: `sudo packaging/system-deps.sh`), or pass "
                "--display :0 to use a running X server."
            )
    screen = f"{size[0]}x{size[1]}x24"
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(  # Xvfb picks a free display number and writes it to the pipe
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", screen, "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as pipe:
            number = pipe.readline().strip()
        if not number:
            raise SystemExit("screenshots: Xvfb did not start (no display number reported).")
        say(f"started Xvfb on :{number} ({screen}), pid {proc.pid}")
        yield f":{number}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


# ------------------------------------------------------------------------------ event loop


def run_until(pred: Callable[[], bool], timeout_s: float, what: str = "") -> bool:
    """Run the real event loop until ``pred()`` holds (checked every 50 ms) or the timeout."""
    loop = QEventLoop()
    poll = QTimer()
    poll.setInterval(50)
    deadline = time.monotonic() + timeout_s

    def check() -> None:
        if pred() or time.monotonic() > deadline:
            loop.quit()

    poll.timeout.connect(check)
    poll.start()
    loop.exec()
    poll.stop()
    ok = pred()
    if not ok and what:
        say(f"timed out after {timeout_s:.0f} s waiting for {what}")
    return ok


def settle(ms: int = 400) -> None:
    """Let pending layouts, repaints and queued results land."""
    run_until(lambda: False, ms / 1000)


# ------------------------------------------------------------------------------ models


def scripted_models(service: Sourcebook) -> dict[str, ScriptedLLM]:
    """Planner, researcher and writer answers for ``QUESTION`` on the NTSB sample report."""
    where = _passage_with(service, "Belen")
    cause = _passage_with(service, "probable cause")
    planner, researcher = ScriptedLLM(name="planner"), ScriptedLLM(name="researcher")
    writer = ScriptedLLM(name="writer", token_delay_s=0.01)
    planner.enqueue(
        [
            {
                "task_analysis": "Find where the N74SR accident happened and its probable cause.",
                "answer_shape": "brief_answer",
                "components": [],
                "constraints": [],
                "queries": [
                    {"id": "q1", "query": QUERY, "purpose": "location and cause", "depends_on": []}
                ],
            }
        ]
    )
    fetches = [
        {"thought": "read it", "action": "fetch_evidence", "query": "", "evidence_id": ev}
        for ev in dict.fromkeys([where, cause])
    ]
    researcher.enqueue(
        [
            *fetches,
            {"thought": "enough", "action": "finish", "query": ""},
            {
                "findings": [
                    {"claim": "The accident happened at Belen, NM.", "evidence_ids": [where]},
                    {"claim": "Loss of directional control on landing.", "evidence_ids": [cause]},
                ],
                "gaps": [],
                "sufficient": True,
            },
        ]
    )
    short = {
        "steps": [
            {
                "question": "Where did N74SR crash?",
                "answer": "Belen, NM",
                "fact": "N74SR crashed near Belen, NM",
                "label": "E1",
            }
        ],
        "calculation": "",
        "answer": "Belen, NM",
        "labels": ["E1"],
        "answered": True,
    }  # the short cited answer (research.short_answer, on by default), then the report body
    writer.enqueue([short, SCRIPTED_ANSWER.format(where=where, cause=cause)])
    return {"planner": planner, "researcher": researcher, "writer": writer, "default": planner}


def _passage_with(service: Sourcebook, text: str) -> str:
    for hit in service.search(f"N74SR {text}", k=10, mode="keyword"):
        if text.lower() in service.evidence(hit.evidence_id).text.lower():
            return hit.evidence_id
    raise SystemExit(f"screenshots: no sample passage mentions {text!r}")


# ------------------------------------------------------------------------------ grabbing


def frequent_colours(image: QImage, n: int = 256) -> list[int]:
    """The ``n`` colours covering most pixels: a window is mostly flat colour (backgrounds, the
    light tints of status lines and highlights), so these keep every area's colour exactly;
    anti-aliased edges map to the nearest of them."""
    rgb = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(rgb.constBits(), dtype=np.uint32, count=rgb.width() * rgb.height())
    colours, counts = np.unique(pixels, return_counts=True)
    return [int(c) | 0xFF000000 for c in colours[np.argsort(counts)[::-1][:n]]]


def save(pixmap: QPixmap, path: Path, shots: dict[str, Any]) -> None:
    """Save as a 256-colour PNG of the screen's own most frequent colours: sharp text and true
    tints at about a quarter of the size of an RGB file."""
    image = pixmap.toImage()
    if not image.isNull():
        image = image.convertToFormat(
            QImage.Format.Format_Indexed8,
            frequent_colours(image),
            Qt.ImageConversionFlag.ThresholdDither,
        )
    if pixmap.isNull() or not image.save(str(path), "PNG", 0):
        say(f"could not save {path.name}")
        return
    shots[path.name] = {"width": pixmap.width(), "height": pixmap.height()}
    say(f"saved {path} ({pixmap.width()}x{pixmap.height()}, {path.stat().st_size // 1024} kB)")


def grab_window(window: QWidget) -> QPixmap:
    """The window's pixels as the X server shows them (falls back to rendering the widget)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    pixmap = screen.grabWindow(window.winId()) if screen is not None else QPixmap()
    return pixmap if not pixmap.isNull() else window.grab()


def grab_screen(window: QWidget) -> QPixmap:
    """The whole screen (the window and any tooltip or popup over it)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    return screen.grabWindow(0) if screen is not None else window.grab()


def click_first_citation(window: MainWindow) -> str | None:
    """Click (with the mouse) the first citation link in the report; returns its href."""
    browser = window.report_view.browser
    doc = browser.document()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            href = frag.charFormat().anchorHref() if frag.isValid() else ""
            if href.startswith("cite:"):
                cursor = QTextCursor(doc)
                cursor.setPosition(frag.position() + max(frag.length() // 2, 0))
                browser.setTextCursor(cursor)
                browser.ensureCursorVisible()
                settle(200)
                rect = browser.cursorRect(cursor)
                point = QPoint(rect.x(), rect.center().y())
                QTest.mouseMove(browser.viewport(), point)
                QTest.mouseClick(
                    browser.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier(0), point
                )
                return href
            it += 1
        block = block.next()
    return None


# ------------------------------------------------------------------------------ the run


def hover_first_citation(window: MainWindow) -> str:
    """Rest the mouse on the report's first citation (the tooltip event a resting mouse sends);
    returns the tooltip's text."""
    browser = window.report_view.browser
    for text, href in window.report_view.citation_links():
        if not href.startswith("cite:"):
            continue
        doc = browser.document()
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.isValid() and frag.charFormat().anchorHref() == href:
                    cursor = QTextCursor(doc)
                    cursor.setPosition(frag.position() + max(frag.length() // 2, 0))
                    rect = browser.cursorRect(cursor)
                    point = QPoint(rect.x(), rect.center().y())
                    viewport = browser.viewport()
                    QTest.mouseMove(viewport, point)
                    # the X server moves the pointer on its own time: let its leave and enter
                    # events land first (a leave hides a tooltip shown before it)
                    settle(500)
                    event = QHelpEvent(QEvent.Type.ToolTip, point, viewport.mapToGlobal(point))
                    QApplication.sendEvent(viewport, event)
                    settle(500)
                    return QToolTip.text() if QToolTip.isVisible() else ""
                it += 1
            block = block.next()
        del text
    return ""


def run(args: argparse.Namespace, out: Path, work: Path) -> dict[str, Any]:
    errors: list[str] = []
    desktop.errors.error_hook = lambda _parent, exc: errors.append(f"{type(exc).__name__}: {exc}")
    width, height = args.size
    home = work / "home"
    service = Sourcebook(home)
    settings = service.settings.model_copy(deep=True)
    settings.ui.first_run_done = True
    settings.models.default = args.model
    settings.research.max_rounds = 1
    settings.research.max_workers = args.workers
    settings.research.max_tool_calls = args.tool_calls
    settings.research.max_steps = args.tool_calls + 2
    service.save_settings(settings)

    started = time.monotonic()
    samples = service.sample_documents()
    say(f"adding {len(samples)} sample documents to a fresh library at {home}")
    changes = service.add(samples)
    if changes.failed:
        raise SystemExit(f"screenshots: samples failed: {[r.error for r in changes.failed]}")
    add_s = time.monotonic() - started
    say(f"library ready in {add_s:.0f} s")
    if args.scripted:
        llms = scripted_models(service)
        service.close()
        service = Sourcebook(home, llms=llms)

    app = create_application([sys.argv[0]])
    window = build_window(service)
    # The whole screen, as a maximized window on a laptop (Xvfb runs no window manager, so the
    # window is placed and sized here and has no frame).
    window.setWindowState(Qt.WindowState.WindowNoState)
    window.setGeometry(0, 0, width, height)
    window.show()
    window.raise_()
    window.activateWindow()
    panel = window.research_panel
    library = window.library_panel
    reports: list[Report] = []
    panel.report_ready.connect(reports.append)
    run_until(
        lambda: len(library.documents) == len(samples) and not window.ops.running,
        120,
        "the library to load",
    )
    shots: dict[str, Any] = {}

    def shot(name: str, *, screen: bool = False) -> None:
        settle()
        save(grab_screen(window) if screen else grab_window(window), out / f"{name}.png", shots)

    # 1. the first screen: how to begin
    window.new_research()
    shot("1_start")

    # 2. a library search; the first hit opens in the evidence viewer
    viewer = window.viewer
    library.search_box.setFocus()
    QTest.keyClicks(library.search_box, args.search)
    library.run_search()
    run_until(lambda: library.results.topLevelItemCount() > 0, 60, "search results")
    first = library.results.topLevelItem(0)
    if first is not None:
        library.results.itemActivated.emit(first, 0)
        run_until(lambda: viewer.mode != "empty" and not viewer.busy, 60, "the hit's page")
        run_until(lambda: not window.ops.running, 30)
    shot("2_search")

    # 3. the question, with the sources and options unfolded and the plan to review first
    window.new_research()
    QTest.keyClicks(panel.question, args.question)
    panel.options.set_expanded(True)
    panel.plan_check.setChecked(True)
    shot("3_options")
    QTest.keyClick(panel.question, Qt.Key.Key_Return)  # Enter starts
    say(f"asked: {args.question}")
    if not run_until(lambda: panel.phase == "planning", args.timeout, "the plan"):
        raise SystemExit("screenshots: no plan to review")
    planned = panel.plan_editor.plan()
    say(f"the planner proposed {len(planned.queries)} research question(s)")
    shot("4_plan")

    # a short plan, as an analyst trimming it would: one focused question (--query), or the
    # planner's first --max-queries; each question is one worker, so this bounds the run's time
    if args.query:
        panel.plan_editor.set_plan(starter_plan(args.question, []))
        cell = panel.plan_editor.table.item(0, 1)
        if cell is not None:
            cell.setText(args.query)
    table = panel.plan_editor.table
    while table.rowCount() > max(1, args.max_queries):
        table.removeRow(table.rowCount() - 1)
    kept_ids = {item.text() for r in range(table.rowCount()) if (item := table.item(r, 0))}
    for r in range(table.rowCount()):
        if (after := table.item(r, 3)) is not None:  # no dependency on a removed question
            after.setText(
                ", ".join(d for d in after.text().replace(",", " ").split() if d in kept_ids)
            )
    kept = panel.plan_editor.plan()
    say(f"researching {len(kept.queries)}: {'; '.join(q.query for q in kept.queries)}")
    run_started = time.monotonic()
    QTest.mouseClick(panel.plan_go, Qt.MouseButton.LeftButton)
    if not run_until(lambda: bool(reports), args.timeout, "the report"):
        raise SystemExit("screenshots: the research run did not finish")
    run_s = time.monotonic() - run_started
    report = reports[0]
    say(f"report: {report.status}, {len(report.citations)} citation(s), {run_s:.0f} s")
    run_until(lambda: not window.ops.running, 30)

    # 5. the research panel as the run left it (then back to the report)
    window.centre.setCurrentWidget(panel)
    shot("5_research")
    window.centre.setCurrentWidget(window.report_view)
    settle()

    # 6. click the first citation: the cited page with the words highlighted beside the report
    href = click_first_citation(window)
    shown = False
    if href is None:
        say("the report has no citation link to click")
    else:
        say(f"clicked citation {href}")
        shown = run_until(
            lambda: viewer.evidence_id is not None and viewer.mode != "empty" and not viewer.busy,
            60,
            "the evidence viewer",
        )
        run_until(lambda: not window.ops.running and not viewer.busy, 30)
    settle(800)
    QTest.mouseMove(window.statusBar(), QPoint(5, 5))  # no tooltip over the report yet
    QToolTip.hideText()
    shot("6_report")

    # 7. a citation's hover card (a tooltip is its own window: grab the screen)
    tooltip = hover_first_citation(window)
    shot("7_citation_tooltip", screen=True)
    QToolTip.hideText()

    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": "scripted" if args.scripted else args.model,
        "size": f"{width}x{height}",
        "question": args.question,
        "search": args.search,
        "search_hits": library.results.topLevelItemCount(),
        "planner_queries": [q.query for q in planned.queries],
        "researched_queries": [q.query for q in kept.queries],
        "library_add_s": round(add_s, 1),
        "research_s": round(run_s, 1),
        "report_status": report.status,
        "status_reasons": report.status_reasons,
        "citations": len(report.citations),
        "clicked": href,
        "citation_tooltip": tooltip,
        "viewer": {
            "evidence_id": viewer.evidence_id,
            "mode": viewer.mode,
            "page": None if viewer.page_index is None else viewer.page_index + 1,
            "highlight_rects": len(viewer.highlight_rects()),
        },
        "window_size": [window.width(), window.height()],
        "pane_sizes": window.splitter.sizes(),
        "platform": QGuiApplication.platformName(),
        "screenshots": shots,
        "errors": errors,
        "ok": shown and bool(tooltip) and len(shots) == 7,
    }
    window.close()
    shutdown_operations(window.ops)
    desktop.errors.error_hook = None
    del app
    return result


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(n) for n in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1366x768") from None
    if width < 800 or height < 600:
        raise argparse.ArgumentTypeError("the window needs at least 800x600")
    return width, height


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="Model for every role.")
    ap.add_argument("--scripted", action="store_true", help="Scripted models (fast, fixed).")
    ap.add_argument(
        "--size",
        default=SIZES[0],
        help=f"Screen and window size WxH (default {SIZES[0]}); 'all' runs {', '.join(SIZES)}.",
    )
    ap.add_argument("--question", default=QUESTION, help="The question asked.")
    ap.add_argument("--search", default=SEARCH, help="The library search shown.")
    ap.add_argument(
        "--query",
        default=QUERY,
        help="The one research question the plan is trimmed to; '' keeps the planner's own.",
    )
    ap.add_argument(
        "--max-queries", type=int, default=2, help="With --query '': planner questions kept."
    )
    ap.add_argument("--workers", type=int, default=1, help="Concurrent researchers (1-2).")
    ap.add_argument("--tool-calls", type=int, default=3, help="Tool calls per researcher.")
    ap.add_argument("--timeout", type=float, default=1500, help="Seconds allowed per model step.")
    ap.add_argument("--display", help="An existing X display (default: start a private Xvfb).")
    ap.add_argument("--out", type=Path, default=OUT, help="Folder for the size folders.")
    args = ap.parse_args(argv)
    if args.size == "all":
        # One process per size: the X display (and its screen size) is fixed per QApplication.
        rest = [a for i, a in enumerate(argv) if a != "--size" and argv[i - 1 : i] != ["--size"]]
        rest = [a for a in rest if not a.startswith("--size=")]
        codes = [_run_child(rest, size) for size in SIZES]
        return max(codes)
    try:
        args.size = parse_size(args.size)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    out: Path = args.out / f"{args.size[0]}x{args.size[1]}"
    out.mkdir(parents=True, exist_ok=True)
    with x_display(args.display, args.size) as display, tempfile.TemporaryDirectory() as tmp:
        os.environ["DISPLAY"] = display
        os.environ["QT_QPA_PLATFORM"] = "xcb"  # a real X server, not the offscreen platform
        result = run(args, out, Path(tmp))
    (out / "screenshots.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    say(f"saved {out / 'screenshots.json'}")
    return 0 if result["ok"] else 1


def _run_child(args: list[str], size: str) -> int:
    say(f"--- {size}")
    return subprocess.run([sys.executable, __file__, *args, "--size", size], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
