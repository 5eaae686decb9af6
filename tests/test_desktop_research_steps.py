"""The research panel's steps before a run: clarifying questions and the plan, each a widget that
says what the analyst decided through a signal (the panel's flow is tested in
test_desktop_research)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt

from desktop.research_inputs import starter_plan
from desktop.research_steps import ClarifyStep, PlanStep


def test_continue_gives_the_answers_written_and_skip_gives_none(qtbot: Any) -> None:
    step = ClarifyStep()
    qtbot.addWidget(step)
    step.set_questions(["Which mill?", "Which years?"])
    step.set_questions(["Which survey of Tarsk Mills?", "Which years?", "Which river?"])
    fields = step.fields()
    assert [f.property("question") for f in fields] == [
        "Which survey of Tarsk Mills?",
        "Which years?",
        "Which river?",
    ]  # the questions shown before are gone
    fields[0].setText("  the 1911 survey ")
    fields[2].setText("the Dravin River")

    with qtbot.waitSignal(step.answered) as given:
        qtbot.mouseClick(step.continue_btn, Qt.MouseButton.LeftButton)
    assert given.args == [
        ["Which survey of Tarsk Mills? → the 1911 survey", "Which river? → the Dravin River"]
    ]

    with qtbot.waitSignal(step.answered) as skipped:
        qtbot.mouseClick(step.skip_btn, Qt.MouseButton.LeftButton)
    assert skipped.args == [[]]


def test_the_plan_step_says_whether_the_plan_is_kept(qtbot: Any) -> None:
    step = PlanStep()
    qtbot.addWidget(step)
    step.editor.set_plan(starter_plan("Where was Tomas Varga born?"))
    assert step.editor.plan().queries[0].query == "Where was Tomas Varga born?"

    with qtbot.waitSignal(step.accepted):
        qtbot.mouseClick(step.go_btn, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(step.discarded):
        qtbot.mouseClick(step.discard_btn, Qt.MouseButton.LeftButton)
