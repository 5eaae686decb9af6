"""The main window: library on the left, research / report / history in the centre, evidence on
the right, and the menus that make every action reachable from the keyboard.

The window owns no logic of its own beyond wiring: panels talk to the service through the shared
:class:`~desktop.operations.Operations`, and the window connects their signals (a citation or a
search hit -> the evidence viewer; a finished run or a history entry -> the report view; a failed
operation -> :func:`desktop.errors.show_error`). The first-run screen sits in front of the
workspace until the user leaves it.

Threading: UI thread only. Closing the window cancels running operations, waits briefly for them
to stop at their next step, then closes the service (models and library).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QMainWindow,
    QProgressBar,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QWidget,
)

from core.errors import CancelledError
from core.service import Document, LibraryChanges, Report, Settings, Sourcebook
from desktop.ask_panel import AskPanel
from desktop.errors import guarded, show_error
from desktop.evidence_viewer import CitationLike, EvidenceViewer
from desktop.export_actions import export_report_interactive
from desktop.first_run import FirstRunScreen
from desktop.history_panel import HistoryPanel
from desktop.library_panel import LibraryPanel
from desktop.operations import Operations, OpHandle
from desktop.pane_memory import PaneMemory
from desktop.report_view import ReportView, status_short
from desktop.research_panel import ResearchPanel
from desktop.settings_dialog import SettingsDialog

logger = logging.getLogger(__name__)

EXPORTS = (
    ("md", "&Markdown…", "Ctrl+E"),
    ("html", "&HTML…", None),
    ("pdf", "&PDF…", None),
    ("docx", "&Word (DOCX)…", None),
    ("json", "Provenance &JSON…", None),
    ("bib", "Sources as &BibTeX…", None),
    ("csl", "Sources as &CSL-JSON…", None),
)
SHUTDOWN_WAIT_MS = 8000


def pane_sizes(width: int) -> list[int]:
    """Library, centre, evidence widths for a window ``width`` px wide: the library enough for
    wrapped titles, the centre a report's reading width, the evidence a PDF page at fit width
    (1366 -> 300/575/491, 1920 -> 400/829/691)."""
    library = max(240, min(400, width * 22 // 100))
    evidence = width * 36 // 100
    return [library, width - library - evidence, evidence]


def _keys(standard: QKeySequence.StandardKey, fallback: str) -> list[QKeySequence]:
    """The platform's standard shortcut plus ``fallback`` (some platforms define none)."""
    keys = [*QKeySequence.keyBindings(standard), QKeySequence(fallback)]
    return list({k.toString(): k for k in keys if not k.isEmpty()}.values())


