"""The report view (citations, checks, status) and export, on reports of real scripted runs."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from desktop_research_fixtures import (
    CHECKED_QUESTION,
    MakeService,
    checked_report,  # noqa: F401 - fixture
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
)
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QMainWindow

from core.errors import NotFoundError
from core.service import Report, Sourcebook
from desktop import errors as desktop_errors
from desktop import export_actions
from desktop.export_actions import export_report_interactive
from desktop.operations import Operations
from desktop.report_view import ReportView, link_citations


def _click_link(qtbot: Any, view: ReportView, nth: int) -> None:
    """Click the ``nth`` link of the rendered report with the mouse."""
    doc = view.browser.document()
    found = -1
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().isAnchor():
                found += 1
                if found == nth:
                    cursor = QTextCursor(doc)
                    cursor.setPosition(frag.position() + 1)
                    view.browser.ensureCursorVisible()
                    view.browser.setTextCursor(cursor)
                    rect = view.browser.cursorRect(cursor)
                    point = QPoint(rect.left() - 2, rect.center().y())
                    qtbot.mouseClick(view.browser.viewport(), Qt.MouseButton.LeftButton, pos=point)
                    return
            it += 1
        block = block.next()
    raise AssertionError(f"no link number {nth}")


def test_citation_links_flagged_and_removed(
    qtbot: Any, checked_report: tuple[Sourcebook, Report, dict[str, str]]
) -> None:
    _svc, report, ids = checked_report
    view = ReportView()
    qtbot.addWidget(view)
    view.resize(900, 900)
    view.show()
    qtbot.waitExposed(view)
    view.show_report(report)
    assert view.current_report() is report

    # one number per document: all three citations read [1], each linked to its own passage
    links = view.citation_links()
    assert [text for text, _ in links] == ["[1]", "[1]", "[1]"]
    by_href = {href: report.citations[int(href.split(":")[1])].evidence_id for _, href in links}
    assert [by_href[h] for _, h in links] == [ids["ships"], ids["park"], ids["ships"]]
    for nth, want in enumerate([ids["ships"], ids["park"]]):
        with qtbot.waitSignal(view.citation_activated, timeout=5000) as clicked:
            _click_link(qtbot, view, nth)
        record = clicked.args[0]
        assert record.evidence_id == want and record.pages == [2 if want == ids["park"] else 1]

    # the Sources list opens a passage too
    assert view.sources.topLevelItemCount() == len(report.citations)
    item = view.sources.topLevelItem(1)
    assert item is not None and item.text(1) == "Northport Harbor Report"
    with qtbot.waitSignal(view.citation_activated) as activated:
        view.sources.itemActivated.emit(item, 0)
    assert activated.args[0].evidence_id == report.citations[1].evidence_id

    # the checks are on screen, not in a log
    assert view.flagged.isVisible() and view.removed.isVisible()
    flagged = view.flagged.item(0).text()
    assert "9,900" in flagged and "ev1:" not in flagged and "⚠" in flagged
    assert report.flagged_claims[0].reason in flagged
    removed = [view.removed.item(i).text() for i in range(view.removed.count())]
    assert any(t.startswith("E7") for t in removed)
    with qtbot.waitSignal(view.citation_activated) as from_flag:
        view.flagged.itemActivated.emit(view.flagged.item(0))
    assert from_flag.args[0].evidence_id == ids["ships"]
    assert "⚠" in view.browser.toPlainText()

    # the status is stated in words with its reasons
    status = view.status.text()
    assert status.startswith("Partial answer") and "removed" in status and "supported" in status


def test_status_is_plain_and_content_is_inert(qtbot: Any) -> None:
    view = ReportView()
    qtbot.addWidget(view)
    view.show_report(
        Report(
            task="t",
            question="Q?",
            status="insufficient_evidence",
            status_reasons=["No passage inside the chosen sources could be read."],
            markdown="Nothing found. <b>raw</b> ![x](file:///etc/passwd) [go](javascript:alert(1))",
        )
    )
    assert view.status.text().startswith("Insufficient evidence")
    assert "No passage inside" in view.status.text()
    text = view.browser.toPlainText()
    assert "<b>raw</b>" in text  # raw HTML is shown, never interpreted
    assert not view.flagged.isVisible() and not view.removed.isVisible()
    hrefs = [h for _, h in view.citation_links()]
    with qtbot.assertNotEmitted(view.citation_activated):
        for href in hrefs:
            view.browser.anchorClicked.emit(view.browser.document().baseUrl().resolved(href))
    view.show_report(Report(task="t", question="Q?", status="cancelled"))
    assert view.status.text().startswith("Cancelled")


def test_link_citations_leaves_sources_and_links_alone() -> None:
    report = Report(
        task="t",
        question="q",
        status="answered",
        markdown="A [1]. B [2] and [3](https://example.org).\n\n## Sources\n\n1. X [1]\n",
        citations=[],
    )
    assert link_citations(report) == report.markdown  # no records: nothing to link


@pytest.mark.parametrize("fmt", ["md", "html", "pdf", "json"])
def test_export_each_format(
    qtbot: Any,
    tmp_path: Path,
    fmt: str,
    checked_report: tuple[Sourcebook, Report, dict[str, str]],
    ops: Operations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc, report, ids = checked_report
    window = QMainWindow()
    qtbot.addWidget(window)
    asked: list[tuple[Path, str]] = []

    def choose(_parent: Any, suggested: Path, file_filter: str) -> Path:
        asked.append((suggested, file_filter))
        return tmp_path / "exported"  # no suffix: the right one is added

    monkeypatch.setattr(export_actions, "save_path_hook", choose)
    export_report_interactive(window, svc, ops, report.task, fmt)
    out = tmp_path / f"exported.{fmt}"
    qtbot.waitUntil(lambda: out.exists() and not ops.running, timeout=60_000)
    assert asked[0][0].name == f"checked.{fmt}"
    assert "Exported the report" in window.statusBar().currentMessage()
    data = out.read_bytes()
    if fmt == "md":
        text = data.decode()
        assert text == report.markdown and "## Sources" in text
    elif fmt == "html":
        text = data.decode()
        assert "<script" not in text.lower() and "Northport Harbor Report" in text
        assert "4,200 ships" in text
    elif fmt == "pdf":
        assert data.startswith(b"%PDF")
    else:
        prov = json.loads(data)
        assert prov["status"] == report.status and prov["question"] == CHECKED_QUESTION
        assert {c["evidence_id"] for c in prov["citations"]} == set(ids.values())
        assert prov["removed_citations"] and prov["flagged_claims"]


def test_export_errors_and_cancel(
    qtbot: Any,
    tmp_path: Path,
    make_service: MakeService,
    ops: Operations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = make_service()
    shown: list[BaseException] = []
    monkeypatch.setattr(desktop_errors, "error_hook", lambda _p, exc: shown.append(exc))
    parent = QMainWindow()
    qtbot.addWidget(parent)
    # the user cancels the dialog: nothing runs
    monkeypatch.setattr(export_actions, "save_path_hook", lambda *_a: None)
    export_report_interactive(parent, svc, ops, "no-such-task", "md")
    assert not ops.running and not shown
    # a task without a report: the error reaches the dialog function
    monkeypatch.setattr(export_actions, "save_path_hook", lambda *_a: tmp_path / "x.md")
    export_report_interactive(parent, svc, ops, "no-such-task", "md")
    qtbot.waitUntil(lambda: bool(shown), timeout=30_000)
    assert isinstance(shown[0], NotFoundError) and not (tmp_path / "x.md").exists()
    export_report_interactive(parent, svc, ops, "no-such-task", "rtf")
    assert "Unknown export format" in str(shown[-1])
