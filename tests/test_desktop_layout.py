"""The window on a laptop screen: the question and Start always on screen (options folded or
not), Enter starts a run, pane sizes survive a restart, and the first screen says how to begin."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pytestqt")

from desktop_research_fixtures import (
    MakeService,
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
)
from PySide6.QtCore import QPoint, QRect, QSettings, Qt
from PySide6.QtWidgets import QWidget
from research_fixtures import pid_with, plan, worker_script

from core.service import Report, Sourcebook
from desktop.main_window import MainWindow, pane_sizes
from desktop.operations import Operations
from desktop.pane_memory import FILE_NAME
from desktop.research_panel import ResearchPanel
from models.scripted import ScriptedLLM

TIMEOUT = 30_000
LAPTOP = (1366, 768)


def _window(qtbot: Any, service: Sourcebook, ops: Operations, size: tuple[int, int]) -> MainWindow:
    window = MainWindow(service, ops)
    qtbot.addWidget(window)
    window.leave_first_run()
    # a normal (not maximized) window of exactly this size, whatever the test screen is
    window.setWindowState(Qt.WindowState.WindowNoState)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: not window.ops.running, timeout=TIMEOUT)
    return window


def _on_screen(widget: QWidget, window: QWidget) -> bool:
    """Shown, inside the window, and not clipped by any parent (a scroll area, a splitter)."""
    if not widget.isVisible():
        return False
    rect = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
    return window.rect().contains(rect) and widget.visibleRegion().boundingRect() == widget.rect()


def test_question_and_start_stay_on_screen_at_laptop_size(
    qtbot: Any, app: Sourcebook, ops: Operations
) -> None:
    window = _window(qtbot, app, ops, LAPTOP)
    assert window.size().width() == LAPTOP[0] and window.size().height() == LAPTOP[1]
    panel = window.research_panel
    assert window.centre.currentWidget() is panel  # the first screen is the research form
    # how to begin is on the first screen, where the run's progress will show
    assert _on_screen(panel.intro, window) and "press <b>Enter</b>" in panel.intro.text()

    assert not panel.options.expanded and not panel.sources.isVisible()
    assert "whole library" in panel.options.toggle.text()
    for widget in (panel.question, panel.start_btn, panel.options.toggle):
        assert _on_screen(widget, window), widget.objectName()

    panel.options.toggle.click()  # unfold the sources and options
    qtbot.waitUntil(lambda: panel.sources.isVisible())
    for widget in (panel.question, panel.start_btn, panel.sources, panel.plan_check):
        assert _on_screen(widget, window), widget.objectName()
    panel.plan_check.setChecked(True)
    assert "review the plan" in panel.options.toggle.text()

    # the three panes share the width: the report's column keeps a reading width
    library, centre, evidence = window.splitter.sizes()
    assert centre >= 520 and library >= 240 and evidence >= 420
    assert pane_sizes(1366)[1] >= 560 and pane_sizes(1920) == [400, 829, 691]


def test_report_tab_says_how_to_begin(qtbot: Any, app: Sourcebook, ops: Operations) -> None:
    window = _window(qtbot, app, ops, LAPTOP)
    window.centre.setCurrentWidget(window.report_view)
    hint = window.report_view.browser.toPlainText()
    assert "No report yet" in hint and "[n]" in hint and "highlighted" in hint
    assert not window.report_view.status.isVisible()  # no status without a report


def test_enter_starts_the_run_and_shift_enter_adds_a_line(
    qtbot: Any, make_service: MakeService, ops: Operations, errors: list[BaseException]
) -> None:
    planner, researcher, writer = ScriptedLLM(), ScriptedLLM(), ScriptedLLM()
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ships = pid_with(svc, "4,200 ships")
    q = "How many ships came into Northport harbor in 2019?"
    planner.enqueue([plan(("q1", q, []))])
    researcher.enqueue(worker_script(q, ships, "4,200 ships in 2019."))
    writer.enqueue(["The Northport harbor handled 4,200 ships in 2019 [E1]."])
    panel = ResearchPanel(svc, ops)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.sources._documents.childCount() == 3, timeout=TIMEOUT)

    panel.question.setFocus()
    qtbot.keyClicks(panel.question, "How many ships came")
    qtbot.keyClick(panel.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert panel.phase == "idle" and panel.question.toPlainText() == "How many ships came\n"
    panel.question.setPlainText(q)
    with qtbot.waitSignal(panel.report_ready, timeout=TIMEOUT) as ready:
        qtbot.keyClick(panel.question, Qt.Key.Key_Return)
        assert panel.phase == "running"
    assert ready.args[0].question == q and ready.args[0].status == "answered"
    assert len(planner.history) == 1 and not errors


def test_pane_sizes_survive_a_restart(
    qtbot: Any, app: Sourcebook, ops: Operations, embedder: Any
) -> None:
    report = Report(task="t", question="What changed?", status="answered", markdown="It did.")
    first = _window(qtbot, app, ops, LAPTOP)
    total = sum(first.splitter.sizes())
    wanted = [280, total - 280 - 430, 430]
    first.splitter.setSizes(wanted)
    first.show_report(report)  # the report tab, with its text and checks panes
    report_split = first.report_view.split
    qtbot.waitUntil(lambda: min(report_split.sizes()) > 0)
    report_total = sum(report_split.sizes())
    report_wanted = [report_total - 150, 150]
    report_split.setSizes(report_wanted)
    assert first.splitter.sizes() == wanted and report_split.sizes() == report_wanted
    first.close()  # saves the layout, closes the service
    stored = QSettings(str(app.home / FILE_NAME), QSettings.Format.IniFormat)
    keys = set(stored.allKeys())
    assert "window/geometry" in keys and any(k.endswith("main-split") for k in keys)
    assert sum(k.endswith("ReportView/report-split") for k in keys) == 1  # the Report tab's

    service = Sourcebook(app.home, embedder=embedder)
    second = _window(qtbot, service, ops, LAPTOP)
    assert second.splitter.sizes() == wanted
    second.show_report(report)  # a splitter on a tab shown later gets its sizes too
    qtbot.waitUntil(lambda: second.report_view.split.sizes() == report_wanted, timeout=5000)
    second.close()


def test_a_fresh_home_gets_the_default_panes(qtbot: Any, app: Sourcebook, ops: Operations) -> None:
    window = _window(qtbot, app, ops, (1920, 1080))
    assert not (app.home / FILE_NAME).exists()
    library, centre, evidence = window.splitter.sizes()
    # the default proportions for the splitter's width (the handles take a few pixels)
    assert abs(library - 400) <= 4 and abs(centre - 829) <= 8 and abs(evidence - 691) <= 8
