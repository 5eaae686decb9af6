"""The research panel: ask a question, choose sources, review the plan, watch the run, cancel.

Layout: the question box and Start sit at the top, never scrolled away (Enter starts, Shift+Enter
adds a line); the sources and options fold away under one line that says what they are set to;
below, the steps that need the analyst (clarifying answers, the plan), then the run's progress
(a short how-to-begin until the first run).

A run goes through up to three steps, each optional but the last:

1. *Clarify* — "Ask me clarifying questions first" calls ``Sourcebook.clarify``; the questions
   appear with answer fields (``research_steps.ClarifyStep``), and the answers go to the planner.
2. *Plan first* — "Let me review the plan" shows the plan in an editor before anything is
   researched (``research_steps.PlanStep``); the edited ``ResearchPlan`` is passed as ``plan=``
   (the command line's ``--plan-file``), which skips the planner.
3. *Research* — ``Sourcebook.research`` with ``on_event``/``on_token`` forwarded to the UI:
   stages, one row per researcher worker, the writer's draft streaming in. Cancel sets the run's
   cancel event; ``core`` stops at its next step and returns a report with status
   ``cancelled``, which the task log keeps so the run can be resumed.

Before Start, a line says how long a run is likely to take here (``EstimateLabel``: the median
of earlier runs with the same models and limits); while a run goes, the progress view ticks its
elapsed and remaining time. A run may be left going while the analyst reads or asks elsewhere
(it allows ``beside`` work, an Ask, to share the model between its calls).

When a run returns, ``report_ready(Report)`` is emitted (whatever the status; the report view
states it plainly), and "Open the report" stays to open it again (a run that finished while the
analyst was elsewhere is opened from here). :meth:`resume` reruns a named task: ``core`` reuses
every step its log completed, so only the missing work runs again.

Task names: a new run is named by ``core`` from the question (as on the command line), so asking
the same question again resumes or reopens that task. A run with an edited plan is named after
the question *and* the plan, because ``core`` would otherwise reuse the plan it recorded first.

Threading: every ``core`` call goes through ``Operations`` (model calls with ``exclusive=True``,
the run itself with ``allow_beside=True``);
events from ``core``'s worker threads reach this widget through the operation's progress signal,
so every method here runs on the UI thread. Results of an operation the user abandoned (a newer
one was started) are ignored.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from core.errors import ConfigError, SourcebookError
from core.service import (
    Boundary,
    Report,
    ResearchLimits,
    ResearchPlan,
    RunEstimate,
    RunEvent,
    Sourcebook,
    TaskInfo,
)
from desktop.errors import show_error
from desktop.operations import OpContext, Operations, OpHandle
from desktop.report_view import status_text
from desktop.research_inputs import (
    INTRO_HTML,
    FoldingSection,
    QuestionEdit,
    SourcePicker,
    starter_plan,
)
from desktop.research_steps import ClarifyStep, PlanStep, button_row
from desktop.run_estimate import EstimateLabel
from desktop.run_progress import RunProgressView

logger = logging.getLogger(__name__)

IDLE, CLARIFYING, ANSWERING, PLANNING, RUNNING = (
    "idle",
    "clarifying",
    "answering",
    "planning",
    "running",
)


@dataclass
class RunRequest:
    """Everything one research run needs; built from the form or from a task to resume."""

    question: str
    boundary: Boundary
    answers: list[str] = field(default_factory=list)
    plan: ResearchPlan | None = None
    task: str | None = None
    fresh: bool = False
    limits: ResearchLimits | None = None
    conversation: str | None = None  # "Research this": the Ask conversation it starts from


def plan_task_name(question: str, plan: ResearchPlan) -> str:
    """A task name for a run with an edited plan: the question's words plus a hash of both."""
    slug = "-".join(re.findall(r"[a-z0-9]+", question.lower())[:6]) or "task"
    digest = hashlib.sha256((question + plan.model_dump_json()).encode()).hexdigest()[:6]
    return f"{slug}-plan-{digest}"


