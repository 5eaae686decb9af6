"""The inputs of a research run: the question, which sources it may read, and the plan it
follows.

:class:`QuestionEdit` is the question box: Enter starts the run (the form's one primary
action), Shift+Enter adds a line. :class:`FoldingSection` folds the sources and options away
under one line that says what they are set to, so the question and its Start button keep their
place at the top of a laptop screen.

:class:`SourcePicker` turns the analyst's choice into a ``Boundary``, the hard filter no step of
the run can widen: the whole library, or the union of ticked documents and collections, plus web
on/off (disabled, with the reason, while web access is off in Settings).

:class:`PlanEditor` shows a ``ResearchPlan`` as an analyst reads it — the research questions the
workers will pursue, their purpose and order — and turns the edited form back into a
``ResearchPlan`` (the same JSON the command line's ``--plan-file`` takes, so plans can be saved
and loaded). Fields an analyst does not edit (preferred tools, components, constraints) are kept
from the plan that was loaded.

Threading: these widgets live on the UI thread and never call ``core``; the research panel loads
documents and collections through ``Operations`` and hands them in.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.errors import ConfigError
from core.service import Boundary, Collection, Document, ResearchPlan
from desktop.errors import show_error

logger = logging.getLogger(__name__)

ROLE_REF = Qt.ItemDataRole.UserRole
MAX_QUERIES = 5
ANSWER_SHAPES = {
    "report": "A report",
    "brief_answer": "A brief answer",
    "table": "A table",
    "comparison": "A comparison",
}


# What the research panel shows until the first run: how to begin.
INTRO_HTML = (
    "<h3>How to begin</h3>"
    "<ol>"
    "<li>Type a question above and press <b>Enter</b>.</li>"
    "<li>Sourcebook plans the research, reads passages of your library and writes a report in "
    "which every claim cites the passage it came from. Each step shows here as it runs.</li>"
    "<li>In the report, hover a citation <b>[n]</b> to read the quoted words; click it to open "
    "the page with those words highlighted in the evidence viewer on the right.</li>"
    "</ol>"
    "<p><b>Sources and options</b> (above) limit the run to some documents or collections, ask "
    "you clarifying questions first, or show you the plan before anything is researched.</p>"
)
_ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


class QuestionEdit(QPlainTextEdit):
    """The question box: Enter emits ``submitted``; Shift+Enter starts a new line. Three lines
    high (a longer question scrolls), Tab moves the focus on."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTabChangesFocus(True)
        lines = 3
        margins = self.contentsMargins()
        doc_margin = 2 * int(self.document().documentMargin())
        self.setFixedHeight(
            self.fontMetrics().lineSpacing() * lines
            + doc_margin
            + margins.top()
            + margins.bottom()
            + 2 * self.frameWidth()
        )

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in _ENTER_KEYS:
            mods = event.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                event.accept()
                return
            if not mods & ~Qt.KeyboardModifier.KeypadModifier:
                event.accept()
                self.submitted.emit()
                return
        super().keyPressEvent(event)


class FoldingSection(QWidget):
    """A titled section whose body folds away: a disclosure button ("▸ Title · summary") over
    the body. Folded by default; :meth:`set_summary` says what the folded body is set to."""

    def __init__(self, title: str, body: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._title = title
        self.body = body
        self.toggle = QToolButton()
        self.toggle.setObjectName("fold-toggle")
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.toggled.connect(self.set_expanded)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.toggle)
        lay.addWidget(body)
        self._summary = ""
        self.set_expanded(False)

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def set_expanded(self, expanded: bool) -> None:
        if self.toggle.isChecked() != expanded:
            self.toggle.setChecked(expanded)  # re-enters through toggled
            return
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.body.setVisible(expanded)
        self._relabel()

    def set_summary(self, summary: str) -> None:
        self._summary = summary
        self._relabel()

    def _relabel(self) -> None:
        hint = "hide" if self.expanded else "change"
        self.toggle.setText(f"{self._title}: {self._summary}" if self._summary else self._title)
        self.toggle.setToolTip(f"{self._title} ({hint})")


