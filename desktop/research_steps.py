"""The two optional steps before a research run that need the analyst: clarifying questions and
the plan.

Each is a group box the research panel shows while the analyst works in it, and each says what
the analyst decided through a signal; the panel owns the run's state and moves on from there.

- ``ClarifyStep`` shows the model's clarifying questions, an answer field under each. Continue
  emits ``answered`` with "question → answer" for every answer given (empty answers are
  skipped); Skip emits it with none.
- ``PlanStep`` shows the planner's plan in a ``PlanEditor`` (the command line's
  ``--plan-file``). "Research with this plan" emits ``accepted``; "Discard plan" emits
  ``discarded``. Reading the edited plan (``editor.plan()``) is the panel's, since an invalid
  edit is reported on its status line.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.research_inputs import PlanEditor


class ClarifyStep(QGroupBox):
    """The clarifying questions with an answer field each (see module docstring)."""

    answered = Signal(list)  # list[str]: "question → answer", one per answer given

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Clarifying questions", parent)
        self._form = QFormLayout()
        self.continue_btn = QPushButton("Continue")
        self.continue_btn.clicked.connect(lambda: self.answered.emit(self.answers()))
        self.skip_btn = QPushButton("Skip")
        self.skip_btn.clicked.connect(lambda: self.answered.emit([]))
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Answer what you can; empty answers are skipped."))
        lay.addLayout(self._form)
        lay.addLayout(button_row(self.continue_btn, self.skip_btn))

    def set_questions(self, questions: list[str]) -> None:
        """Show ``questions``, each with an empty answer field, in place of any shown before."""
        while self._form.rowCount():
            self._form.removeRow(0)
        for q in questions:
            label = QLabel(q)
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
            edit = QLineEdit()
            edit.setObjectName("clarify-answer")
            edit.setProperty("question", q)
            self._form.addRow(label, edit)

    def fields(self) -> list[QLineEdit]:
        """The answer fields of the questions now shown, in order."""
        return self.findChildren(QLineEdit, "clarify-answer")

    def answers(self) -> list[str]:
        """ "question → answer" for every field with an answer in it."""
        return [
            f"{e.property('question')} → {e.text().strip()}"
            for e in self.fields()
            if e.text().strip()
        ]


class PlanStep(QGroupBox):
    """The plan to review and edit before anything is researched (see module docstring)."""

    accepted = Signal()
    discarded = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Research plan", parent)
        self.editor = PlanEditor()
        self.go_btn = QPushButton("Research with this plan")
        self.go_btn.setObjectName("plan-start")
        self.go_btn.clicked.connect(lambda: self.accepted.emit())
        self.discard_btn = QPushButton("Discard plan")
        self.discard_btn.clicked.connect(lambda: self.discarded.emit())
        lay = QVBoxLayout(self)
        lay.addWidget(self.editor)
        lay.addLayout(button_row(self.go_btn, self.discard_btn))


def button_row(*widgets: QWidget) -> QHBoxLayout:
    """``widgets`` side by side from the left."""
    lay = QHBoxLayout()
    for w in widgets:
        lay.addWidget(w)
    lay.addStretch(1)
    return lay
