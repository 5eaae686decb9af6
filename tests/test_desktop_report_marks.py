"""What the report view and the search results show beyond plain text, on a real run and a real
library: the status in words, a citation's hover card (quote and page), a flagged claim's
marker beside its sentence, and search hits as cards with the query's words marked (escaped:
a passage cannot inject markup)."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

pytest.importorskip("pytestqt")

from desktop_research_fixtures import (
    MakeService,
    checked_report,  # noqa: F401 - fixture
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
    run_checked,
)
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent, QTextCursor
from PySide6.QtWidgets import QApplication, QToolTip

from core.service import Report, Sourcebook
from desktop.library_panel import LibraryPanel
from desktop.operations import Operations
from desktop.report_marks import headline, link_flags
from desktop.report_view import ReportView, status_text
from desktop.search_results import ROLE_HTML, _document, mark_terms, query_terms, whole_words

TIMEOUT = 30_000


@pytest.fixture
def flagged_run(
    checked_report: tuple[Sourcebook, Report, dict[str, str]],
) -> tuple[Report, dict[str, str]]:
    """A real scripted run: two supported claims, one the passages do not bear out (flagged),
    one citation of a passage never read (removed)."""
    _svc, report, ids = checked_report
    assert report.status == "partial"
    return report, ids


def test_a_claim_removed_from_the_report_is_listed_not_marked(
    qtbot: Any, make_service: MakeService
) -> None:
    _svc, report, _ids = run_checked(make_service, "checked-removed")  # every stage on
    gone = [f for f in report.flagged_claims if "9,900" in f.sentence]
    assert len(gone) == 1 and gone[0].removed
    view = _view(qtbot, report)
    assert "9,900" not in view.browser.toPlainText()
    assert all("9,900" not in sentence for _i, sentence in view.flag_markers())
    listed = [view.flagged.item(i).text() for i in range(view.flagged.count())]
    assert any("9,900" in t and "removed from the report" in t for t in listed), listed


def _view(qtbot: Any, report: Report) -> ReportView:
    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 800)
    view.show()
    qtbot.waitExposed(view)
    view.show_report(report)
    return view


def _anchor_point(view: ReportView, scheme: str, nth: int = 0) -> QPoint:
    """A viewport point inside the ``nth`` link of ``scheme`` in the rendered report."""
    doc = view.browser.document()
    found = -1
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().anchorHref().startswith(f"{scheme}:"):
                found += 1
                if found == nth:
                    cursor = QTextCursor(doc)
                    cursor.setPosition(frag.position() + 1)
                    view.browser.setTextCursor(cursor)
                    view.browser.ensureCursorVisible()
                    rect = view.browser.cursorRect(cursor)
                    return QPoint(rect.left() - 2, rect.center().y())
            it += 1
        block = block.next()
    raise AssertionError(f"no {scheme} link number {nth}")


def _hover(view: ReportView, point: QPoint) -> str:
    """Send the viewport the tooltip event a resting mouse sends; the tooltip's text."""
    viewport = view.browser.viewport()
    QToolTip.hideText()
    event = QHelpEvent(QEvent.Type.ToolTip, point, viewport.mapToGlobal(point))
    QApplication.sendEvent(viewport, event)
    return QToolTip.text() if QToolTip.isVisible() else ""


def test_status_line_citation_hover_and_flag_marker(
    qtbot: Any, flagged_run: tuple[Report, dict[str, str]]
) -> None:
    report, ids = flagged_run
    view = _view(qtbot, report)

    # the status in words at the top, with what was flagged and removed
    first_line = view.status.text().splitlines()[0]
    flags = len(report.flagged_claims)
    assert first_line.startswith(f"Partial answer: {flags} claim")
    assert "flagged" in first_line and "1 citation removed" in first_line
    assert view.status.mapTo(view, QPoint(0, 0)).y() < view.browser.mapTo(view, QPoint(0, 0)).y()

    # hovering a citation shows its quoted words and page; clicking still opens the passage
    tip = _hover(view, _anchor_point(view, "cite", 0))
    ships = next(c for c in report.citations if c.evidence_id == ids["ships"])
    assert "4,200 ships" in tip and f"page {ships.pages[0]}" in tip
    assert "Northport Harbor Report" in tip
    tip = _hover(view, _anchor_point(view, "cite", 1))
    assert "Ellen Park" in tip and "page 2" in tip

    # the flagged claim: a marker after its sentence, the reason on hover, the passage on click
    markers = view.flag_markers()
    flagged = [i for i, sentence in markers if "9,900" in sentence]
    assert flagged, markers
    claim = report.flagged_claims[flagged[0]]
    assert "9,900" in claim.sentence
    assert all("4,200" not in s for i, s in markers if i == flagged[0])
    marker_at = next(n for n, (i, _s) in enumerate(markers) if i == flagged[0])
    tip = _hover(view, _anchor_point(view, "flag", marker_at))
    assert "Flagged claim" in tip and claim.reason.split()[0] in tip
    with qtbot.waitSignal(view.citation_activated, timeout=5000) as opened:
        view.browser.anchorClicked.emit(
            view.browser.document().baseUrl().resolved(f"flag:{flagged[0]}")
        )
    assert opened.args[0].evidence_id == ids["ships"]
    assert view.flagged.currentRow() == flagged[0]
    # the list below still holds every flag with its reason
    assert view.flagged.count() == flags and claim.reason in view.flagged.item(flagged[0]).text()


