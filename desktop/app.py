"""Start the desktop app: the QApplication, the system's light/dark palette, the main window.

``main()`` is what ``sourcebook`` with no command runs (through :mod:`desktop.entry`, which keeps
the CLI free of Qt). Logging goes to ``<home>/logs`` like the CLI's.

Light and dark: Qt 6 follows the platform's colour scheme where the platform theme supports it
(Windows 11, macOS, GNOME/KDE with their Qt platform themes). Where it reports a scheme but
supplies no matching palette (plain Fusion on some Linux desktops), :func:`follow_system_palette`
sets one, and keeps following when the user switches while the app is open.

Threading: UI thread only; everything slow runs through the window's Operations.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import shiboken6
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from core.errors import SourcebookError
from core.service import Sourcebook
from desktop.errors import show_error
from desktop.main_window import MainWindow
from desktop.operations import Operations
from desktop.self_test import SelfTest, announce_ready, report_self_test

logger = logging.getLogger(__name__)


def dark_palette() -> QPalette:
    """A dark palette for Fusion (used when the system is dark but Qt's palette is light)."""
    p = QPalette()
    window, base, text = QColor(45, 45, 48), QColor(30, 30, 32), QColor(225, 225, 225)
    disabled = QColor(127, 127, 127)
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: QColor(40, 40, 43),
        QPalette.ColorRole.ToolTipBase: window,
        QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: disabled,
        QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: window,
        QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor(255, 80, 80),
        QPalette.ColorRole.Link: QColor(110, 170, 255),
        QPalette.ColorRole.LinkVisited: QColor(170, 140, 255),
        QPalette.ColorRole.Highlight: QColor(42, 110, 200),
        QPalette.ColorRole.HighlightedText: QColor(255, 255, 255),
    }
    for role, color in roles.items():
        p.setColor(role, color)
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.WindowText,
    ):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return p


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def follow_system_palette(app: QApplication) -> None:
    """Match the palette to the system colour scheme now and whenever it changes."""
    hints = QGuiApplication.styleHints()

    def apply(scheme: Qt.ColorScheme) -> None:
        current_dark = is_dark(app.palette())
        if scheme == Qt.ColorScheme.Dark and not current_dark:
            logger.debug("system is dark, Qt palette light: using a dark palette")
            app.setPalette(dark_palette())
        elif scheme == Qt.ColorScheme.Light and current_dark:
            app.setPalette(app.style().standardPalette())

    apply(hints.colorScheme())
    hints.colorSchemeChanged.connect(apply)


UI_SWITCH_INTERVAL_S = 0.001


def create_application(argv: Sequence[str] | None = None) -> QApplication:
    """The process's QApplication (created once), named and following the system palette."""
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    app = QApplication(list(argv) if argv is not None else [sys.argv[0]])
    # Background work (extraction, chunking, search, rendering) runs in Python threads; the UI
    # thread waits for the GIL one switch interval per competing thread. 1 ms instead of 5 keeps
    # that wait short when several run at once (bench/ui_stall.py).
    sys.setswitchinterval(UI_SWITCH_INTERVAL_S)
    app.setApplicationName("Sourcebook")
    app.setApplicationDisplayName("Sourcebook")
    app.setOrganizationName("Sourcebook")
    app.setDesktopFileName("sourcebook")
    follow_system_palette(app)
    return app


def build_window(service: Sourcebook) -> MainWindow:
    """The main window on ``service`` with its own Operations (parented to the window)."""
    ops = Operations()
    window = MainWindow(service, ops)
    ops.setParent(window)
    HeapFreezer(window)
    return window