class SourcePicker(QWidget):
    """Whole library, or ticked documents and collections; web on/off (see module docstring).

    Signal ``changed()`` whenever the choice changes (for a summary of it, :meth:`summary`)."""

    changed = Signal()

    def __init__(self, web_enabled: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.all_radio = QRadioButton("Whole library")
        self.all_radio.setChecked(True)
        self.some_radio = QRadioButton("Only the documents and collections I tick")
        group = QButtonGroup(self)
        group.addButton(self.all_radio)
        group.addButton(self.some_radio)
        self.some_radio.toggled.connect(self._sync)

        self.tree = QTreeWidget()
        self.tree.setObjectName("research-sources")
        self.tree.setHeaderHidden(True)
        self.tree.setMinimumHeight(90)
        self.tree.setMaximumHeight(160)
        self._collections = QTreeWidgetItem(["Collections"])
        self._documents = QTreeWidgetItem(["Documents"])
        for top in (self._collections, self._documents):
            top.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(top)

        self.web = QCheckBox("Also search the web")
        self.web_note = QLabel()
        self.web_note.setWordWrap(True)
        if web_enabled:
            self.web.setToolTip("Web pages may be fetched for this question.")
            self.web_note.hide()
        else:
            self.web.setEnabled(False)
            self.web.setToolTip("Web access is off in Settings.")
            self.web_note.setText(
                "Web search is off: Sourcebook works offline by default. "
                "Turn on web access in Settings to use it."
            )

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.all_radio)
        row.addWidget(self.some_radio)
        row.addStretch(1)
        lay.addLayout(row)
        lay.addWidget(self.tree)
        lay.addWidget(self.web)
        lay.addWidget(self.web_note)
        self.all_radio.toggled.connect(lambda _on: self.changed.emit())
        self.tree.itemChanged.connect(lambda *_a: self.changed.emit())
        self.web.toggled.connect(lambda _on: self.changed.emit())
        self._sync()

    def summary(self) -> str:
        """The choice in a few words: "whole library", "2 documents, 1 collection", "+ web"."""
        web = " + web" if self.web.isEnabled() and self.web.isChecked() else ""
        if self.all_radio.isChecked():
            return "whole library" + web
        ticked = self._ticked()
        docs = sum(1 for kind, _ in ticked if kind == "doc")
        cols = len(ticked) - docs
        parts = [
            f"{n} {w}{'s' if n != 1 else ''}"
            for n, w in ((docs, "document"), (cols, "collection"))
            if n
        ]
        return (", ".join(parts) or "nothing ticked yet") + web

    def set_items(self, documents: list[Document], collections: list[Collection]) -> None:
        """Fill the lists, keeping what was ticked (by document id / collection name)."""
        ticked = self._ticked()
        for top in (self._collections, self._documents):
            top.takeChildren()
        for c in sorted(collections, key=lambda c: c.name.lower()):
            label = f"{c.name} ({len(c.doc_ids)} document{'s' if len(c.doc_ids) != 1 else ''})"
            self._add(self._collections, label, ("collection", c.name), ticked)
        for d in sorted(documents, key=lambda d: d.title.lower()):
            if d.superseded_by:
                continue
            label = d.title or d.source_uri
            item = self._add(self._documents, label, ("doc", d.doc_id), ticked)
            item.setToolTip(0, d.source_uri)
        self._collections.setHidden(self._collections.childCount() == 0)
        self.tree.expandAll()

    def set_boundary(self, boundary: Boundary) -> None:
        """Show ``boundary`` (used when a run is resumed)."""
        wanted = {("doc", d) for d in boundary.doc_refs} | {
            ("collection", c) for c in boundary.collections
        }
        self.some_radio.setChecked(bool(wanted))
        self.all_radio.setChecked(not wanted)
        for item in self._items():
            ref = tuple(item.data(0, ROLE_REF))
            item.setCheckState(
                0, Qt.CheckState.Checked if ref in wanted else Qt.CheckState.Unchecked
            )
        if self.web.isEnabled():
            self.web.setChecked(boundary.web)

    def boundary(self) -> Boundary:
        """The chosen boundary; ``ConfigError`` when "only ticked" is chosen with nothing ticked."""
        web = self.web.isEnabled() and self.web.isChecked()
        if self.all_radio.isChecked():
            return Boundary(web=web)
        ticked = self._ticked()
        docs = tuple(ref for kind, ref in ticked if kind == "doc")
        cols = tuple(ref for kind, ref in ticked if kind == "collection")
        if not docs and not cols:
            raise ConfigError(
                "No sources are ticked.",
                hint="Tick at least one document or collection, or choose Whole library.",
            )
        return Boundary(doc_refs=docs, collections=cols, web=web)

    def _add(
        self, parent: QTreeWidgetItem, label: str, ref: tuple[str, str], ticked: set[Any]
    ) -> QTreeWidgetItem:
        item = QTreeWidgetItem([label])
        item.setData(0, ROLE_REF, list(ref))
        item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(0, Qt.CheckState.Checked if ref in ticked else Qt.CheckState.Unchecked)
        parent.addChild(item)
        return item

    def _items(self) -> list[QTreeWidgetItem]:
        out: list[QTreeWidgetItem] = []
        for top in (self._collections, self._documents):
            out += [c for c in (top.child(i) for i in range(top.childCount())) if c is not None]
        return out

    def _ticked(self) -> set[Any]:
        return {
            tuple(item.data(0, ROLE_REF))
            for item in self._items()
            if item.checkState(0) == Qt.CheckState.Checked
        }

    def _sync(self) -> None:
        self.tree.setEnabled(self.some_radio.isChecked())


