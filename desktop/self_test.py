"""A scripted first session in the real window: what the app bundle's test runs.

``sourcebook --self-test FILE.pdf --query WORDS [--screenshot OUT.png]`` opens the app as a user
would and then does what a new user does first: leaves the welcome screen with its button, adds
the file (the call the file dialog and a drop make), waits for it to be ready, types the query
into the search box and presses Enter, opens the first hit with the keyboard, waits for the
evidence viewer to render its page with the words highlighted (the passage must hold a word
of the query), saves a screenshot and closes the window. The exit code is 0 when every step
happened, 1 when one failed or an error dialog opened (its text is logged), or when the whole
session took longer than ``timeout_s``.

It exists so that a packaged app (a PyInstaller bundle on a machine without the source tree)
can be tested through its own binary, not through the test suite's imports.

Threading: UI thread only. Steps are checked on a timer, so the event loop (and the app's
operations) run between them exactly as in a user's session.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop.main_window import MainWindow

logger = logging.getLogger(__name__)

POLL_MS = 100


class SelfTest(QObject):
    """Drives ``window`` through the session described in the module docstring.

    ``passed`` is None while running, then True or False; ``steps`` names the steps done, in
    order. The application's exit code is set by :meth:`finish` (the window closes, or the
    event loop is told to exit with 1). Parented to the window; UI thread only.
    """

    def __init__(
        self,
        window: MainWindow,
        pdf: Path,
        query: str,
        *,
        screenshot: Path | None = None,
        timeout_s: float = 300.0,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.pdf = pdf.expanduser().resolve()
        self.query = query
        self.screenshot = screenshot
        self.timeout_s = timeout_s
        self.steps: list[str] = []
        self.passed: bool | None = None
        self.failure = ""
        self.seconds = 0.0
        self._started = time.monotonic()
        self._step_started = self._started
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._tick)
        self._plan: list[tuple[str, Callable[[], bool]]] = [
            ("window shown", self._window_shown),
            ("welcome screen left", self._leave_welcome),
            ("file added", self._add_file),
            ("document ready", self._document_ready),
            ("search answered", self._search),
            ("hit opened", self._open_hit),
            ("page shown highlighted", self._page_shown),
            ("screenshot saved", self._save_screenshot),
        ]
        self._search_typed = False
        self._hit_opened = False
        self._add_started = False

    def start(self) -> None:
        """Begin once the event loop runs (a failure before it would have no loop to end)."""
        self._timer.start()

    # ---------------------------------------------------------------- the loop

    def _tick(self) -> None:
        dialog = self._error_dialog()
        if dialog is not None:
            self.finish(False, f"an error dialog opened: {dialog}")
            return
        if time.monotonic() - self._started > self.timeout_s:
            step = self._plan[0][0] if self._plan else "closing"
            self.finish(False, f"timed out after {self.timeout_s:.0f} s waiting for: {step}")
            return
        while self._plan:
            name, step = self._plan[0]
            try:
                done = step()
            except Exception as exc:  # a broken step fails the test, never hangs it
                logger.exception("self-test step %r failed", name)
                self.finish(False, f"{name}: {exc}")
                return
            if not done:
                return
            now = time.monotonic()
            logger.info("self-test: %s (%.1f s)", name, now - self._step_started)
            self.steps.append(name)
            self._step_started = now
            self._plan.pop(0)
        self.finish(True, "")

    def finish(self, passed: bool, failure: str) -> None:
        """Stop, log the outcome and close the window; a failure also ends the app with 1."""
        if self.passed is not None:
            return
        self._timer.stop()
        self.passed = passed
        self.failure = failure
        self.seconds = seconds = time.monotonic() - self._started
        if passed:
            logger.info("self-test passed in %.1f s: %s", seconds, ", ".join(self.steps))
        else:
            done = ", ".join(self.steps) or "nothing"
            logger.error("self-test FAILED after %.1f s: %s (done: %s)", seconds, failure, done)
        # Closed either way, as a user would: the close stops the app's running work (listing the
        # library, looking for models) and closes the library. Left running, that work raced the
        # interpreter's exit and could hang it.
        self.window.close()
        app = QApplication.instance()
        if not passed and app is not None:
            app.exit(1)  # an error dialog left open would otherwise keep the app running

    def _error_dialog(self) -> str | None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, QMessageBox) and widget.isVisible():
                return " ".join(t for t in (widget.text(), widget.informativeText()) if t)
        return None

    # ---------------------------------------------------------------- the steps

    def _window_shown(self) -> bool:
        return self.window.isVisible() and self.window.windowHandle() is not None

    def _leave_welcome(self) -> bool:
        screen = self.window.first_run
        if self.window.showing_first_run and screen is not None:
            screen.start_button.click()
        return not self.window.showing_first_run

    def _add_file(self) -> bool:
        if not self.pdf.is_file():
            raise RuntimeError(f"no such file: {self.pdf}")
        if not self._add_started:
            self._add_started = True
            return self.window.library_panel.add_paths([self.pdf]) is not None
        return True

    def _document_ready(self) -> bool:
        docs = self.window.library_panel.documents
        mine = [d for d in docs if Path(d.source_uri).name == self.pdf.name]
        return any(d.status == "ready" for d in mine) and not self.window.ops.running

    def _search(self) -> bool:
        panel = self.window.library_panel
        if not self._search_typed:
            self._search_typed = True
            panel.search_box.setFocus()
            QTest.keyClicks(panel.search_box, self.query)
            QTest.keyClick(panel.search_box, Qt.Key.Key_Return)
            return False
        return bool(panel.hits) and panel.results.isVisible()

    def _open_hit(self) -> bool:
        results = self.window.library_panel.results
        if not self._hit_opened:
            self._hit_opened = True
            first = results.topLevelItem(0)
            if first is None:
                raise RuntimeError(f"no search results for {self.query!r}")
            results.setFocus()
            results.setCurrentItem(first)
            QTest.keyClick(results, Qt.Key.Key_Return)  # Enter activates the current hit
        return self.window.viewer.evidence_id == self.window.library_panel.hits[0].evidence_id

    def _page_shown(self) -> bool:
        viewer = self.window.viewer
        shown = viewer.page_index is not None and not viewer.busy and bool(viewer.highlight_rects())
        if shown and viewer.evidence is not None:
            # meaning-based search always returns the nearest passages: the first one must
            # hold a word of the query for the search to have found what the user asked for
            text = viewer.evidence.passage_text.casefold()
            words = [w for w in self.query.casefold().split() if len(w) > 3] or [self.query]
            if not any(w in text for w in words):
                raise RuntimeError(f"the first hit holds no word of {self.query!r}")
        return shown

    def _save_screenshot(self) -> bool:
        if self.screenshot is None:
            return True
        self.screenshot.parent.mkdir(parents=True, exist_ok=True)
        screen = QGuiApplication.primaryScreen()
        # the whole screen as the X server shows it (what a user would see), else the window
        pixmap = screen.grabWindow(0) if screen is not None else self.window.grab()
        if pixmap.isNull():
            pixmap = self.window.grab()
        if not pixmap.save(str(self.screenshot)):
            raise RuntimeError(f"could not write {self.screenshot}")
        return True


def report_self_test(test: SelfTest, code: int) -> int:
    """The process's exit code after a self-test, with one line on stderr saying why."""
    if test.passed:
        sys.stderr.write(f"self-test passed in {test.seconds:.1f} s: {', '.join(test.steps)}\n")
        return code
    failure = test.failure or "the window closed before the self-test finished"
    sys.stderr.write(f"self-test FAILED: {failure} (done: {', '.join(test.steps) or 'nothing'})\n")
    return code or 1


def announce_ready(window: MainWindow, path: Path) -> None:
    """Write ``path`` (the seconds since the app's start-up, and the process id) once the
    window is usable: shown, with the library's documents listed. For start-up benchmarks."""
    started = time.monotonic()

    def ready(_docs: object) -> None:
        window.library_panel.documents_loaded.disconnect(ready)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(f"{time.monotonic() - started:.3f} {os.getpid()}\n", encoding="utf-8")
        tmp.replace(path)

    window.library_panel.documents_loaded.connect(ready)