class ResearchPanel(QWidget):
    """Question, sources, clarification, plan, live progress and cancel (see module docstring).

    Signals: ``report_ready(Report)`` when a run returned a report (any status);
    ``run_event(RunEvent)`` for every progress event of the current run once it is shown (a
    status bar may echo it).
    """

    report_ready = Signal(object)
    run_event = Signal(object)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        self._phase = IDLE
        self._generation = 0  # bumped whenever the user abandons the current step
        self._request: RunRequest | None = None
        self._handle: OpHandle[Any] | None = None
        self._started_at = 0.0
        self._last_report: Report | None = None
        self._build()
        ops.library_did_change.connect(self._library_changed)
        self.reload_sources()
        self.estimate.refresh()
        self._sync()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.question = QuestionEdit()
        self.question.setObjectName("research-question")
        self.question.setPlaceholderText(
            "Ask a question about your library, e.g. “What did the 2019 inspections find?” "
            "Enter starts the research; Shift+Enter adds a line."
        )
        self.question.submitted.connect(self.start)
        question_label = QLabel("&Question")
        question_label.setBuddy(self.question)

        web = self._service.settings.web.enabled
        self.sources = SourcePicker(web_enabled=web)
        sources_box = QGroupBox("Sources")
        QVBoxLayout(sources_box).addWidget(self.sources)
        self.clarify_check = QCheckBox("Ask me clarifying questions first")
        self.plan_check = QCheckBox("Let me review the research plan before it starts")
        options_body = QWidget()
        options_lay = QVBoxLayout(options_body)
        options_lay.setContentsMargins(0, 0, 0, 0)
        options_lay.addWidget(sources_box)
        options_lay.addWidget(self.clarify_check)
        options_lay.addWidget(self.plan_check)
        self.options = FoldingSection("Sources and options", options_body)
        self.options.setObjectName("research-options")
        for signal in (self.sources.changed, self.clarify_check.toggled, self.plan_check.toggled):
            signal.connect(self._summarise_options)

        self.start_btn = QPushButton("Start research")
        self.start_btn.setObjectName("research-start")
        self.start_btn.setDefault(True)
        self.start_btn.setToolTip("Start the research (Enter in the question box, or Ctrl+Enter)")
        self.start_btn.clicked.connect(self.start)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setObjectName("research-cancel")
        self.cancel_btn.setToolTip("Stop at the next step (Esc). The task can be resumed later.")
        self.cancel_btn.clicked.connect(self.cancel)
        self.open_report_btn = QPushButton("Open the report")
        self.open_report_btn.setObjectName("research-open-report")
        self.open_report_btn.setToolTip("Open the report of the run that finished")
        self.open_report_btn.clicked.connect(self.open_last_report)
        self.estimate = EstimateLabel(self._service, self._ops)

        self.clarify_box = ClarifyStep()
        self.clarify_box.answered.connect(self._answers_given)
        self.clarify_continue = self.clarify_box.continue_btn
        self.plan_box = PlanStep()
        self.plan_box.accepted.connect(self._plan_accepted)
        self.plan_box.discarded.connect(self._back_to_idle)
        self.plan_editor = self.plan_box.editor
        self.plan_go = self.plan_box.go_btn

        self.status = QLabel()
        self.status.setObjectName("research-status")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.progress = RunProgressView()
        self.intro = QLabel(INTRO_HTML)
        self.intro.setObjectName("research-intro")
        self.intro.setTextFormat(Qt.TextFormat.RichText)
        self.intro.setWordWrap(True)
        self.intro.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.intro.setMargin(8)
        self._lower = QStackedWidget()  # how to begin, until a run shows its progress
        self._lower.addWidget(self.intro)
        self._lower.addWidget(self.progress)

        # The question and its Start button stay at the top, outside any scrolling; the steps
        # that need the analyst (clarifying answers, the plan) scroll above the live progress.
        form = QWidget()
        form_lay = QVBoxLayout(form)
        form_lay.setContentsMargins(0, 0, 0, 0)
        form_lay.addWidget(self.clarify_box)
        form_lay.addWidget(self.plan_box)
        form_lay.addStretch(1)
        self._scroll = QScrollArea()
        self._scroll.setWidgetResizable(True)
        self._scroll.setWidget(form)

        self._split = QSplitter(Qt.Orientation.Vertical)
        self._split.addWidget(self._scroll)
        self._split.addWidget(self._lower)
        self._split.setStretchFactor(0, 1)
        self._split.setStretchFactor(1, 1)
        self._split.setChildrenCollapsible(False)
        root = QVBoxLayout(self)
        root.addWidget(question_label)
        root.addWidget(self.question)
        root.addLayout(button_row(self.start_btn, self.cancel_btn, self.open_report_btn))
        root.addWidget(self.options)
        root.addWidget(self.estimate)
        root.addWidget(self._split, 1)
        root.addWidget(self.status)
        self._summarise_options()

        context = Qt.ShortcutContext.WidgetWithChildrenShortcut
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self, self.start, context=context)
        QShortcut(QKeySequence("Escape"), self, self.cancel, context=context)

    def _summarise_options(self) -> None:
        parts = [self.sources.summary()]
        parts += ["clarifying questions first"] * self.clarify_check.isChecked()
        parts += ["review the plan"] * self.plan_check.isChecked()
        self.options.set_summary(" · ".join(parts))

    # ------------------------------------------------------------------ public API

    @property
    def phase(self) -> str:
        """idle, clarifying, answering (waiting for the user), planning (editing), running."""
        return self._phase

    @property
    def busy(self) -> bool:
        """True while a model call of this panel is in flight."""
        return self._phase in (CLARIFYING, RUNNING)

    @property
    def last_report(self) -> Report | None:
        """The report of the run that returned last (None before one, or after New)."""
        return self._last_report

    def open_last_report(self) -> None:
        """Open the finished run's report (``report_ready`` again)."""
        if self._last_report is not None:
            self.report_ready.emit(self._last_report)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self.busy:  # the settings or the history may have changed meanwhile
            self.estimate.refresh()

    def start_new(self) -> None:
        """Clear the form and focus the question box (a running run keeps going)."""
        if not self.busy:
            self._last_report = None
            self.question.clear()
            self._back_to_idle()
            self.progress.reset()
            self._lower.setCurrentWidget(self.intro)
            self.status.setText("")
        self.question.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def resume(self, task_name: str) -> None:
        """Rerun the named task; ``core`` resumes it from its log."""
        if self.busy:
            self.status.setText("A research run is in progress. Cancel it first to resume another.")
            return
        self.status.setText(f"Opening task {task_name}…")
        gen = self._next_generation()
        self._ops.run(
            lambda _ctx: self._service.task(task_name)[0],
            label=f"Opening task {task_name}",
            on_success=lambda info: self._resume_with(info, gen),
            on_error=lambda exc: self._failed(exc, gen),
        )

    def research_conversation(self, name: str, question: str) -> None:
        """A full run on Ask conversation ``name``'s current question, inside its sources,
        starting from what it read (``Sourcebook.research_from_conversation``)."""
        if self.busy:
            self.status.setText("A research run is in progress. Cancel it first.")
            return
        self.question.setPlainText(question)
        self._request = RunRequest(question=question, boundary=Boundary(), conversation=name)
        self._run(self._request)

    def start(self) -> None:
        """Start from the form: clarify and/or plan first if asked, then research."""
        if self._phase != IDLE:
            if self._phase == PLANNING:
                self._plan_accepted()
            return
        question = " ".join(self.question.toPlainText().split())
        if len(question) < 3:
            self.status.setText("Type a question first (a few words at least).")
            self.question.setFocus()
            return
        try:
            boundary = self.sources.boundary()
        except ConfigError as exc:
            self.options.set_expanded(True)  # the choice to fix is in the folded section
            self.status.setText(f"{exc.message} {exc.hint or ''}".strip())
            return
        self._request = RunRequest(question=question, boundary=boundary)
        self.progress.reset()
        self.options.set_expanded(False)  # its summary line says what the run uses
        if self.clarify_check.isChecked():
            self._ask_clarification(self._request)
        else:
            self._after_clarification()

    def cancel(self) -> None:
        """Stop what is going on: a run stops at its next step; other steps are abandoned."""
        if self._phase == RUNNING and self._handle is not None:
            self._handle.cancel()
            self.cancel_btn.setEnabled(False)
            self.status.setText("Cancelling… the run stops at its next step.")
        elif self._phase in (CLARIFYING, ANSWERING, PLANNING):
            self._back_to_idle()
            self.status.setText("Cancelled. Nothing was researched.")

    def reload_sources(self) -> None:
        """Reload documents and collections for the source picker (in the background)."""
        svc = self._service
        self._ops.run(
            lambda _ctx: (svc.documents(include_superseded=False), svc.collections()),
            label="Loading sources",
            on_success=lambda lists: self.sources.set_items(*lists),
            on_error=lambda exc: logger.warning("could not load the sources: %s", exc),
        )

    def _library_changed(self, _changes: object) -> None:
        self.reload_sources()

    # ------------------------------------------------------------------ steps

    def _ask_clarification(self, req: RunRequest) -> None:
        self._set_phase(CLARIFYING)
        self.status.setText("Asking the model whether the question needs clarifying…")
        gen = self._generation
        svc = self._service
        self._handle = self._ops.run(
            lambda _ctx: svc.clarify(req.question, boundary=req.boundary),
            label="Clarifying the question",
            exclusive=True,
            on_success=lambda qs: self._show_questions(qs, gen),
            on_error=lambda exc: self._failed(exc, gen),
        )

    def _show_questions(self, questions: list[str], gen: int) -> None:
        if gen != self._generation:
            return
        self._handle = None
        if not questions:
            self.status.setText("No clarification needed.")
            self._after_clarification()
            return
        self.clarify_box.set_questions(questions)
        self._set_phase(ANSWERING)
        QTimer.singleShot(0, lambda: self._scroll.ensureWidgetVisible(self.clarify_continue))
        self.status.setText("Answer the questions below, then Continue.")
        fields = self.clarification_fields()
        if fields:
            fields[0].setFocus()

    def clarification_fields(self) -> list[QLineEdit]:
        """The answer fields of the clarifying questions now shown."""
        return self.clarify_box.fields()

    def _answers_given(self, answers: list[str]) -> None:
        if self._phase != ANSWERING or self._request is None:
            return
        self._request.answers = answers
        self._after_clarification()

    def _after_clarification(self) -> None:
        req = self._request
        if req is None:
            return
        if self.plan_check.isChecked():
            self._draft_plan(req)
        else:
            self._run(req)

    def _draft_plan(self, req: RunRequest) -> None:
        """Ask the planner for its plan (a model call: exclusive), then show it for editing.

        If planning fails, the analyst starts from a one-question plan and is told why."""
        gen = self._generation
        svc = self._service
        self.status.setText("Planning the research…")

        def failed(exc: BaseException) -> None:
            if gen != self._generation:
                return
            self._handle = None
            logger.warning("drafting a plan failed: %s", exc)
            self._show_plan(starter_plan(req.question, req.answers))
            self.status.setText(
                f"The planner failed ({exc}); start from this one-question plan and edit it."
            )

        def done(plan: ResearchPlan) -> None:
            if gen == self._generation:
                self._handle = None
                self._show_plan(plan)

        self._handle = self._ops.run(
            lambda _ctx: svc.plan(req.question, boundary=req.boundary, answers=req.answers),
            label="Planning the research",
            exclusive=True,
            on_success=done,
            on_error=failed,
        )

    def _show_plan(self, plan: ResearchPlan) -> None:
        self.plan_editor.set_plan(plan)
        self._set_phase(PLANNING)
        QTimer.singleShot(0, lambda: self._scroll.ensureWidgetVisible(self.plan_go))
        self.plan_editor.table.setFocus()
        self.status.setText(
            "Review the research questions; edit, add or remove them, then start the research."
        )

    def _plan_accepted(self) -> None:
        if self._phase != PLANNING or self._request is None:
            return
        try:
            plan = self.plan_editor.plan()
        except ConfigError as exc:
            self.status.setText(f"{exc.message} {exc.hint or ''}".strip())
            return
        self._request.plan = plan
        self._request.task = plan_task_name(self._request.question, plan)
        self._run(self._request)

    def _resume_with(self, info: TaskInfo, gen: int) -> None:
        if gen != self._generation or self.busy:
            return
        note = ""
        saved = info.params.get("boundary")
        if isinstance(saved, dict):
            boundary = Boundary.model_validate(saved)
        else:
            # Never widen silently: without a recorded boundary, the sources chosen here apply.
            try:
                boundary = self.sources.boundary()
            except ConfigError:
                self.question.setPlainText(info.question)
                self.status.setText(
                    "The sources of this task were not recorded. Choose its sources, then "
                    "resume it again."
                )
                return
            note = (
                " Its original choice of sources was not recorded; using the sources chosen here."
            )
        limits = info.params.get("limits")
        self.question.setPlainText(info.question)
        self.sources.set_boundary(boundary)
        self._request = RunRequest(
            question=info.question,
            boundary=boundary,
            task=info.name,
            fresh=info.status != "answered",  # a stopped run's saved report is not the answer
            limits=ResearchLimits.model_validate(limits) if isinstance(limits, dict) else None,
        )
        self._run(self._request, resuming=True, note=note)

    def _run(self, req: RunRequest, *, resuming: bool = False, note: str = "") -> None:
        self._set_phase(RUNNING)
        max_calls = (req.limits or self._service.settings.research).max_tool_calls
        self.progress.reset(max_tool_calls=max_calls)
        self._lower.setCurrentWidget(self.progress)
        self._started_at = time.time()
        what = f"Resuming {req.task}" if resuming else "Researching"
        self.status.setText(f"{what}…{note}")
        gen = self._generation
        svc = self._service
        known = self.estimate.estimate if req.limits is None else None
        self.progress.start_clock(known)
        if known is None:  # read for this run's limits (it comes while the run starts)
            self.estimate.read(req.limits, lambda est: self._run_estimate(est, gen))

        def work(ctx: OpContext) -> Report:
            token = lambda tok: ctx.progress(RunEvent(kind="token", text=tok))  # noqa: E731
            if req.conversation is not None:
                return svc.research_from_conversation(
                    req.conversation, cancel=ctx.cancel, on_event=ctx.progress, on_token=token
                )
            return svc.research(
                req.question,
                task=req.task,
                boundary=req.boundary,
                limits=req.limits,
                answers=req.answers,
                plan=req.plan,
                fresh=req.fresh,
                cancel=ctx.cancel,
                on_event=ctx.progress,
                on_token=token,
            )

        self._handle = self._ops.run(
            work,
            label=f"Research: {req.question[:60]}",
            exclusive=True,
            allow_beside=True,  # an Ask may share the model meanwhile
            on_progress=lambda ev: self._on_event(ev, gen),
            on_success=lambda report: self._finished(report, gen),
            on_error=lambda exc: self._failed(exc, gen),
        )

    def _run_estimate(self, estimate: RunEstimate, gen: int) -> None:
        if gen == self._generation and self._phase == RUNNING:
            self.progress.set_estimate(estimate)

    def _on_event(self, event: object, gen: int) -> None:
        if gen == self._generation and isinstance(event, RunEvent):
            self.progress.apply(event)
            self.run_event.emit(event)

    def _finished(self, report: Report, gen: int) -> None:
        if gen != self._generation:
            return
        self._handle = None
        self._last_report = report
        self.progress.stop_clock()
        self._set_phase(IDLE)
        self.estimate.refresh()  # this run is history now
        lines = [status_text(report.status)]
        if report.created_at.timestamp() < self._started_at - 1:
            when = report.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
            lines.append(f"This question was researched before ({when}); the saved report opens.")
        lines += report.status_reasons[:3]
        self.status.setText(" ".join(lines))
        self.progress.set_detail(f"Done: {status_text(report.status)}")
        logger.info("research task %s finished: %s", report.task, report.status)
        self.report_ready.emit(report)

    def _failed(self, exc: BaseException, gen: int) -> None:
        if gen != self._generation:
            logger.info("an abandoned research step failed: %s", exc)
            return
        self._handle = None
        self.progress.stop_clock()
        self._set_phase(IDLE)
        what = exc.message if isinstance(exc, SourcebookError) else str(exc)
        self.status.setText(f"Stopped: {what}")
        show_error(self, exc)

    # ------------------------------------------------------------------ state

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    def _back_to_idle(self) -> None:
        self._next_generation()
        self._handle = None
        self._set_phase(IDLE)

    def _set_phase(self, phase: str) -> None:
        entering = phase != self._phase
        self._phase = phase
        self._sync()
        if entering and phase in (ANSWERING, PLANNING):
            # Room where the analyst's attention goes: the answers or the plan to edit (the
            # live progress gets the whole pane while the run goes: the form is hidden).
            self._scroll.verticalScrollBar().setValue(0)
            total = max(2, sum(self._split.sizes()))
            self._split.setSizes([total * 3 // 4, total - total * 3 // 4])

    def _sync(self) -> None:
        idle = self._phase == IDLE
        self.start_btn.setEnabled(idle)
        self.cancel_btn.setEnabled(not idle)
        self.open_report_btn.setVisible(idle and self._last_report is not None)
        self.estimate.setVisible(self._phase != RUNNING)  # the run's clock says it then
        for w in (self.question, self.sources, self.clarify_check, self.plan_check):
            w.setEnabled(idle)
        self.clarify_box.setVisible(self._phase == ANSWERING)
        self.plan_box.setVisible(self._phase == PLANNING)
        asking = self._phase in (ANSWERING, PLANNING)
        self._scroll.setVisible(asking)
        # The how-to-begin gives the answers or the plan its room; a run's progress stays.
        self._lower.setVisible(not asking or self._lower.currentWidget() is not self.intro)