class HeapFreezer(QObject):
    """Keeps long-lived objects out of the garbage collector's full collections.

    Opening the library loads torch, lancedb and the pydantic schemas, and the first add and the
    first model call load more: ~600k objects that live as long as the app. A full collection
    walks them all while holding the GIL (measured: 410-560 ms, triggered by a worker's
    allocations during an add), and the UI thread stalls for that long. ``gc.freeze()`` moves
    everything alive into a permanent generation that collections skip.

    It freezes when the app goes idle after each warm-up milestone (the library opened, the first
    adds, the first research runs), at most ``MAX_FREEZES`` times: after warm-up, new objects are
    mostly short-lived and collected as usual. The young generations are collected first, so
    little garbage is frozen with them. Lives on the UI thread, parented to the window.
    """

    MAX_FREEZES = 4
    # Fewer, not longer, collections: an add builds a document of ~1k live objects per page,
    # and with the default thresholds (700, 10, 10) every 70k allocations a full collection
    # walks all of it again (measured: 28 -> 150 ms pauses during a 300-page add).
    THRESHOLDS = (5_000, 20, 100)

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        gc.set_threshold(*self.THRESHOLDS)
        self._ops = window.ops
        self._pending = False
        self.freezes = 0
        window.library_panel.documents_loaded.connect(self._milestone)
        window.ops.library_did_change.connect(self._milestone)
        window.research_panel.report_ready.connect(self._milestone)
        window.ops.busy_changed.connect(self._busy_changed)

    def _milestone(self, _value: object = None) -> None:
        self._pending = self.freezes < self.MAX_FREEZES
        if not self._ops.running:
            self._busy_changed(0)

    def _busy_changed(self, count: int) -> None:
        if count or not self._pending:
            return
        self._pending = False
        self.freezes += 1
        gc.collect(1)
        gc.freeze()
        logger.debug("froze %d long-lived objects (freeze %d)", gc.get_freeze_count(), self.freezes)


#: How long the app, its window closed, waits for work started during the close.
EXIT_WAIT_MS = 2000


def shutdown_operations(ops: Operations, wait_ms: int = 10_000) -> bool:
    """Cancel, wait for and destroy ``ops`` now, on the UI thread.

    Operations hold Python callbacks that refer back to widgets, so left to the garbage
    collector the object could be destroyed late and from whichever thread happens to run a
    collection, racing the UI thread's own deletions. Returns False if work was still running
    after ``wait_ms`` (then ``ops`` is left alone: destroying its pools would block).
    """
    if not shiboken6.isValid(ops):
        return True
    ops.cancel_all()
    if not ops.wait(wait_ms):
        logger.warning("operations still running after %d ms", wait_ms)
        return False
    # Deliver the finished operations' queued results and deletions, then destroy.
    QCoreApplication.sendPostedEvents()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    shiboken6.delete(ops)
    return True


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sourcebook", description="Open the Sourcebook app.")
    p.add_argument("--home", type=Path, help="Folder for settings, library and logs.")
    p.add_argument("-v", "--verbose", action="store_true", help="Log more detail.")
    # Scripted sessions for testing an installed app (desktop/self_test.py).
    p.add_argument(
        "--self-test",
        type=Path,
        metavar="PDF",
        help="Add PDF, search for --query, open the first hit, close; exit 0 if all worked.",
    )
    p.add_argument("--query", default="", help="What --self-test searches for.")
    p.add_argument("--screenshot", type=Path, help="--self-test saves the screen here.")
    p.add_argument("--self-test-timeout", type=float, default=300.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--ready-file",
        type=Path,
        help="Write this file once the window is usable (the library listed): for benchmarks.",
    )
    args = p.parse_args(list(argv))
    if args.self_test is not None and not args.query.strip():
        p.error("--self-test needs --query WORDS (words the PDF contains)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Open the app; returns the exit code when the last window closes."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    app = create_application()
    try:
        service = Sourcebook(args.home)
    except SourcebookError as exc:
        # Bad settings file or home: say so in a dialog; closing it ends the app.
        show_error(None, exc)
        app.exec()
        return 2
    service.configure_logging(verbose=args.verbose)
    logger.info("opening the app on %s", service.home)
    window = build_window(service)
    window.show()
    if args.ready_file is not None:
        announce_ready(window, args.ready_file)
    test: SelfTest | None = None
    if args.self_test is not None:
        test = SelfTest(
            window,
            args.self_test,
            args.query,
            screenshot=args.screenshot,
            timeout_s=args.self_test_timeout,
        )
        test.start()
    code = int(app.exec())
    # The window's close already cancelled and waited; this waits briefly for work started since.
    stopped = shutdown_operations(window.ops, wait_ms=EXIT_WAIT_MS)
    if test is not None:
        code = report_self_test(test, code)
    if not stopped:
        end_now(code)
    return code


def end_now(code: int) -> None:
    """End the process now, with ``code``: work that ignores its cancel (a model reading a long
    prompt) is still running after the window closed. Left to the interpreter's exit, the
    process lingered as long as that work lasted, a closed app still holding its memory and
    its task's lease. Commits are crash-safe and tasks resume (ARCHITECTURE.md), so ending the
    work loses nothing that was committed."""
    logger.warning("ending the app with work still running (it did not stop when cancelled)")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