class MainWindow(QMainWindow):
    """The application window; see the module docstring. ``service`` and ``ops`` are shared
    with every panel and outlive none of them: the window closes the service on close."""

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.ops = ops
        self.setWindowTitle("Sourcebook")
        self.setAcceptDrops(True)
        width, height = self._default_size()
        self.resize(width, height)

        self.library_panel = LibraryPanel(service, ops)
        self.research_panel = ResearchPanel(service, ops)
        self.ask_panel = AskPanel(service, ops)
        self.report_view = ReportView()
        self.history_panel = HistoryPanel(service, ops)
        self.viewer = EvidenceViewer(service, ops)
        self.centre = QTabWidget()
        self.centre.setDocumentMode(True)
        self.centre.addTab(self.research_panel, "&Research")
        self.centre.addTab(self.ask_panel, "&Ask")
        self.centre.addTab(self.report_view, "Re&port")
        self.centre.addTab(self.history_panel, "&History")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("main-split")  # its sizes are remembered (PaneMemory)
        for w in (self.library_panel, self.centre, self.viewer):
            self.splitter.addWidget(w)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 4)
        self.splitter.setStretchFactor(2, 4)
        self.splitter.setSizes(pane_sizes(width))
        self.splitter.setChildrenCollapsible(True)
        self.panes = PaneMemory(self, service.home)
        if not self.panes.restore_geometry() and self._small_screen():
            self.setWindowState(self.windowState() | Qt.WindowState.WindowMaximized)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.splitter)
        self.first_run: FirstRunScreen | None = None
        self.setCentralWidget(self.stack)

        self._busy_label = QLabel("")
        self._busy_bar = QProgressBar()
        self._busy_bar.setRange(0, 0)
        self._busy_bar.setMaximumWidth(120)
        self._busy_bar.setVisible(False)
        self.statusBar().addPermanentWidget(self._busy_label)
        self.statusBar().addPermanentWidget(self._busy_bar)

        self._build_menus()
        self._connect()
        if not service.settings.ui.first_run_done:
            self.show_first_run()
        self.library_panel.refresh()
        self.history_panel.refresh()

    # ---------------------------------------------------------------- menus

    def _action(
        self,
        text: str,
        slot: Callable[[], object],
        shortcut: str | QKeySequence.StandardKey | list[QKeySequence] | None = None,
        tip: str = "",
    ) -> QAction:
        action = QAction(text, self)
        if isinstance(shortcut, list):
            action.setShortcuts(shortcut)
        elif shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        self.addAction(action)  # shortcuts work even when the menu bar is hidden
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.add_files_action = self._action(
            "&Add files…", self.library_panel.add_files_dialog, QKeySequence.StandardKey.Open
        )
        self.add_folder_action = self._action(
            "Add &folder…", self.library_panel.add_folder_dialog, "Ctrl+Shift+O"
        )
        self.add_web_action = self._action(
            "Add &web page…",
            self.library_panel.add_web_page_dialog,
            "Ctrl+L",
            "Add a web page by its address (needs web access, off by default)",
        )
        file_menu.addAction(self.add_files_action)
        file_menu.addAction(self.add_folder_action)
        file_menu.addAction(self.add_web_action)
        file_menu.addSeparator()
        export_menu = file_menu.addMenu("&Export report as")
        self.export_actions: dict[str, QAction] = {}
        for fmt, text, key in EXPORTS:
            action = self._action(text, partial(self.export_report, fmt), key)
            export_menu.addAction(action)
            self.export_actions[fmt] = action
        file_menu.addSeparator()
        self.settings_action = self._action(
            "&Settings…", self.open_settings, _keys(QKeySequence.StandardKey.Preferences, "Ctrl+,")
        )
        self.settings_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        self.quit_action = self._action(
            "&Quit", self.close, _keys(QKeySequence.StandardKey.Quit, "Ctrl+Q")
        )
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        file_menu.addAction(self.quit_action)

        research = bar.addMenu("&Research")
        self.new_research_action = self._action(
            "&New research", self.new_research, QKeySequence.StandardKey.New
        )
        self.cancel_action = self._action(
            "&Cancel", self.cancel_research, "Ctrl+.", "Stop the running research at its next step"
        )
        self.history_action = self._action(
            "&History", lambda: self.centre.setCurrentWidget(self.history_panel), "Ctrl+H"
        )
        for a in (self.new_research_action, self.cancel_action, self.history_action):
            research.addAction(a)

        view = bar.addMenu("&View")
        self.find_action = self._action(
            "&Find in library", self.find_in_library, QKeySequence.StandardKey.Find
        )
        view.addAction(self.find_action)
        view.addSeparator()
        for n, (text, target) in enumerate(
            (
                ("&Library", self.library_panel),
                ("&Research", self.research_panel),
                ("Re&port", self.report_view),
                ("&History", self.history_panel),
                ("&Evidence", self.viewer),
            ),
            start=1,
        ):
            view.addAction(
                self._action(f"Go to {text}", partial(self.focus_panel, target), f"Ctrl+{n}")
            )
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("&Welcome screen", self.show_first_run))

    # ---------------------------------------------------------------- wiring

    def _connect(self) -> None:
        ops = self.ops
        ops.busy_changed.connect(self._busy_changed)
        ops.operation_failed.connect(self._operation_failed)
        self.library_panel.evidence_requested.connect(self.show_evidence)
        self.library_panel.documents_loaded.connect(self._documents_loaded)
        self.library_panel.settings_requested.connect(self.open_web_settings)
        self.report_view.citation_activated.connect(self.show_citation)
        self.research_panel.report_ready.connect(self._report_ready)
        self.history_panel.open_report.connect(self.open_report)
        self.history_panel.resume_task.connect(self.resume_task)
        self.ask_panel.citation_activated.connect(self.show_citation)
        self.ask_panel.answered.connect(lambda _report: self.history_panel.refresh())
        self.ask_panel.research_requested.connect(self.research_conversation)
        self.centre.currentChanged.connect(lambda _i: self._clear_finished_mark())

    def _busy_changed(self, count: int) -> None:
        labels = [h.label for h in self.ops.running]
        self._busy_bar.setVisible(count > 0)
        if count == 0:
            self._busy_label.setText("Ready")
        else:
            shown = ", ".join(dict.fromkeys(labels[:3]))
            more = f" (+{len(labels) - 3})" if len(labels) > 3 else ""
            self._busy_label.setText(f"{shown}{more}…")

    def _operation_failed(self, payload: object) -> None:
        handle, exc = payload if isinstance(payload, tuple) else (None, payload)
        if isinstance(exc, CancelledError):
            self.statusBar().showMessage(exc.message, 5000)
            return
        label = handle.label if isinstance(handle, OpHandle) else "an operation"
        logger.info("%s failed: %s", label, exc)
        show_error(self, exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))

    # ---------------------------------------------------------------- evidence and reports

    def show_evidence(self, evidence_id: str) -> None:
        self._reveal_viewer()
        self.viewer.show_evidence(evidence_id)

    def show_citation(self, citation: CitationLike) -> None:
        self._reveal_viewer()
        self.viewer.show_citation(citation)

    def _reveal_viewer(self) -> None:
        sizes = self.splitter.sizes()
        if sizes[2] < 80:
            total = sum(sizes)
            self.splitter.setSizes([sizes[0], max(total - sizes[0] - 480, 200), 480])

    def show_report(self, report: Report) -> None:
        self.report_view.show_report(report)
        self.centre.setCurrentWidget(self.report_view)

    def _report_ready(self, report: Report) -> None:
        self.history_panel.refresh()
        if self.centre.currentWidget() is self.research_panel:
            self.show_report(report)
            return
        # The run went on in the background while the analyst read or asked elsewhere: say it
        # finished, and leave what is on screen alone (the Research tab opens the report).
        i = self.centre.indexOf(self.research_panel)
        self.centre.setTabText(i, "&Research ●")
        self.centre.setTabToolTip(i, "The research run finished: open its report here")
        self.statusBar().showMessage(
            f"Research finished: {status_short(report.status).lower()} — open the report "
            "from the Research tab"
        )

    def _clear_finished_mark(self) -> None:
        i = self.centre.indexOf(self.research_panel)
        if self.centre.currentIndex() == i and self.centre.tabText(i) != "&Research":
            self.centre.setTabText(i, "&Research")
            self.centre.setTabToolTip(i, "")
            self.statusBar().clearMessage()

    def open_report(self, task_name: str) -> None:
        service = self.service
        self.ops.run(
            lambda ctx: service.report(task_name),
            label=f"Opening report {task_name}",
            on_success=guarded(self, self.show_report),
        )

    def resume_task(self, task_name: str) -> None:
        """Resume a research task, or reopen a conversation in the Ask panel."""
        service = self.service

        def route(kind: object) -> None:
            if kind == "conversation":
                self.centre.setCurrentWidget(self.ask_panel)
                self.ask_panel.open_conversation(task_name)
            else:
                self.centre.setCurrentWidget(self.research_panel)
                self.research_panel.resume(task_name)

        self.ops.run(
            lambda ctx: service.task(task_name)[0].params.get("kind"),
            label=f"Opening task {task_name}",
            on_success=guarded(self, route),
        )

    def research_conversation(self, name: str, question: str) -> None:
        """Research this, from the Ask panel: a full run in the research panel."""
        self.centre.setCurrentWidget(self.research_panel)
        self.research_panel.research_conversation(name, question)

    def export_report(self, fmt: str) -> None:
        report = self.report_view.current_report()
        if report is None:
            self.statusBar().showMessage(
                "No report on screen: run a research task or open one from History first.", 6000
            )
            return
        export_report_interactive(self, self.service, self.ops, report.task, fmt)

    # ---------------------------------------------------------------- actions

    def new_research(self) -> None:
        self.leave_first_run()
        self.centre.setCurrentWidget(self.research_panel)
        self.research_panel.start_new()

    def cancel_research(self) -> None:
        self.research_panel.cancel()

    def find_in_library(self) -> None:
        self.leave_first_run()
        self.library_panel.focus_search()

    def focus_panel(self, widget: QWidget) -> None:
        """Show a panel and put the keyboard focus on its first control (Ctrl+1…5)."""
        self.leave_first_run()
        if widget in (self.research_panel, self.report_view, self.history_panel):
            self.centre.setCurrentWidget(widget)
        if widget is self.viewer:
            self._reveal_viewer()
        target = next(
            (
                w
                for w in widget.findChildren(QWidget)
                if w.isVisibleTo(widget)
                and w.isEnabled()
                and w.focusPolicy() & Qt.FocusPolicy.TabFocus
            ),
            widget,
        )
        target.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self.service, self.ops, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        before = self.service.library_path
        dialog.saved.connect(lambda _s: self._settings_saved(before))
        dialog.open()
        return dialog

    def open_web_settings(self) -> SettingsDialog:
        """The settings, open on the tab with the web access switch."""
        dialog = self.open_settings()
        tabs = dialog.findChild(QTabWidget)
        if tabs is not None:
            for i in range(tabs.count()):
                page = tabs.widget(i)
                if page is not None and page.isAncestorOf(dialog.web_enabled):
                    tabs.setCurrentIndex(i)
        dialog.web_enabled.setFocus()
        return dialog

    def _default_size(self) -> tuple[int, int]:
        """Roomy on a large screen (up to 1600x1000, at most 90% of it); the whole of a laptop
        screen (:meth:`_small_screen`), where the window opens maximized."""
        screen = self.screen()
        if screen is None:
            return 1400, 860
        avail = screen.availableGeometry()
        if self._small_screen():
            return avail.width(), avail.height()
        return min(1600, avail.width() * 9 // 10), min(1000, avail.height() * 9 // 10)

    def _small_screen(self) -> bool:
        """A laptop screen (below 1500x900 available): three panes need every pixel of it."""
        screen = self.screen()
        avail = screen.availableGeometry() if screen is not None else None
        return avail is not None and (avail.width() < 1500 or avail.height() < 900)

    def _settings_saved(self, library_before: object) -> None:
        self.statusBar().showMessage("Settings saved.", 4000)
        if self.service.library_path != library_before:
            service = self.service
            # Close the old library; the next read opens the new folder.
            self.ops.run(
                lambda ctx: service.close(),
                label="Switching library",
                exclusive=True,
                on_success=lambda _r: self.ops.library_did_change.emit(LibraryChanges()),
            )

    # ---------------------------------------------------------------- first run

    def show_first_run(self) -> None:
        if self.first_run is None:
            screen = FirstRunScreen(self.service, self.ops)
            screen.add_files_requested.connect(self._first_run_add_files)
            screen.add_folder_requested.connect(self._first_run_add_folder)
            screen.add_samples_requested.connect(self.add_samples)
            screen.dismissed.connect(self.leave_first_run)
            self.first_run = screen
            self.stack.addWidget(screen)
        self.stack.setCurrentWidget(self.first_run)
        self.first_run.start_button.setFocus()

    def _first_run_add_files(self) -> None:
        self.leave_first_run()
        self.library_panel.add_files_dialog()

    def _first_run_add_folder(self) -> None:
        self.leave_first_run()
        self.library_panel.add_folder_dialog()

    @property
    def showing_first_run(self) -> bool:
        return self.first_run is not None and self.stack.currentWidget() is self.first_run

    def leave_first_run(self) -> None:
        """Go to the workspace and remember (in the home's settings) that the user has seen
        the welcome screen."""
        if self.stack.currentWidget() is not self.splitter:
            self.stack.setCurrentWidget(self.splitter)
        if self.service.settings.ui.first_run_done:
            return
        service = self.service
        current = service.settings
        updated = current.model_copy(
            update={"ui": current.ui.model_copy(update={"first_run_done": True})}
        )

        def save(ctx: object) -> Settings:
            service.save_settings(updated)
            return updated

        self.ops.run(save, label="Saving settings", exclusive=True)

    def add_samples(self) -> None:
        self.leave_first_run()
        service = self.service
        self.ops.run(
            lambda ctx: service.sample_documents(),
            label="Finding the sample documents",
            on_success=guarded(self, self._add_samples_found),
        )

    def _add_samples_found(self, paths: list[Path]) -> None:
        self.library_panel.add_paths(paths)

    def _documents_loaded(self, docs: list[Document]) -> None:
        if docs and self.showing_first_run:
            self.leave_first_run()  # an existing library: the welcome is not needed

    # ---------------------------------------------------------------- drag and drop, close

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self.library_panel.dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragEnterEvent) -> None:  # type: ignore[override]
        self.library_panel.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.leave_first_run()
        self.library_panel.dropEvent(event)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        # Once, now that the layout gave the splitters their sizes; defaults for a fresh home.
        if not self.panes.restored and self.splitter not in self.panes.restore_panes():
            self.splitter.setSizes(pane_sizes(sum(self.splitter.sizes())))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.panes.save()
        running = self.ops.running
        if running:
            logger.info("closing: cancelling %d operations", len(running))
            self.statusBar().showMessage("Stopping running work…")
            self.ops.cancel_all()
            if not self.ops.wait(SHUTDOWN_WAIT_MS):
                # Closing the library under a running write could corrupt it; the process
                # exit ends the work instead (commits are crash-safe, see ARCHITECTURE.md).
                logger.warning("some operations did not stop within %d ms", SHUTDOWN_WAIT_MS)
                super().closeEvent(event)
                return
        self.service.close()
        super().closeEvent(event)