def test_headline_in_words_for_each_outcome() -> None:
    answered = Report(task="t", question="q", status="answered", markdown="A [1].")
    assert headline(answered, status_text("answered")) == (
        "Answered: every claim is supported by its cited passage."
    )
    none = Report(task="t", question="q", status="insufficient_evidence")
    assert headline(none, status_text(none.status)).startswith("Insufficient evidence:")
    # a mark is linked to the claim whose words it follows, not to the first flag
    from core.service import FlaggedClaim

    flags = [
        FlaggedClaim(sentence="Rail opened in 1887 [ev1:aa].", evidence_ids=[], reason="r1"),
        FlaggedClaim(sentence="Ships came in 2019 [ev1:bb].", evidence_ids=[], reason="r2"),
    ]
    linked = link_flags("Ships came in 2019 [1]. ⚠ Rail opened in 1887 [2]. ⚠", flags)
    assert linked == "Ships came in 2019 [1]. [⚠](flag:1) Rail opened in 1887 [2]. [⚠](flag:0)"
    # a claim removed from the report is listed, not marked in it: no mark links to it
    gone = FlaggedClaim(
        sentence="Ships came in 2019 and 2020 [ev1:cc].", evidence_ids=[], reason="r3", removed=True
    )
    linked = link_flags("Ships came in 2019 [1]. ⚠ Rail opened in 1887 [2]. ⚠", [gone, *flags])
    assert linked == "Ships came in 2019 [1]. [⚠](flag:2) Rail opened in 1887 [2]. [⚠](flag:1)"


def _card_pdf(path: Path, title: str, text: str) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    assert page.insert_textbox(pymupdf.Rect(72, 72, 540, 740), text, fontsize=11) >= 0
    doc.set_metadata({"title": title})
    doc.save(path)
    doc.close()
    return path


def test_search_hits_are_readable_cards_with_marked_words(
    qtbot: Any, app: Sourcebook, ops: Operations, tmp_path: Path, errors: list[BaseException]
) -> None:
    title = "Northport Harbor Authority annual report on shipping, dredging and the channel"
    text = (
        "The dredging of the main channel began in March. <script>alert('x')</script> "
        "The contractor moved 40,000 cubic metres of silt from the harbor basin, and the "
        "channel was deepened to twelve metres along its whole length, which lets the largest "
        "container ships reach the new quay at any tide. Inspections of the breakwater found "
        "cracks near the lighthouse that will be repaired next summer, before the storm season "
        "begins again along the northern coast of the county."
    )
    assert not app.add([_card_pdf(tmp_path / "harbor.pdf", title, text)]).failed
    panel = LibraryPanel(app, ops)
    qtbot.addWidget(panel)
    panel.resize(300, 700)  # the library column of a laptop screen
    panel.show()
    panel.refresh()
    qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
    panel.search_box.setText("harbor dredging")
    panel.run_search()
    qtbot.waitUntil(lambda: panel.results.topLevelItemCount() > 0, timeout=TIMEOUT)

    item = panel.results.topLevelItem(0)
    assert item is not None
    assert item.text(0) == title and item.text(1) == "1"  # the whole title and the page
    card = str(item.data(0, ROLE_HTML))
    assert "<script" not in card and "&lt;script&gt;" in card  # escaped: shown, never run
    assert ">dredging</span>" in card and ">harbor</span>" in card  # the query's words marked
    assert ">the</span>" not in card  # function words are not
    drawn = _document(card, 280, panel.results.font())
    shown = drawn.toPlainText()
    assert title in shown and "<script>alert('x')</script>" in shown
    # the row is as tall as its wrapped card: the title and the snippet are not cut
    rect = panel.results.visualItemRect(item)
    assert rect.height() >= int(drawn.size().height())
    snippet = item.text(2)
    words = set(" ".join(text.split()).split())
    assert all(w in words for w in snippet.replace("…", " ").split())  # no word cut in two
    assert not errors


def test_mark_terms_escapes_before_marking() -> None:
    assert query_terms("the harbor of Northport in 2019") == ["northport", "harbor", "2019"]
    marked = mark_terms('a <b>harbor</b> & "ships"', ["harbor", "ship"])
    assert marked.count("<span") == 2 and "&lt;b&gt;" in marked and "&amp;" in marked
    assert whole_words("one two thre…") == "one two …"
