"""The evidence viewer: the right document and page, highlight rectangles equal to the
evidence's word boxes, page navigation and zoom, text documents, a moved original, and the
report view's citation click reaching the viewer. Also ``core.render`` through the facade."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

pytest.importorskip("pytestqt")

from pdfgen import make_multipage_pdf
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextCursor

import desktop.errors
import desktop.evidence_viewer
from core.errors import NotFoundError
from core.research.schemas import CitationRecord, Report
from core.service import Evidence, Sourcebook
from desktop.evidence_viewer import EvidenceViewer
from desktop.main_window import MainWindow
from desktop.operations import Operations

TIMEOUT = 20_000


@pytest.fixture
def viewer(qtbot: Any, app: Sourcebook, ops: Operations) -> EvidenceViewer:
    v = EvidenceViewer(app, ops)
    v.resize(700, 900)
    qtbot.addWidget(v)
    v.show()
    return v


def _span_on_page(app: Sourcebook, pdf: Path, page: int) -> Evidence:
    """A span of the sentence on 1-based ``page`` (a span id, so boxes are a subset)."""
    changes = app.add([pdf])
    assert not changes.failed
    doc_id = changes.results[0].doc_id
    assert doc_id is not None
    needle = f"page number {page} "
    for p in app.library.store.get_document_passages(doc_id):
        i = p.text.find(needle)
        if i >= 0:
            return app.evidence(f"{p.passage_id}#{i}-{i + len(needle) - 1}")
    raise AssertionError(f"no passage mentions {needle!r}")


def test_pdf_page_with_highlights_equal_to_word_boxes(
    qtbot: Any, app: Sourcebook, viewer: EvidenceViewer, tmp_path: Path, errors: list[Any]
) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 3)
    ev = _span_on_page(app, pdf, 2)
    assert ev.boxes and {w.page_index for w in ev.boxes} == {1}
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.show_evidence(ev.evidence_id)
    assert viewer.mode == "page"
    assert viewer.evidence_id == ev.evidence_id
    assert viewer.doc_id == ev.doc_id
    assert viewer.page_index == 1 and viewer.page_count == 3
    assert viewer.highlight_rects() == [w.rect for w in ev.boxes]
    # the scene is the page in points: the boxes sit on the rendered page
    rect = viewer._scene.sceneRect()
    assert (rect.width(), rect.height()) == (612, 792)
    assert "page 2" in viewer._meta.text() and ev.evidence_id in viewer._meta.text()
    # the rendered page has ink inside every highlighted word box: boxes and pixels line up
    image = viewer._pixmap_item.pixmap().toImage()
    per_point = image.width() / 612
    for x0, y0, x1, y1 in viewer.highlight_rects():
        ink = [
            image.pixelColor(int(x * per_point), int(y * per_point)).lightness()
            for x in range(int(x0), int(x1))
            for y in range(int(y0), int(y1))
        ]
        assert min(ink) < 128, "no text under a highlight"
    assert not errors


def test_page_navigation_and_zoom(
    qtbot: Any, app: Sourcebook, viewer: EvidenceViewer, tmp_path: Path, errors: list[Any]
) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 3)
    ev = _span_on_page(app, pdf, 2)
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.show_evidence(ev.evidence_id)
    qtbot.waitUntil(lambda: not viewer.busy, timeout=TIMEOUT)
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT) as shown:
        viewer.next_page()
    assert shown.args == [2] and viewer.page_index == 2
    assert viewer.highlight_rects() == []  # the cited words are on page 2, not 3
    viewer.next_page()  # already on the last page: nothing happens
    assert viewer.page_index == 2
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.previous_page()
    assert viewer.page_index == 1 and viewer.highlight_rects()
    qtbot.waitUntil(lambda: not viewer.busy, timeout=TIMEOUT)
    before = viewer.zoom
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.zoom_in()
    assert viewer.zoom == pytest.approx(before * 1.25)
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.fit_width()
    assert viewer.zoom == pytest.approx(before, rel=0.05)
    assert not errors


def test_text_document_shows_the_span_highlighted(
    qtbot: Any, app: Sourcebook, viewer: EvidenceViewer, tmp_path: Path
) -> None:
    txt = tmp_path / "notes.txt"
    txt.write_text("Harbor notes.\n\nThe Northport harbor handled 4,200 ships in 2019.\n")
    app.add([txt])
    hit = app.search("Northport harbor ships", k=1)[0]
    ev0 = app.evidence(hit.evidence_id)
    start = ev0.passage_text.index("4,200")
    ev_id = f"{hit.evidence_id}#{start}-{start + 5}"
    with qtbot.waitSignal(viewer.evidence_shown, timeout=TIMEOUT):
        viewer.show_evidence(ev_id)
    assert viewer.mode == "text" and viewer.page_index is None
    assert viewer.evidence_id == ev_id
    doc = viewer._text.document()
    assert doc.toPlainText() == ev0.passage_text
    inside, outside = QTextCursor(doc), QTextCursor(doc)
    inside.setPosition(start + 2)
    outside.setPosition(1)
    assert inside.charFormat().background() != outside.charFormat().background()


def test_moved_original_falls_back_to_passage_text(
    qtbot: Any, app: Sourcebook, viewer: EvidenceViewer, tmp_path: Path, errors: list[Any]
) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 2)
    ev = _span_on_page(app, pdf, 1)
    pdf.rename(tmp_path / "elsewhere.pdf")
    with qtbot.waitSignal(viewer.evidence_shown, timeout=TIMEOUT):
        viewer.show_evidence(ev.evidence_id)
    qtbot.waitUntil(lambda: viewer.mode == "text", timeout=TIMEOUT)
    assert "unavailable" in viewer._notice.text() and not viewer._notice.isHidden()
    assert not errors  # shown inline, not as a dialog
    with pytest.raises(NotFoundError):
        app.render_page(ev.doc_id, 0, 1.0)


def test_open_original_at_the_page(
    qtbot: Any,
    app: Sourcebook,
    viewer: EvidenceViewer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 3)
    ev = _span_on_page(app, pdf, 3)
    with qtbot.waitSignal(viewer.page_shown, timeout=TIMEOUT):
        viewer.show_evidence(ev.evidence_id)
    opened: list[QUrl] = []
    monkeypatch.setattr(desktop.evidence_viewer, "open_url_hook", opened.append)
    viewer.open_original()
    qtbot.waitUntil(lambda: bool(opened), timeout=TIMEOUT)
    assert opened[0].toLocalFile() == str(pdf.resolve())
    assert opened[0].fragment() == "page=3"


def test_render_page_through_the_facade(app: Sourcebook, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 2)
    doc_id = app.add([pdf]).results[0].doc_id
    assert doc_id is not None
    page = app.render_page(doc_id, 1, 2.0)
    assert page.page_index == 1 and page.page_count == 2
    assert (page.width, page.height) == (612, 792)
    assert (page.pixel_width, page.pixel_height) == (1224, 1584)
    assert len(page.samples) == page.stride * page.pixel_height >= 1224 * 3 * 1584
    png = page.png()
    assert png.startswith(b"\x89PNG")
    pix = pymupdf.Pixmap(png)
    assert (pix.width, pix.height) == (1224, 1584)
    assert pix.pixel(612, 10) == (255, 255, 255)  # white paper, not garbage
    with pytest.raises(NotFoundError):
        app.render_page(doc_id, 5, 1.0)
    assert app.source_path(doc_id) == pdf.resolve() or app.source_path(doc_id) == pdf


def test_citation_click_in_the_report_opens_the_viewer(
    qtbot: Any, app: Sourcebook, ops: Operations, tmp_path: Path, errors: list[Any]
) -> None:
    pdf = tmp_path / "report.pdf"
    make_multipage_pdf(pdf, 3)
    ev = _span_on_page(app, pdf, 3)
    window = MainWindow(app, ops)
    qtbot.addWidget(window)
    window.show()
    record = CitationRecord(
        number=1,
        evidence_id=ev.evidence_id,
        doc_id=ev.doc_id,
        title=ev.title,
        source_uri=ev.source_uri,
        pages=ev.pages,
        boxes=ev.boxes,
        quote=ev.text,
        content_sha256="0" * 64,
    )
    report = Report(
        task="t1", question="q?", status="answered", markdown="Claim [1].", citations=[record]
    )
    window.show_report(report)
    assert window.centre.currentWidget() is window.report_view
    with qtbot.waitSignal(window.viewer.page_shown, timeout=TIMEOUT):
        window.report_view.citation_activated.emit(record)
    v = window.viewer
    assert (v.evidence_id, v.doc_id, v.page_index) == (ev.evidence_id, ev.doc_id, 2)
    assert v.highlight_rects() == [w.rect for w in record.boxes]

    gone = record.model_copy(update={"evidence_id": "ev1:00000000deadbeef", "quote": "old words"})
    with qtbot.waitSignal(v.evidence_shown, timeout=TIMEOUT):
        window.report_view.citation_activated.emit(gone)
    assert v.mode == "text" and v._text.toPlainText() == "old words"
    assert not errors
