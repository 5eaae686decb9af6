"""History: every research task in the task log, to reopen its report or resume it.

A task is *interrupted* when its last run did not reach an answer: it was cancelled, the app
stopped while it ran (status still ``running``), its log could not be written, or it only got as
far as clarifying questions. A ``partial`` task is interrupted only when a failure stopped it
(a reason starting "The run stopped"); the selected task's record is read in the background to
tell, and its status reasons are shown under the list. Resuming reruns the task by name; ``core``
reuses every step its log completed.

The panel only lists and signals: ``open_report(name)`` and ``resume_task(name)`` are handled by
the main window (report view, research panel), which keeps this widget free of run logic.

Threading: the list is read through ``Operations`` (a read, on the shared pool) and filled on
the UI thread; a refresh that arrives after a newer one started is dropped.
"""

from __future__ import annotations

import logging
from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.service import Sourcebook, TaskInfo
from desktop.errors import show_error
from desktop.operations import Operations
from desktop.report_view import status_short, status_text

logger = logging.getLogger(__name__)

ROLE_NAME = Qt.ItemDataRole.UserRole
ROLE_STATUS = Qt.ItemDataRole.UserRole + 1
# Statuses whose last run stopped before an answer: offered for resuming.
RESUMABLE = frozenset({"cancelled", "running", "recording_failed", "clarifying"})
STOPPED_REASON = "The run stopped"
# Statuses with no report saved yet.
NO_REPORT = frozenset({"running", "clarifying"})

COL_QUESTION, COL_STATUS, COL_WHEN, COL_NAME = range(4)


