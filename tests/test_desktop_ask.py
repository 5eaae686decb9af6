"""The Ask panel with a scripted model on a real library (pytest-qt): Enter asks, the answer
streams in, the checked answer's citations open the evidence viewer, a follow-up continues the
conversation, History reopens it, and "Research this" hands it to the research panel."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

from typing import Any

import pytest
from ask_fixtures import PassageLLM
from desktop_research_fixtures import (
    MakeService,
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
)
from PySide6.QtCore import Qt
from research_fixtures import pid_with, plan, worker_script

from core.service import Report, Sourcebook
from desktop import errors as desktop_errors
from desktop.ask_panel import AskPanel
from desktop.main_window import MainWindow
from desktop.operations import Operations
from models.scripted import ScriptedLLM

TIMEOUT = 60_000
FOUNDED = "When was the Northport Harbor Authority founded?"
FOUNDED_ANSWER = "1921 [{founded in 1921}]\nThe Authority was founded in 1921 [{founded in 1921}]."


@pytest.fixture(autouse=True)
def _errors_collected(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    seen: list[BaseException] = []
    monkeypatch.setattr(desktop_errors, "error_hook", lambda _parent, exc: seen.append(exc))
    return seen


def _panel(qtbot: Any, svc: Sourcebook, ops: Operations) -> AskPanel:
    panel = AskPanel(svc, ops)
    qtbot.addWidget(panel)
    panel.resize(800, 700)
    panel.show()
    qtbot.waitUntil(lambda: panel.sources._documents.childCount() == 3, timeout=TIMEOUT)
    return panel


def test_enter_asks_streams_and_a_follow_up_continues(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    writer = PassageLLM([FOUNDED_ANSWER, "In 1887 [{opened in 1887}]"])
    writer._token_delay_s = 0.01  # tokens arrive one by one, as from a model
    svc = make_service(writer=writer)
    panel = _panel(qtbot, svc, ops)
    assert not panel.follow_up.isEnabled() and not panel.research_btn.isEnabled()
    streamed: list[str] = []
    qtbot.keyClicks(panel.question, FOUNDED)
    with qtbot.waitSignal(panel.answered, timeout=TIMEOUT) as done:
        qtbot.keyClick(panel.question, Qt.Key.Key_Return)  # Enter asks
        assert panel.busy and panel.cancel_btn.isEnabled() and not panel.question.isEnabled()
        qtbot.waitUntil(lambda: "1921" in panel.streamed.toPlainText(), timeout=TIMEOUT)
        streamed.append(panel.streamed.toPlainText())
    report: Report = done.args[0]
    assert report.status == "answered", report.status_reasons
    # the model's words as they came, before they were checked (labels and all)
    whole = panel.streamed.toPlainText()
    assert whole.startswith("1921 [E") and len(streamed[0]) < len(whole)
    # the checked answer, with its citation, in a report view like the Report tab's
    assert panel.answer.current_report() == report
    assert ("[1]", "cite:0") in panel.answer.citation_links()
    assert panel.answer.sources.topLevelItemCount() == 1
    with qtbot.waitSignal(panel.citation_activated) as cited:
        panel.answer.activate_citation(0)
    assert cited.args[0].evidence_id == pid_with(svc, "founded in 1921")
    # a follow-up in the same conversation
    name = panel.conversation
    assert name and panel.follow_up.isEnabled() and panel.follow_up.hasFocus()
    qtbot.keyClicks(panel.follow_up, "When did the Eastline railway open?")
    with qtbot.waitSignal(panel.answered, timeout=TIMEOUT) as done:
        qtbot.keyClick(panel.follow_up, Qt.Key.Key_Return)
    second: Report = done.args[0]
    assert second.task == f"{name}/turn-2" and second.markdown.startswith("**Answer:** In 1887")
    assert [t.question for t in svc.conversation(name).turns][1].startswith("When did the")
    assert not _errors_collected


def test_history_reopens_a_conversation_and_research_this_runs_it(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    q = "How many ships did the Northport harbor handle in 2019?"
    planner, researcher = ScriptedLLM(), ScriptedLLM()
    writer = PassageLLM(["4,200 ships [{4,200 ships}]"])
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    window = MainWindow(svc, ops)
    qtbot.addWidget(window)
    window.show()
    window.leave_first_run()
    assert window.centre.indexOf(window.ask_panel) >= 0  # a centre tab of its own
    panel = window.ask_panel
    qtbot.waitUntil(lambda: panel.sources._documents.childCount() == 3, timeout=TIMEOUT)
    panel.question.setText(q)
    with qtbot.waitSignal(panel.answered, timeout=TIMEOUT):
        panel.ask()
    name = panel.conversation
    assert name is not None
    # a citation opens the evidence viewer, as the Report tab's do
    panel.answer.activate_citation(0)
    qtbot.waitUntil(lambda: window.viewer.evidence_id == ships, timeout=TIMEOUT)
    # History lists the conversation (not its turns) and reopens it in the Ask panel
    qtbot.waitUntil(lambda: name in {t.name for t in window.history_panel.tasks()}, timeout=TIMEOUT)
    assert not any("/turn-" in t.name for t in window.history_panel.tasks())
    panel.start_new()
    assert panel.conversation is None and panel.answer.current_report() is None
    window.resume_task(name)
    qtbot.waitUntil(lambda: panel.conversation == name, timeout=TIMEOUT)
    assert window.centre.currentWidget() is panel
    assert panel.answer.current_report() is not None and panel.research_btn.isEnabled()
    # Research this: the research panel runs the conversation's question from what it read
    planner.enqueue([plan(("q1", q, []))])
    researcher.enqueue(worker_script(q, ships, "4,200 ships in 2019."))
    writer.enqueue(["The harbor handled 4,200 ships in 2019 [E1]."])
    with qtbot.waitSignal(window.research_panel.report_ready, timeout=TIMEOUT) as ready:
        qtbot.mouseClick(panel.research_btn, Qt.MouseButton.LeftButton)
        assert window.centre.currentWidget() is window.research_panel
    report: Report = ready.args[0]
    assert report.task == f"{name}/research-1" and report.question == q
    assert report.status == "answered", report.status_reasons
    assert any(n.query_id == "conversation" and ships in n.fetched_ids for n in report.notes)
    assert not _errors_collected
