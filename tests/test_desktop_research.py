"""The research panel and history with scripted models on a real library (pytest-qt).

Every run goes through the panel's own path: ``Operations`` (exclusive pool) -> the facade's
``research`` with the service's role models -> events and tokens back on the UI thread.
"""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from desktop_research_fixtures import (
    MakeService,
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
)
from PySide6.QtCore import Qt
from research_fixtures import pid_with, plan, worker_script

from core.errors import TaskBusyError
from core.research import task_name
from core.service import Boundary, Report, RunEvent, Sourcebook
from desktop import errors as desktop_errors
from desktop.history_panel import HistoryPanel
from desktop.operations import Operations
from desktop.research_inputs import SourcePicker, starter_plan
from desktop.research_panel import ResearchPanel
from models.errors import ModelBackendError
from models.scripted import ScriptedLLM

RUN_TIMEOUT = 60_000


@pytest.fixture(autouse=True)
def _errors_collected(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Error dialogs are collected instead of opened; a test fails on an unexpected one."""
    seen: list[BaseException] = []
    monkeypatch.setattr(desktop_errors, "error_hook", lambda _parent, exc: seen.append(exc))
    return seen


def _panel(qtbot: Any, svc: Sourcebook, ops: Operations) -> ResearchPanel:
    panel = ResearchPanel(svc, ops)
    qtbot.addWidget(panel)
    panel.resize(900, 800)
    panel.show()
    # the source picker is filled in the background
    qtbot.waitUntil(lambda: panel.sources._documents.childCount() == 3, timeout=RUN_TIMEOUT)
    return panel


def _ask(qtbot: Any, panel: ResearchPanel, question: str) -> None:
    panel.question.setPlainText(question)
    qtbot.mouseClick(panel.start_btn, Qt.MouseButton.LeftButton)


def test_run_shows_stages_workers_draft_and_report(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    planner, researcher = ScriptedLLM(), ScriptedLLM()
    writer = ScriptedLLM(token_delay_s=0.01)
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    q = "How many ships did the Northport harbor handle in 2019?"
    planner.enqueue([plan(("q1", q, []))])
    researcher.enqueue(worker_script(q, ships, "4,200 ships in 2019."))
    answer = "Northport harbor handled 4,200 ships in 2019 [E1]."
    writer.enqueue([answer])
    panel = _panel(qtbot, svc, ops)
    seen: list[RunEvent] = []
    panel.run_event.connect(seen.append)

    with qtbot.waitSignal(panel.report_ready, timeout=RUN_TIMEOUT) as ready:
        _ask(qtbot, panel, q)
        assert panel.busy and not panel.start_btn.isEnabled() and panel.cancel_btn.isEnabled()
    report: Report = ready.args[0]

    assert report.status == "answered", report.status_reasons
    stages = [e.stage for e in seen if e.kind == "stage"]
    assert stages[:2] == ["planning", "research"] and stages[-1] == "done"
    assert stages.index("writing") < stages.index("checking citations")
    assert {
        "planning",
        "research",
        "writing",
        "checking citations",
        "done",
    } <= panel.progress.reached
    rows = panel.progress.worker_rows()
    assert list(rows) == ["q1"]
    question_shown, calls, now = rows["q1"]
    assert question_shown == q
    assert calls.endswith("20")  # the tool-call limit from settings
    assert now.startswith("finished") and "1 finding" in now
    # the writer's output streamed in token by token, then the verified report was emitted
    tokens = [e.text for e in seen if e.kind == "token"]
    assert len(tokens) > 3 and "".join(tokens) == answer
    assert panel.progress.draft.toPlainText() == answer
    assert "Answered" in panel.status.text()
    assert not panel.busy and panel.start_btn.isEnabled() and not panel.cancel_btn.isEnabled()
    assert not _errors_collected


def test_cancel_shows_cancelled_and_panel_is_usable_again(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    planner, researcher = ScriptedLLM(), ScriptedLLM()
    writer = ScriptedLLM(token_delay_s=0.05)
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    q = "Northport harbor ships handled, long answer please"
    planner.enqueue([plan(("q1", q, []))])
    researcher.enqueue(worker_script(q, ships, "4,200 ships in 2019."))
    writer.enqueue(["The harbor was busy. " * 200 + "It handled 4,200 ships [E1]."])
    panel = _panel(qtbot, svc, ops)

    _ask(qtbot, panel, q)
    qtbot.waitUntil(lambda: panel.progress.draft.toPlainText() != "", timeout=RUN_TIMEOUT)
    with qtbot.waitSignal(panel.report_ready, timeout=RUN_TIMEOUT) as ready:
        qtbot.mouseClick(panel.cancel_btn, Qt.MouseButton.LeftButton)
        assert "Cancelling" in panel.status.text()
    report: Report = ready.args[0]

    assert report.status == "cancelled"
    assert "Cancelled" in panel.status.text() and "Resume" in panel.status.text()
    assert svc.task(report.task)[0].status == "cancelled"
    # usable again: the form is enabled and a new question can be typed and started
    assert panel.phase == "idle" and panel.start_btn.isEnabled() and panel.question.isEnabled()
    assert not panel.cancel_btn.isEnabled()
    panel.start_new()
    assert panel.question.toPlainText() == "" and panel.progress.worker_rows() == {}
    assert not _errors_collected


def test_interrupted_task_resumes_from_history(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    planner, researcher = ScriptedLLM(), ScriptedLLM()
    writer = ScriptedLLM([ModelBackendError("The model process stopped.")])
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    park = pid_with(svc, "Ellen Park")
    q = "Who founded the Northport Harbor Authority?"
    planner.enqueue([plan(("q1", q, []))])
    researcher.enqueue(worker_script(q, park, "Founded in 1921 by Mayor Ellen Park."))
    panel = _panel(qtbot, svc, ops)
    with qtbot.waitSignal(panel.report_ready, timeout=RUN_TIMEOUT) as first:
        _ask(qtbot, panel, q)
    stopped: Report = first.args[0]
    assert stopped.status == "partial" and "stopped" in " ".join(stopped.status_reasons)
    researcher_calls = len(researcher.history)

    history = HistoryPanel(svc, ops)
    qtbot.addWidget(history)
    history.show()
    history.resume_task.connect(panel.resume)
    history.refresh()
    qtbot.waitUntil(lambda: history.select_task(stopped.task), timeout=RUN_TIMEOUT)
    # a partial report is resumable only when a failure stopped the run: the record tells
    qtbot.waitUntil(history.resume_btn.isEnabled, timeout=RUN_TIMEOUT)
    row = history.tree.currentItem()
    assert row is not None and row.text(0) == q and "can resume" in row.text(1)
    assert "The run stopped" in history.details.text()

    writer.enqueue(["Mayor Ellen Park founded the Northport Harbor Authority in 1921 [E1]."])
    with qtbot.waitSignal(panel.report_ready, timeout=RUN_TIMEOUT) as second:
        qtbot.mouseClick(history.resume_btn, Qt.MouseButton.LeftButton)
    resumed: Report = second.args[0]
    assert resumed.task == stopped.task
    assert resumed.status == "answered", resumed.status_reasons
    assert [c.evidence_id for c in resumed.citations] == [park]
    # the completed steps came from the task log: no planner or researcher call was repeated
    assert len(planner.history) == 1 and len(researcher.history) == researcher_calls
    assert svc.task(stopped.task)[0].runs == 2
    history.refresh()

    def answered_row() -> bool:
        item = history.tree.currentItem() if history.select_task(stopped.task) else None
        return item is not None and "Answered" in item.text(1)

    qtbot.waitUntil(answered_row, timeout=RUN_TIMEOUT)
    assert history.open_btn.isEnabled() and not history.resume_btn.isEnabled()
    with qtbot.waitSignal(history.open_report) as opened:
        qtbot.mouseClick(history.open_btn, Qt.MouseButton.LeftButton)
    assert opened.args == [stopped.task]
    assert not _errors_collected


def test_clarify_then_edited_plan_drives_the_run(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    q = "How busy are Northport's harbor and railway?"
    planner = ScriptedLLM([plan(("q1", q, []))])  # the draft the analyst then edits
    researcher, writer = ScriptedLLM(), ScriptedLLM()
    clarifier = ScriptedLLM([{"questions": ["Which year do you mean?"]}])
    svc = make_service(planner=planner, researcher=researcher, writer=writer, clarifier=clarifier)
    ships = pid_with(svc, "4,200 ships")
    rail = pid_with(svc, "30,000 passengers")
    panel = _panel(qtbot, svc, ops)
    panel.clarify_check.setChecked(True)
    panel.plan_check.setChecked(True)

    _ask(qtbot, panel, q)
    qtbot.waitUntil(lambda: len(panel.clarification_fields()) == 1, timeout=RUN_TIMEOUT)
    assert panel.phase == "answering" and panel.clarify_box.isVisible()
    panel.clarification_fields()[0].setText("2019")
    qtbot.mouseClick(panel.clarify_continue, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: panel.phase == "planning", timeout=RUN_TIMEOUT)
    assert panel.plan_box.isVisible()
    editor = panel.plan_editor
    cell = editor.table.item(0, 1)
    assert editor.table.rowCount() == 1 and cell is not None and cell.text() == q
    # the planner drafted the plan, and the clarification answer reached its prompt
    assert len(planner.history) == 1
    assert "2019" in " ".join(m.content for m in planner.history[0].messages)
    cell.setText("Northport harbor ships handled in 2019")
    editor.add_query("Eastline railway passengers per day", "rail traffic")
    assert editor.plan().queries[1].id == "q2"

    researcher.enqueue(
        worker_script("", ships, "4,200 ships in 2019.")
        + worker_script("", rail, "About 30,000 passengers a day.")
    )
    writer.enqueue(["The harbor handled 4,200 ships in 2019 [E1]; trains carry 30,000 a day [E2]."])
    with qtbot.waitSignal(panel.report_ready, timeout=RUN_TIMEOUT) as ready:
        qtbot.mouseClick(panel.plan_go, Qt.MouseButton.LeftButton)
    report: Report = ready.args[0]

    assert len(planner.history) == 1  # the edited plan was run as it is: no second planning
    assert report.plan is not None
    assert [x.query for x in report.plan.queries] == [
        "Northport harbor ships handled in 2019",
        "Eastline railway passengers per day",
    ]
    assert set(panel.progress.worker_rows()) == {"q1", "q2"}
    assert {c.evidence_id for c in report.citations} == {ships, rail}
    assert report.status in ("answered", "partial"), report.status_reasons
    assert "-plan-" in report.task
    assert not _errors_collected


def test_source_picker_boundary_and_web_switch(
    qtbot: Any, make_service: MakeService, ops: Operations
) -> None:
    panel = _panel(qtbot, make_service(), ops)
    picker = panel.sources
    assert not picker.isVisible()  # folded away under "Sources and options" until asked for
    panel.options.set_expanded(True)
    assert picker.boundary() == Boundary()
    assert not picker.web.isEnabled() and picker.web_note.isVisible()
    assert "Settings" in picker.web_note.text()
    # "only ticked" with nothing ticked explains what to do instead of running
    picker.some_radio.setChecked(True)
    _ask(qtbot, panel, "Anything about ports?")
    assert "No sources are ticked" in panel.status.text() and panel.phase == "idle"
    picker.set_boundary(Boundary(collections=("ports",)))
    assert picker.boundary() == Boundary(collections=("ports",))

    web_on = SourcePicker(web_enabled=True)
    qtbot.addWidget(web_on)
    web_on.show()
    assert web_on.web.isEnabled() and not web_on.web_note.isVisible()
    web_on.web.setChecked(True)
    assert web_on.boundary() == Boundary(web=True)


def test_worker_rows_show_tool_calls_and_steps(qtbot: Any) -> None:
    """Worker events as core words them; tool-call counts get their own column."""
    from desktop.run_progress import RunProgressView

    view = RunProgressView()
    qtbot.addWidget(view)
    view.reset(max_tool_calls=20)
    view.apply(RunEvent(kind="stage", stage="research", text="2 queries"))
    view.apply(RunEvent(kind="worker", worker="q1", text="researching: Northport ships"))
    view.apply(RunEvent(kind="worker", worker="q2", text="reused from the earlier run"))
    assert view.worker_rows()["q1"] == ("Northport ships", "limit 20", "searching the library")
    view.apply(
        RunEvent(kind="worker", worker="q1", text="step 2: fetch_evidence — 3/20 tool calls")
    )
    assert view.worker_rows()["q1"][1:] == ("3 of 20", "step 2: fetch_evidence — 3/20 tool calls")
    view.apply(RunEvent(kind="worker", worker="q1", text="done (max_tool_calls), 0 finding(s)"))
    assert view.worker_rows()["q1"][2] == "stopped: tool-call limit reached; 0 finding(s)"
    assert view.worker_rows()["q2"][2] == "reused from the earlier run"
    view.apply(RunEvent(kind="stage", stage="follow-up", text="round 2: 1 queries"))
    assert view.stage == "research" and "Follow-up" in view.detail.text()
    view.apply(RunEvent(kind="stage", stage="writing"))
    view.apply(RunEvent(kind="token", text="Draft "))
    view.apply(RunEvent(kind="token", text="text"))
    assert view.draft.toPlainText() == "Draft text" and view.stage == "writing"
    assert view.reached == {"research", "writing"}


SAMPLES = Path(__file__).resolve().parent.parent / "resources" / "samples"


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_real_model_run_in_the_panel(
    qtbot: Any, tmp_path: Path, embedder: Any, fast_model_path: Path, ops: Operations
) -> None:
    """The 0.5B starter model answers in the panel on a real PDF and a report is shown."""
    from desktop.report_view import ReportView
    from models.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(fast_model_path, n_ctx=4096, n_threads=2, seed=7)
    svc = Sourcebook(tmp_path / "home", embedder=embedder, llms={"default": llm})
    try:
        assert not svc.add([SAMPLES / "20080102X00005.pdf"]).failed
        panel = ResearchPanel(svc, ops)
        view = ReportView()
        panel.report_ready.connect(view.show_report)
        qtbot.addWidget(panel)
        qtbot.addWidget(view)
        panel.show()
        panel.plan_check.setChecked(True)  # a short plan keeps the run within minutes on 2 cores
        research = svc.settings.research
        research.max_rounds, research.max_workers = 1, 1
        research.max_tool_calls, research.max_steps = 3, 4
        _ask(qtbot, panel, "Where did the accident of the aircraft N74SR happen?")
        qtbot.waitUntil(lambda: panel.phase == "planning", timeout=300_000)
        assert panel.plan_editor.table.rowCount() >= 1  # the real planner's draft
        # keep one query, as an analyst trimming the plan would
        panel.plan_editor.set_plan(
            starter_plan("Where did the accident of the aircraft N74SR happen?", [])
        )
        cell = panel.plan_editor.table.item(0, 1)
        assert cell is not None
        cell.setText("accident location of aircraft N74SR")
        with qtbot.waitSignal(panel.report_ready, timeout=900_000) as ready:
            qtbot.mouseClick(panel.plan_go, Qt.MouseButton.LeftButton)
        report: Report = ready.args[0]
        # what the pipeline guarantees on any build (tests/test_research_real.py says more):
        # the run read passages, and each citation it kept is a link in the view
        assert any(n.fetched_ids for n in report.notes), report.status_reasons
        assert report.citations or report.status == "insufficient_evidence"
        assert view.current_report() is report
        links = [href for _text, href in view.citation_links() if href.startswith("cite:")]
        assert len(set(links)) == len(report.citations)
        assert "research" in panel.progress.reached and panel.progress.worker_rows()
    finally:
        ops.cancel_all()
        ops.wait(60_000)
        svc.close()
        llm.close()


def test_a_task_run_by_another_process_is_refused_in_the_error_dialog(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    svc = make_service()
    q = "When did the Eastline railway open?"
    log = svc.task_log()
    lease = log.acquire(task_name(q))  # as another runner of the same task would hold it
    try:
        panel = _panel(qtbot, svc, ops)
        _ask(qtbot, panel, q)
        qtbot.waitUntil(lambda: bool(_errors_collected), timeout=RUN_TIMEOUT)
    finally:
        lease.release()
        log.close()
    [exc] = _errors_collected
    assert isinstance(exc, TaskBusyError) and exc.pid == os.getpid()
    assert "is being run by process" in panel.status.text()
    assert panel.start_btn.isEnabled()  # the panel is idle again, the run can be retried