class HistoryPanel(QWidget):
    """Past and interrupted research tasks (see the module docstring).

    Signals ``open_report(str)`` and ``resume_task(str)`` carry task names.
    """

    open_report = Signal(str)
    resume_task = Signal(str)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        self._generation = 0
        self._tasks: list[TaskInfo] = []
        self._stopped: set[str] = set()  # partial tasks a failure stopped (resumable)

        self.filter = QLineEdit()
        self.filter.setObjectName("history-filter")
        self.filter.setPlaceholderText("Filter by question or status")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)

        self.tree = QTreeWidget()
        self.tree.setObjectName("history-tasks")
        self.tree.setHeaderLabels(["Question", "Status", "Last run", "Task"])
        self.tree.setRootIsDecorated(False)
        self.tree.setSortingEnabled(False)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(COL_QUESTION, QHeaderView.ResizeMode.Stretch)
        for col in (COL_STATUS, COL_WHEN, COL_NAME):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemSelectionChanged.connect(self._selection_changed)
        self.tree.itemActivated.connect(lambda _item, _col: self._activate())

        self.open_btn = QPushButton("Open report")
        self.open_btn.setObjectName("history-open")
        self.open_btn.clicked.connect(self._open)
        self.resume_btn = QPushButton("Resume")
        self.resume_btn.setObjectName("history-resume")
        self.resume_btn.setToolTip("Continue this task; finished steps are reused.")
        self.resume_btn.clicked.connect(self._resume)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        self.empty = QLabel("No research tasks yet. Ask a question in the Research panel.")
        self.empty.setWordWrap(True)
        self.details = QLabel()
        self.details.setObjectName("history-details")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QHBoxLayout()
        buttons.addWidget(self.open_btn)
        buttons.addWidget(self.resume_btn)
        buttons.addStretch(1)
        buttons.addWidget(refresh)
        lay = QVBoxLayout(self)
        lay.addWidget(self.filter)
        lay.addWidget(self.empty)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.details)
        lay.addLayout(buttons)
        self._sync()

    # ------------------------------------------------------------------ public

    def refresh(self) -> None:
        """Reload the task list in the background."""
        self._generation += 1
        gen = self._generation
        self._ops.run(
            lambda _ctx: self._service.tasks(),
            label="Loading research history",
            on_success=lambda tasks: self._fill(tasks, gen),
            on_error=lambda exc: self._load_failed(exc, gen),
        )

    def tasks(self) -> list[TaskInfo]:
        """The tasks shown (last loaded), newest first."""
        return list(self._tasks)

    def select_task(self, name: str) -> bool:
        """Select the row of task ``name``; False if it is not listed."""
        for item in self._rows():
            if item.data(0, ROLE_NAME) == name:
                self.tree.setCurrentItem(item)
                return True
        return False

    def selected_task(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else str(item.data(0, ROLE_NAME))

    # ------------------------------------------------------------------ internals

    def _fill(self, tasks: list[TaskInfo], gen: int) -> None:
        if gen != self._generation:
            return
        current = self.selected_task()
        self._tasks = sorted(tasks, key=lambda t: t.updated_at, reverse=True)
        self._stopped &= {t.name for t in self._tasks if t.status == "partial"}
        self.tree.clear()
        for t in self._tasks:
            when = datetime.fromtimestamp(t.updated_at).strftime("%Y-%m-%d %H:%M")
            label = status_short(t.status)
            if t.status in RESUMABLE or t.name in self._stopped:
                label += " — can resume"
            item = QTreeWidgetItem([t.question, label, when, t.name])
            item.setData(0, ROLE_NAME, t.name)
            item.setData(0, ROLE_STATUS, t.status)
            item.setToolTip(COL_QUESTION, t.question)
            item.setToolTip(COL_STATUS, status_text(t.status))
            item.setToolTip(COL_NAME, f"{t.runs} run(s)")
            self.tree.addTopLevelItem(item)
        self.empty.setVisible(not self._tasks)
        if current is not None:
            self.select_task(current)
        self._apply_filter(self.filter.text())
        self._sync()

    def _load_failed(self, exc: BaseException, gen: int) -> None:
        if gen == self._generation:
            show_error(self, exc)

    def _rows(self) -> list[QTreeWidgetItem]:
        items = (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount()))
        return [item for item in items if item is not None]

    def _apply_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for item in self._rows():
            hay = " ".join(item.text(c) for c in range(4)).lower()
            item.setHidden(bool(needle) and needle not in hay)

    def _selected_status(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else str(item.data(0, ROLE_STATUS))

    def _selection_changed(self) -> None:
        name = self.selected_task()
        self.details.setText("")
        self._sync()
        if name is None:
            return
        self._ops.run(
            lambda _ctx: self._service.task(name)[0],
            label="Reading a research task",
            on_success=self._show_details,
            on_error=lambda exc: logger.warning("could not read task %s: %s", name, exc),
        )

    def _show_details(self, info: TaskInfo) -> None:
        if info.name != self.selected_task():
            return
        reasons = [str(r) for r in (info.report or {}).get("status_reasons", [])]
        if info.status == "partial" and any(r.startswith(STOPPED_REASON) for r in reasons):
            self._stopped.add(info.name)
            item = self.tree.currentItem()
            if item is not None and "can resume" not in item.text(COL_STATUS):
                item.setText(COL_STATUS, item.text(COL_STATUS) + " — can resume")
        else:
            self._stopped.discard(info.name)
        lines = [status_text(info.status), *reasons[:4]]
        when = datetime.fromtimestamp(info.created_at).strftime("%Y-%m-%d %H:%M")
        lines.append(f"Started {when}; {info.runs} run(s).")
        self.details.setText("\n".join(lines))
        self._sync()

    def _sync(self) -> None:
        status = self._selected_status()
        name = self.selected_task()
        self.open_btn.setEnabled(status is not None and status not in NO_REPORT)
        stopped = status == "partial" and name in self._stopped
        self.resume_btn.setEnabled(status in RESUMABLE or stopped)

    def _open(self) -> None:
        name = self.selected_task()
        if name is not None and self.open_btn.isEnabled():
            self.open_report.emit(name)

    def _resume(self) -> None:
        name = self.selected_task()
        if name is not None and self.resume_btn.isEnabled():
            self.resume_task.emit(name)

    def _activate(self) -> None:
        """Enter/double-click: open the report if there is one, else resume."""
        if self.open_btn.isEnabled():
            self._open()
        elif self.resume_btn.isEnabled():
            self._resume()
