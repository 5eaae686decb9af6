"""The Ask panel: a question, a cited answer in seconds, follow-ups, and "Research this".

A conversation goes question by question: Enter in the question box asks (``Sourcebook.ask``:
one search inside the sources, one model call, the checks of a research run); the answer
streams in as the model writes it, then the checked answer replaces it below, in a
:class:`~desktop.report_view.ReportView` like the Report tab's, so each citation opens its
passage in the evidence viewer the same way. The follow-up box asks the next question in the
same conversation (it reuses what was read and searches again). "Research this" hands the
conversation's current question, with what it read, to the research panel for a full run
(``research_requested(name, question)``); "New conversation" starts over.

Conversations are named when they start (``ask-YYYYMMDD-HHMMSS-xxxx``) and kept in the task log, so
History lists them and :meth:`open_conversation` reopens one: its last checked answer is shown
and a question that was interrupted is put back in the box, to resume with Enter.

Threading: every ``core`` call goes through ``Operations`` (model work with ``beside=True``, so
an Ask may run while a research run goes on);
tokens and stages reach this widget through the operation's progress signal, so every method
here runs on the UI thread. The result of an operation the user abandoned is ignored.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from core.errors import ConfigError, SourcebookError
from core.service import Boundary, Conversation, Report, RunEvent, Sourcebook
from desktop.errors import guarded, show_error
from desktop.operations import OpContext, Operations, OpHandle
from desktop.report_view import ReportView, status_text
from desktop.research_inputs import SourcePicker

logger = logging.getLogger(__name__)


class AskPanel(QWidget):
    """Question, streamed answer, checked answer, follow-ups (see the module docstring).

    Signals: ``citation_activated(CitationRecord)`` (a citation of the checked answer; the main
    window opens the evidence viewer), ``research_requested(str, str)`` (the conversation to
    research in full, and its current question), ``answered(Report)`` after each checked
    answer (History refreshes).
    """

    citation_activated = Signal(object)
    research_requested = Signal(str, str)
    answered = Signal(object)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        self._conversation: str | None = None
        self._boundary: Boundary | None = None
        self._handle: OpHandle[Any] | None = None
        self._generation = 0
        self._build()
        ops.library_did_change.connect(lambda _changes: self.reload_sources())
        self.reload_sources()
        self._sync()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.question = QLineEdit()
        self.question.setObjectName("ask-question")
        self.question.setPlaceholderText("Ask a question about your library and press Enter")
        self.question.returnPressed.connect(self.ask)
        self.ask_btn = QPushButton("Ask")
        self.ask_btn.setObjectName("ask-start")
        self.ask_btn.clicked.connect(self.ask)

        self.sources = SourcePicker(web_enabled=False)  # Ask reads the library only
        self.sources.web.hide()
        self.sources.web_note.hide()
        self.sources_box = QGroupBox("Sources of a new conversation")
        QVBoxLayout(self.sources_box).addWidget(self.sources)

        self.streamed = QPlainTextEdit()
        self.streamed.setObjectName("ask-streamed")
        self.streamed.setReadOnly(True)
        self.streamed.setPlaceholderText("The answer appears here as it is written.")
        self.streamed.setMaximumHeight(110)

        self.answer = ReportView()
        self.answer.setObjectName("ask-answer")
        self.answer.citation_activated.connect(self.citation_activated)

        self.follow_up = QLineEdit()
        self.follow_up.setObjectName("ask-follow-up")
        self.follow_up.setPlaceholderText("Ask a follow-up question and press Enter")
        self.follow_up.returnPressed.connect(self.ask_follow_up)
        self.research_btn = QPushButton("Research this")
        self.research_btn.setObjectName("ask-research")
        self.research_btn.setToolTip(
            "A full research run on the current question, starting from what was read here"
        )
        self.research_btn.clicked.connect(self.research_this)
        self.new_btn = QPushButton("New conversation")
        self.new_btn.clicked.connect(self.start_new)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)

        self.status = QLabel()
        self.status.setObjectName("ask-status")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)

        top = QWidget()
        top_lay = QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.addLayout(_row(self.question, self.ask_btn, stretch=False))
        top_lay.addWidget(self.sources_box)
        top_lay.addWidget(self.streamed)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(self.answer)
        split.setStretchFactor(1, 3)
        root = QVBoxLayout(self)
        root.addWidget(split, 1)
        root.addLayout(_row(self.follow_up, stretch=False))
        root.addLayout(_row(self.research_btn, self.new_btn, self.cancel_btn))
        root.addWidget(self.status)

    # ------------------------------------------------------------------ public API

    @property
    def busy(self) -> bool:
        return self._handle is not None

    @property
    def conversation(self) -> str | None:
        """The name of the conversation on screen (None before its first question)."""
        return self._conversation

    def ask(self) -> None:
        """Ask the question box's question: in a new conversation, or (when one is open and
        the box holds its interrupted question) to resume it."""
        text = " ".join(self.question.text().split())
        if self._conversation is None:
            try:
                self._boundary = self.sources.boundary()
            except ConfigError as exc:
                self.status.setText(f"{exc.message} {exc.hint or ''}".strip())
                return
            # when it started, and four hex digits: two started in one second stay two
            self._conversation = time.strftime("ask-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        self._ask(text)

    def ask_follow_up(self) -> None:
        """Ask the follow-up box's question in the conversation on screen."""
        if self._conversation is None:
            self.status.setText("Ask a first question above; follow-ups continue it.")
            return
        self._ask(" ".join(self.follow_up.text().split()))

    def start_new(self) -> None:
        """Forget the conversation on screen (it stays in History) and focus the question."""
        if self.busy:
            return
        self._generation += 1
        self._conversation = None
        self.question.clear()
        self.follow_up.clear()
        self.streamed.clear()
        self.answer.clear()
        self.status.setText("")
        self._sync()
        self.question.setFocus(Qt.FocusReason.OtherFocusReason)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self.status.setText("Cancelling… ask the same question again to resume it.")

    def research_this(self) -> None:
        report = self.answer.current_report()
        if self._conversation is not None and report is not None and not self.busy:
            self.research_requested.emit(self._conversation, report.question)

    def open_conversation(self, name: str) -> None:
        """Show a saved conversation (History): its last checked answer; an interrupted
        question goes back in the box, where Enter resumes it."""
        if self.busy:
            self.status.setText("A question is being answered; open the conversation after it.")
            return
        gen = self._next_generation()
        svc = self._service
        self._ops.run(
            lambda _ctx: svc.conversation(name),
            label=f"Opening conversation {name}",
            on_success=guarded(self, lambda conv: self._opened(conv, gen)),
            on_error=guarded(self, lambda exc: self._failed(exc, gen)),
        )

    def reload_sources(self) -> None:
        svc = self._service
        self._ops.run(
            lambda _ctx: (svc.documents(include_superseded=False), svc.collections()),
            label="Loading sources",
            on_success=guarded(self, lambda lists: self.sources.set_items(*lists)),
            on_error=lambda exc: logger.warning("could not load the sources: %s", exc),
        )

    # ------------------------------------------------------------------ steps

    def _ask(self, question: str) -> None:
        if self.busy:
            return
        if len(question) < 3:
            self.status.setText("Type a question first (a few words at least).")
            return
        name = self._conversation
        assert name is not None
        boundary = self._boundary if not self.answer.current_report() else None
        svc = self._service
        gen = self._next_generation()
        self.streamed.clear()
        self.status.setText("Searching the sources…")

        def work(ctx: OpContext) -> Report:
            return svc.ask(
                question,
                conversation=name,
                boundary=boundary,
                cancel=ctx.cancel,
                on_event=ctx.progress,
                on_token=lambda tok: ctx.progress(RunEvent(kind="token", text=tok)),
            )

        self._handle = self._ops.run(
            work,
            label=f"Ask: {question[:60]}",
            beside=True,  # not behind a research run: its calls queue between the run's
            on_progress=guarded(self, lambda ev: self._progress(ev, gen)),
            on_success=guarded(self, lambda report: self._answered(report, gen)),
            on_error=guarded(self, lambda exc: self._failed(exc, gen)),
        )
        self._sync()

    def _progress(self, event: object, gen: int) -> None:
        if gen != self._generation or not isinstance(event, RunEvent):
            return
        if event.kind == "token":
            self.streamed.insertPlainText(event.text)
            self.streamed.ensureCursorVisible()
        elif event.kind == "stage" and event.stage != "done":
            self.status.setText(f"{event.stage.capitalize()}…")

    def _answered(self, report: Report, gen: int) -> None:
        if gen != self._generation:
            return
        self._handle = None
        self.answer.show_report(report)
        reasons = " ".join(report.status_reasons[:2])
        self.status.setText(f"{status_text(report.status)} {reasons}".strip())
        if report.status == "cancelled":
            self.follow_up.setText(report.question)  # Enter resumes it
        else:
            self.follow_up.clear()
        self._sync()
        self.follow_up.setFocus(Qt.FocusReason.OtherFocusReason)
        self.answered.emit(report)

    def _opened(self, conv: Conversation, gen: int) -> None:
        if gen != self._generation:
            return
        self._conversation = conv.name
        self._boundary = conv.boundary
        self.streamed.clear()
        self.answer.clear()
        if conv.last is not None:
            self.answer.show_report(conv.last.report)
        pending = conv.pending()
        if pending is not None:
            (self.question if conv.last is None else self.follow_up).setText(pending[1])
            self.status.setText("This question was interrupted: press Enter to resume it.")
        else:
            n = len(conv.turns)
            self.status.setText(f"Conversation {conv.name}: {n} question(s). Ask a follow-up.")
        self._sync()

    def _failed(self, exc: BaseException, gen: int) -> None:
        if gen != self._generation:
            logger.info("an abandoned Ask step failed: %s", exc)
            return
        self._handle = None
        self._sync()
        what = exc.message if isinstance(exc, SourcebookError) else str(exc)
        self.status.setText(f"Stopped: {what}")
        show_error(self, exc)

    # ------------------------------------------------------------------ state

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    def _sync(self) -> None:
        idle = not self.busy
        started = self._conversation is not None and self.answer.current_report() is not None
        self.question.setEnabled(idle and not started)
        self.ask_btn.setEnabled(idle and not started)
        self.sources_box.setVisible(not started)
        self.follow_up.setEnabled(idle and started)
        self.research_btn.setEnabled(idle and started)
        self.new_btn.setEnabled(idle)
        self.cancel_btn.setEnabled(not idle)


def _row(*widgets: QWidget, stretch: bool = True) -> QHBoxLayout:
    lay = QHBoxLayout()
    for w in widgets:
        lay.addWidget(w, 1 if not stretch and isinstance(w, QLineEdit) else 0)
    if stretch:
        lay.addStretch(1)
    return lay
