"""What the analyst sees while a research run goes (issue #26, part 3), with scripted models on
a real library (pytest-qt): the estimate before Start, elapsed and remaining while it runs,
reading and asking while it runs, and the finish shown where the analyst is."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import threading
from collections.abc import Sequence
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

from core.research.estimate import StageEstimate
from core.service import RunEstimate, RunEvent
from desktop import errors as desktop_errors
from desktop.main_window import MainWindow
from desktop.operations import OpContext, Operations
from desktop.research_panel import ResearchPanel
from desktop.run_progress import RunProgressView
from models.llm import ChatMessage
from models.scripted import ScriptedLLM

TIMEOUT = 30_000
SHIPS_Q = "How many ships did the Northport harbor handle in 2019?"
BUSY_Q = "How busy was the Northport harbor in 2019, in ships?"  # a task of its own


@pytest.fixture(autouse=True)
def _errors_collected(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    seen: list[BaseException] = []
    monkeypatch.setattr(desktop_errors, "error_hook", lambda _parent, exc: seen.append(exc))
    return seen


class HeldLLM(ScriptedLLM):
    """A scripted researcher whose first call waits until the test lets it go: the run stays
    in its research stage meanwhile, as a run on a slow model does."""

    def __init__(self, answers: Sequence[Any], name: str) -> None:
        super().__init__(answers, name=name)
        self.entered = threading.Event()
        self.release = threading.Event()

    def complete_json(self, messages: Sequence[ChatMessage], schema_model: Any, **kw: Any) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(TIMEOUT / 1000), "the test never let the run go on"
        return super().complete_json(messages, schema_model, **kw)


def _est(**stages: float) -> RunEstimate:
    return RunEstimate(
        match="same_limits",
        runs=2,
        models="m",
        stages=[StageEstimate(stage=k, seconds=v, runs=2) for k, v in stages.items()],
    )


def test_progress_view_ticks_elapsed_and_remaining(qtbot: Any) -> None:
    view = RunProgressView()
    qtbot.addWidget(view)
    now = [50.0]
    view.start_clock(None, now=lambda: now[0])
    assert view._ticker.isActive() and view.clock_text == "0:00 elapsed"
    view.set_estimate(_est(planning=30, research=90, writing=60))  # it comes in the background
    assert view.clock_label.toolTip().startswith("estimate: about 3 min")
    view.apply(RunEvent(kind="stage", stage="planning"))
    now[0] = 60
    qtbot.waitUntil(lambda: view.clock_text.startswith("planning 0:10"), timeout=3000)  # ticks
    assert view.clock_text == "planning 0:10 of about 30 s · 0:10 elapsed · about 3 min left"
    view.apply(RunEvent(kind="stage", stage="research", text="1 queries"))
    now[0] = 100
    view.apply(RunEvent(kind="worker", worker="q1", text="researching: ships"))
    view._show_clock()
    assert view.clock_text == "research 0:40 of about 1 min 30 s · 0:50 elapsed · about 2 min left"
    now[0] = 130
    view.stop_clock()
    assert not view._ticker.isActive() and view.clock_text == "1:20 in all"
    # without an earlier run there is no estimate, and the view says so
    view.reset()
    view.start_clock(RunEstimate(match="none"), now=lambda: now[0])
    assert view.clock_text.endswith("no estimate yet (no earlier run here with this model)")


def test_estimate_shown_before_start_and_clock_while_running(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    planner = ScriptedLLM(name="time-planner")
    researcher = ScriptedLLM(name="time-researcher")
    writer = ScriptedLLM(name="time-writer", token_delay_s=0.05)
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    panel = ResearchPanel(svc, ops)
    qtbot.addWidget(panel)
    panel.resize(900, 800)
    panel.show()
    qtbot.waitUntil(lambda: panel.estimate.estimate is not None, timeout=TIMEOUT)
    assert panel.estimate.isVisible()
    assert panel.estimate.text() == (
        "No estimate yet: no earlier run on this machine with this model."
    )
    qtbot.waitUntil(lambda: panel.sources._documents.childCount() == 3, timeout=TIMEOUT)

    def run(question: str) -> None:
        planner.enqueue([plan(("q1", question, []))])
        researcher.enqueue(worker_script(question, ships, "4,200 ships in 2019."))
        writer.enqueue(["The harbor " * 30 + "handled 4,200 ships in 2019 [E1]."])
        panel.question.setPlainText(question)
        with qtbot.waitSignal(panel.report_ready, timeout=TIMEOUT) as ready:
            qtbot.mouseClick(panel.start_btn, Qt.MouseButton.LeftButton)
            assert not panel.estimate.isVisible()  # the run's clock says it now
            qtbot.waitUntil(lambda: "writing" in panel.progress.clock_text, timeout=TIMEOUT)
            during.append(panel.progress.clock_text)
        assert ready.args[0].status == "answered", ready.args[0].status_reasons

    during: list[str] = []
    run(SHIPS_Q)
    assert "elapsed" in during[0] and "no estimate yet" in during[0]
    assert panel.progress.clock_text.endswith("in all")
    # the run is history now: the next one has an estimate, before Start and while it runs
    qtbot.waitUntil(
        lambda: panel.estimate.text().startswith("Estimated time: about"), timeout=TIMEOUT
    )
    assert "the median of 1 earlier run here with time-planner" in panel.estimate.text()
    assert "research" in panel.estimate.toolTip()  # the stages, on hover
    run("How many ships came to Northport harbor in the year 2019?")
    assert during[1].startswith("writing 0:0") and " of about " in during[1]
    assert during[1].endswith(" left") or "longer than usual" in during[1]
    assert panel.progress.clock_label.toolTip().startswith("estimate: about")
    assert not _errors_collected


def test_reading_and_asking_while_a_run_goes_and_the_finish_is_shown(
    qtbot: Any, make_service: MakeService, ops: Operations, _errors_collected: list[Any]
) -> None:
    planner = ScriptedLLM(name="bg-planner")
    writer = PassageLLM(
        [
            "1921 [{founded in 1921}]\nThe Authority was founded in 1921 [{founded in 1921}].",
            "Northport handled 4,200 ships in 2019 [E1].",
        ]
    )
    researcher = HeldLLM([], "bg-researcher")
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    researcher.enqueue(worker_script(BUSY_Q, ships, "4,200 ships in 2019."))
    planner.enqueue([plan(("q1", BUSY_Q, []))])
    window = MainWindow(svc, ops)
    qtbot.addWidget(window)
    window.show()
    window.leave_first_run()
    research, ask = window.research_panel, window.ask_panel
    qtbot.waitUntil(lambda: research.sources._documents.childCount() == 3, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: ask.sources._documents.childCount() == 3, timeout=TIMEOUT)
    finished: list[Any] = []
    research.report_ready.connect(finished.append)
    research.question.setPlainText(BUSY_Q)
    research.start()
    qtbot.waitUntil(lambda: researcher.entered.is_set() or bool(finished), timeout=TIMEOUT)
    assert not finished, (finished[0].status, finished[0].status_reasons, _errors_collected)
    try:
        # reading: a library search and a passage in the evidence viewer
        window.library_panel.search_box.setText("railway opened")
        window.library_panel.run_search()
        qtbot.waitUntil(lambda: window.library_panel._searching is None, timeout=TIMEOUT)
        window.show_evidence(ships)
        qtbot.waitUntil(lambda: window.viewer.evidence_id == ships, timeout=TIMEOUT)
        # asking: answered while the run still waits on its model call
        window.centre.setCurrentWidget(ask)
        ask.question.setText("When was the Northport Harbor Authority founded?")
        with qtbot.waitSignal(ask.answered, timeout=TIMEOUT) as answered:
            ask.ask()
        assert answered.args[0].status == "answered", answered.args[0].status_reasons
        assert research.busy and not finished
        assert research.progress.stage == "research"
    finally:
        researcher.release.set()
    qtbot.waitUntil(lambda: bool(finished), timeout=TIMEOUT)
    assert finished[0].status == "answered", finished[0].status_reasons
    # the analyst stays where they are; the window says the run finished and where to open it
    assert window.centre.currentWidget() is ask
    i = window.centre.indexOf(research)
    assert window.centre.tabText(i) == "&Research ●"
    assert window.statusBar().currentMessage() == (
        "Research finished: answered — open the report from the Research tab"
    )
    window.centre.setCurrentWidget(research)
    assert window.centre.tabText(i) == "&Research" and not window.statusBar().currentMessage()
    assert research.open_report_btn.isVisible()
    qtbot.mouseClick(research.open_report_btn, Qt.MouseButton.LeftButton)
    assert window.centre.currentWidget() is window.report_view
    assert window.report_view.current_report() == finished[0]
    assert not _errors_collected


def test_beside_work_shares_a_run_but_not_other_exclusive_work(qtbot: Any, ops: Operations) -> None:
    """An Ask (beside) runs during a run that allows it; a settings save (exclusive) never
    overlaps an Ask, whichever starts first."""
    run_go, ask_in, save_go = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def long_run(_ctx: OpContext) -> None:
        assert run_go.wait(10)
        order.append("run done")

    def an_ask(_ctx: OpContext) -> None:
        ask_in.set()
        assert save_go.wait(10)
        order.append("ask done")

    def a_save(_ctx: OpContext) -> None:
        order.append("save")

    ops.run(long_run, label="run", exclusive=True, allow_beside=True)
    ops.run(an_ask, label="ask", beside=True)
    assert ask_in.wait(10)  # the Ask started while the run goes
    run_go.set()
    ops.run(a_save, label="save", exclusive=True)  # waits for the Ask, though the run is done
    qtbot.waitUntil(lambda: order == ["run done"], timeout=5000)
    qtbot.wait(100)
    assert order == ["run done"]
    save_go.set()
    qtbot.waitUntil(lambda: len(order) == 3, timeout=5000)
    assert order == ["run done", "ask done", "save"]