def starter_plan(question: str, answers: list[str] | None = None) -> ResearchPlan:
    """A one-query plan (the question itself) for the analyst to refine."""
    analysis = "Answer the question from the chosen sources."
    if answers:
        analysis += " Clarifications: " + "; ".join(answers)
    return ResearchPlan.model_validate(
        {
            "task_analysis": analysis,
            "answer_shape": "report",
            "queries": [{"id": "q1", "query": question.strip()[:300]}],
        }
    )


class PlanEditor(QWidget):
    """An editable ``ResearchPlan`` (see the module docstring)."""

    COLUMNS = ("Id", "Research question", "Purpose", "Runs after")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._kept: dict[str, dict[str, Any]] = {}  # query id -> fields not shown
        self._extra: dict[str, Any] = {}

        self.analysis = QPlainTextEdit()
        self.analysis.setObjectName("plan-analysis")
        self.analysis.setPlaceholderText("What the research must find out, in a sentence or two.")
        self.analysis.setMaximumHeight(70)
        self.shape = QComboBox()
        for key, label in ANSWER_SHAPES.items():
            self.shape.addItem(label, key)

        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setObjectName("plan-queries")
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(110)
        self.table.setMaximumHeight(200)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        # A question wraps to its column: rows re-fit when the columns change width (<= 5 rows).
        header.sectionResized.connect(lambda *_a: self.table.resizeRowsToContents())
        self.table.setToolTip(
            "Each question should make sense on its own (repeat names, places and dates), "
            "or write #q1 where the answer of question q1 goes: the run fills it in. "
            "'Runs after' lists ids of questions whose findings it needs, e.g. q1."
        )

        self.add_btn = QPushButton("Add question")
        self.add_btn.clicked.connect(lambda: self.add_query(""))
        self.remove_btn = QPushButton("Remove selected")
        self.remove_btn.clicked.connect(self._remove_selected)
        load = QPushButton("Load plan…")
        load.clicked.connect(self._load_dialog)
        save = QPushButton("Save plan…")
        save.clicked.connect(self._save_dialog)

        form = QFormLayout()
        form.addRow("Task", self.analysis)
        form.addRow("Answer as", self.shape)
        buttons = QHBoxLayout()
        for b in (self.add_btn, self.remove_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(load)
        buttons.addWidget(save)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(form)
        lay.addWidget(QLabel(f"Research questions (up to {MAX_QUERIES}), one per worker:"))
        lay.addWidget(self.table)
        lay.addLayout(buttons)

    # ------------------------------------------------------------------ plan <-> form

    def set_plan(self, plan: ResearchPlan) -> None:
        data = plan.model_dump(mode="json")
        self.analysis.setPlainText(data["task_analysis"])
        index = self.shape.findData(data["answer_shape"])
        self.shape.setCurrentIndex(max(index, 0))
        self._extra = {"components": data["components"], "constraints": data["constraints"]}
        self._kept = {}
        self.table.setRowCount(0)
        for q in data["queries"]:
            self._kept[q["id"]] = {
                "preferred_tool": q["preferred_tool"],
                "fallback_tool": q["fallback_tool"],
            }
            self._append_row(q["id"], q["query"], q["purpose"], ", ".join(q["depends_on"]))
        self._sync()

    def plan(self) -> ResearchPlan:
        """The edited plan; ``ConfigError`` saying what to fix when it is not valid."""
        queries: list[dict[str, Any]] = []
        for row in range(self.table.rowCount()):
            qid = self._cell(row, 0) or f"q{row + 1}"
            text = " ".join(self._cell(row, 1).split())
            if not text:
                continue
            deps = [d for d in re.split(r"[\s,;]+", self._cell(row, 3)) if d]
            q = {"id": qid, "query": text, "purpose": self._cell(row, 2), "depends_on": deps[:3]}
            q.update(self._kept.get(qid, {}))
            queries.append(q)
        if not queries:
            raise ConfigError(
                "The plan has no research question.", hint="Add at least one question."
            )
        data = {
            "task_analysis": self.analysis.toPlainText().strip() or "Answer the question.",
            "answer_shape": self.shape.currentData(),
            **self._extra,
            "queries": queries,
        }
        try:
            return ResearchPlan.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(
                f"The plan is not valid: {problems}",
                hint="Each question needs at least 3 characters; at most 5 questions.",
            ) from exc

    def add_query(self, text: str, purpose: str = "") -> None:
        if self.table.rowCount() >= MAX_QUERIES:
            return
        ids = {self._cell(r, 0) for r in range(self.table.rowCount())}
        n = self.table.rowCount() + 1
        while f"q{n}" in ids:
            n += 1
        self._append_row(f"q{n}", text, purpose, "")
        self.table.setCurrentCell(self.table.rowCount() - 1, 1)
        self._sync()

    def load_json(self, text: str) -> None:
        """Load a plan in the command line's ``--plan-file`` JSON format."""
        try:
            self.set_plan(ResearchPlan.model_validate_json(text))
        except ValidationError as exc:
            raise ConfigError(
                f"This is not a Sourcebook plan: {exc.error_count()} problem(s).",
                hint="Load a file saved with Save plan… or written for --plan-file.",
            ) from exc

    def to_json(self) -> str:
        return json.dumps(self.plan().model_dump(mode="json"), indent=2)

    # ------------------------------------------------------------------ internals

    def _append_row(self, qid: str, text: str, purpose: str, deps: str) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        id_item = QTableWidgetItem(qid)
        id_item.setFlags(id_item.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.table.setItem(row, 0, id_item)
        for col, value in ((1, text), (2, purpose), (3, deps)):
            self.table.setItem(row, col, QTableWidgetItem(value))
        self.table.resizeRowToContents(row)

    def _cell(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text().strip() if item is not None else ""

    def _remove_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        for row in rows:
            self.table.removeRow(row)
        self._sync()

    def _sync(self) -> None:
        self.add_btn.setEnabled(self.table.rowCount() < MAX_QUERIES)
        self.remove_btn.setEnabled(self.table.rowCount() > 1)

    def _load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load plan", "", "Plan (*.json)")
        if not path:
            return
        try:
            self.load_json(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            show_error(self, ConfigError(f"Cannot read {path}: {exc.strerror or exc}"))
        except ConfigError as exc:
            show_error(self, exc)

    def _save_dialog(self) -> None:
        try:
            text = self.to_json()
        except ConfigError as exc:
            show_error(self, exc)
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save plan", "plan.json", "Plan (*.json)")
        if not path:
            return
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            show_error(self, ConfigError(f"Cannot write {path}: {exc.strerror or exc}"))
