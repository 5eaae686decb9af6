"""Live progress of one research run: stages, researcher workers and the writer's draft.

``core`` reports a run as a stream of ``RunEvent``: ``stage`` events (planning, research,
follow-up, writing, checking citations, done), ``worker`` events (a researcher started its query,
took a step, finished) and ``token`` events (the writer's output). :class:`RunProgressView`
turns that stream into what an analyst watches: which stage the run is in, one row per worker
(its query, tool calls used of the limit, what it is doing now) and the draft as it is written.

A worker event's text is free-form; the view recognises ``researching: QUERY``, ``done (REASON),
N finding(s)`` and, when ``core`` reports it, ``K/L tool calls`` (shown in its own column);
any other text is shown as what the worker is doing now.

Above them, the run's clock (``core``'s ``RunClock``): time elapsed overall and in the current
stage and, when earlier runs here give an estimate, the time likely left; a one-second timer
ticks it while the run goes.

Threading: UI thread only. The research panel delivers events here through ``Operations``'
progress signal (events are produced on worker threads).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from PySide6.QtCore import QRect, QSize, Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.service import RunClock, RunEstimate, RunEvent

logger = logging.getLogger(__name__)

# The main stages, in order, as an analyst reads them.
STAGES: tuple[tuple[str, str], ...] = (
    ("planning", "Planning"),
    ("research", "Researching"),
    ("writing", "Writing"),
    ("checking citations", "Checking citations"),
    ("done", "Done"),
)
_STAGE_ALIASES = {
    "routing": "planning",
    "follow-up": "research",
    "repairing citations": "checking citations",
}
STOP_REASONS = {
    "finished": "finished",
    "max_steps": "stopped: step limit reached",
    "max_tool_calls": "stopped: tool-call limit reached",
    "repeated_results": "stopped: searches kept returning the same passages",
    "enough_evidence": "finished: enough passages read",
}
_DONE_RE = re.compile(r"^done \(([^)]*)\),?\s*(.*)$")
_CALLS_RE = re.compile(r"(\d+)\s*/\s*(\d+) tool calls")

COL_ID, COL_QUERY, COL_CALLS, COL_NOW = range(4)


class RunProgressView(QWidget):
    """Stage strip, worker table and streamed draft for one run (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._max_tool_calls = 0
        self._stage = ""
        self._reached: set[str] = set()
        self._rows: dict[str, QTreeWidgetItem] = {}

        strip = QHBoxLayout()
        strip.setContentsMargins(0, 0, 0, 0)
        self._stage_labels: dict[str, QLabel] = {}
        for key, text in STAGES:
            label = QLabel(text)
            label.setObjectName(f"stage-{key.replace(' ', '-')}")
            self._stage_labels[key] = label
            strip.addWidget(label)
        strip.addStretch(1)
        self.clock_label = QLabel()
        self.clock_label.setObjectName("run-clock")
        self.clock_label.setTextFormat(Qt.TextFormat.PlainText)
        self._clock: RunClock | None = None
        self._ticker = QTimer(self)
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._show_clock)
        self.detail = QLabel()
        self.detail.setObjectName("stage-detail")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)

        self.workers = QTreeWidget()
        self.workers.setObjectName("research-workers")
        self.workers.setHeaderLabels(["Query", "Research question", "Tool calls", "Now"])
        self.workers.setRootIsDecorated(False)
        self.workers.setWordWrap(True)
        header = self.workers.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(COL_ID, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COL_QUERY, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(COL_CALLS, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COL_NOW, QHeaderView.ResizeMode.Stretch)
        self._fit_timer = QTimer(self)  # rows are re-fitted once per burst of resizes
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(0)
        self._fit_timer.timeout.connect(self._fit_rows)
        header.sectionResized.connect(lambda *_: self._fit_timer.start())

        self.draft = QPlainTextEdit()
        self.draft.setObjectName("research-draft")
        self.draft.setReadOnly(True)
        self.draft.setPlaceholderText(
            "The writer's draft appears here as it is written. Citations are checked afterwards; "
            "the verified report opens when the run is done."
        )

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.workers)
        split.addWidget(self.draft)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(strip)
        lay.addWidget(self.clock_label)
        lay.addWidget(self.detail)
        lay.addWidget(split, 1)
        self.reset()

    # ------------------------------------------------------------------ public

    @property
    def stage(self) -> str:
        """The current main stage key ("" before the run starts)."""
        return self._stage

    @property
    def reached(self) -> frozenset[str]:
        """Every main stage the run has entered so far."""
        return frozenset(self._reached)

    def reset(self, max_tool_calls: int = 0) -> None:
        self._max_tool_calls = max_tool_calls
        self._stage = ""
        self._reached = set()
        self._rows = {}
        self.workers.clear()
        self.draft.clear()
        self.detail.setText("")
        self._ticker.stop()
        self._clock = None
        self.clock_label.setText("")
        self.clock_label.setToolTip("")
        self._paint()

    def start_clock(
        self, estimate: RunEstimate | None = None, *, now: Callable[[], float] = time.monotonic
    ) -> None:
        """The run starts now: tick its elapsed time (and remaining, given an estimate)."""
        self._clock = RunClock(estimate, now=now)
        self.set_estimate(estimate)
        self._ticker.start()

    def set_estimate(self, estimate: RunEstimate | None) -> None:
        """The estimate for the run (it is read in the background, so it may come late)."""
        if self._clock is None:
            return
        self._clock.estimate = estimate
        self.clock_label.setToolTip(estimate.summary() if estimate is not None else "")
        self._show_clock()

    def stop_clock(self) -> None:
        """The run returned: the clock stops at its total."""
        if self._clock is not None:
            self._clock.on_stage("done")
            self._show_clock()
        self._ticker.stop()

    @property
    def clock_text(self) -> str:
        return self.clock_label.text()

    def apply(self, event: RunEvent) -> None:
        """Show one event."""
        if event.kind == "token":
            self.append_draft(event.text)
        elif event.kind == "stage":
            self._on_stage(event)
        elif event.kind == "worker" and event.worker:
            self._on_worker(event.worker, event.text)
        elif event.text:
            self.detail.setText(event.text)

    def append_draft(self, text: str) -> None:
        cursor = self.draft.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self.draft.setTextCursor(cursor)
        self.draft.ensureCursorVisible()

    def set_detail(self, text: str) -> None:
        self.detail.setText(text)

    def worker_rows(self) -> dict[str, tuple[str, str, str]]:
        """worker id -> (research question, tool calls, now) as shown (tests, a11y)."""
        return {
            wid: (item.text(COL_QUERY), item.text(COL_CALLS), item.text(COL_NOW))
            for wid, item in self._rows.items()
        }

    # ------------------------------------------------------------------ internals

    def _show_clock(self) -> None:
        if self._clock is None:
            return
        reading = self._clock.read()
        text = reading.line()
        est = self._clock.estimate
        if est is not None and not est.available and not reading.done:
            text += " · no estimate yet (no earlier run here with this model)"
        self.clock_label.setText(text)
        if reading.done:
            self._ticker.stop()

    def _on_stage(self, event: RunEvent) -> None:
        if self._clock is not None:
            self._clock.on_stage(event.stage)
            self._show_clock()
        key = _STAGE_ALIASES.get(event.stage, event.stage)
        if key in self._stage_labels:
            self._stage = key
            self._reached.add(key)
            if key == "done":
                self._reached.update(k for k, _ in STAGES)
        label = dict(STAGES).get(key, event.stage.capitalize())
        if event.stage in _STAGE_ALIASES:
            label = event.stage.capitalize()
        self.detail.setText(f"{label}: {event.text}" if event.text else f"{label}…")
        if event.stage == "writing":
            self.draft.clear()
        self._paint()

    def _on_worker(self, worker: str, text: str) -> None:
        item = self._rows.get(worker)
        if item is None:
            item = QTreeWidgetItem([worker, "", "", ""])
            self._rows[worker] = item
            self.workers.addTopLevelItem(item)
            if self._max_tool_calls:  # until core reports a count, show the limit
                item.setText(COL_CALLS, f"limit {self._max_tool_calls}")
        if text.startswith("researching: "):
            item.setText(COL_QUERY, text.removeprefix("researching: "))
            item.setToolTip(COL_QUERY, item.text(COL_QUERY))
            item.setText(COL_NOW, "searching the library")
            self._fit_timer.start()
            return
        calls = _CALLS_RE.search(text)
        if calls:
            item.setText(COL_CALLS, f"{calls.group(1)} of {calls.group(2)}")
        done = _DONE_RE.match(text)
        if done:
            reason = STOP_REASONS.get(done.group(1), done.group(1).replace("_", " "))
            now = f"{reason}; {done.group(2)}" if done.group(2) else reason
        else:
            now = text
        item.setText(COL_NOW, now)
        item.setToolTip(COL_NOW, now)
        self._fit_timer.start()

    def _fit_rows(self) -> None:
        """Make each worker row tall enough for its wrapped question and status: a tree view
        wraps text only inside the row height it was given, and never grows a row itself."""
        metrics = self.workers.fontMetrics()
        header = self.workers.header()
        flags = int(Qt.TextFlag.TextWordWrap)
        for item in self._rows.values():
            height = max(
                metrics.boundingRect(
                    QRect(0, 0, max(header.sectionSize(col) - 10, 40), 10_000),
                    flags,
                    item.text(col),
                ).height()
                for col in (COL_QUERY, COL_NOW)
            )
            item.setSizeHint(COL_QUERY, QSize(header.sectionSize(COL_QUERY), height + 4))
        self.workers.doItemsLayout()

    def _paint(self) -> None:
        for key, label in self._stage_labels.items():
            text = dict(STAGES)[key]
            if key == self._stage and key != "done":
                label.setText(f"▶ {text}")
                font = label.font()
                font.setBold(True)
                label.setFont(font)
            else:
                label.setText(f"✓ {text}" if key in self._reached else f"○ {text}")
                font = label.font()
                font.setBold(False)
                label.setFont(font)
