"""The library panel: adding (dialog-free, drag and drop), progress and cancel, errors for bad
files, removing, and search results that open in the evidence viewer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pytestqt")

from pdfgen import make_multipage_pdf
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

import desktop.errors
import desktop.library_panel
from core.errors import IngestError, SourcebookError
from core.service import Document, Sourcebook
from desktop.library_items import AddRow
from desktop.library_panel import LibraryPanel
from desktop.main_window import MainWindow
from desktop.operations import Operations

TIMEOUT = 20_000


@pytest.fixture
def panel(qtbot: Any, app: Any, ops: Operations) -> LibraryPanel:
    p = LibraryPanel(app, ops)
    qtbot.addWidget(p)
    with qtbot.waitSignal(p.documents_loaded, timeout=TIMEOUT):
        p.refresh()
    return p


def _titles(panel: LibraryPanel) -> list[str]:
    return [d.title for d in panel.documents]


def _rows(panel: LibraryPanel) -> list[AddRow]:
    return [
        w
        for i in range(panel.adds.count())
        if isinstance(w := panel.adds.itemAt(i).widget(), AddRow)
    ]


def test_add_pdf_is_listed_with_pages_and_status(
    qtbot: Any, panel: LibraryPanel, tmp_path: Path, errors: list[BaseException]
) -> None:
    pdf = tmp_path / "budget.pdf"
    make_multipage_pdf(pdf, 3)
    progress: list[object] = []
    handle = panel.add_paths([pdf])
    assert handle is not None
    handle.progressed.connect(progress.append)
    qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
    doc = panel.documents[0]
    assert doc.page_count == 3 and doc.passage_count > 0 and doc.status == "ready"
    model = panel.model
    assert model.data(model.index(0, 1)) == "3"
    assert model.data(model.index(0, 3)) == "ready"
    assert not errors
    row = _rows(panel)[0]
    qtbot.waitUntil(lambda: "Added 1 document" in row.label.text(), timeout=TIMEOUT)
    assert not panel.empty_label.isVisible()


def test_a_document_read_whole_by_ocr_is_ready_with_notes(panel: LibraryPanel) -> None:
    ocr = (
        "page 1 had no text layer and was read by OCR (Tesseract); recognition errors are possible"
    )
    unread = "page 2 has no text layer (scanned image?); OCR is not available"
    docs = [
        Document(doc_id=f"d{i}", source_key=f"k{i}", source_uri=f"/docs/{i}.pdf", title=title,
                 kind="pdf", content_sha256="0" * 64, status="ready", problems=problems,
                 added_at=datetime.now(UTC))
        for i, (title, problems) in enumerate(
            [("A scan", [ocr]), ("B scan", [ocr, unread]), ("C text", [])]
        )
    ]  # fmt: skip
    panel.model.set_documents(docs, [])
    model = panel.model
    assert [model.data(model.index(r, 3)) for r in range(3)] == [
        "ready, with notes",
        "problems",
        "ready",
    ]
    tip = model.data(model.index(1, 0), Qt.ItemDataRole.ToolTipRole)
    assert f"ready; problems: {unread}; notes: {ocr}" in tip


def test_corrupt_pdf_shows_an_error_dialog(qtbot: Any, panel: LibraryPanel, tmp_path: Path) -> None:
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"\x00garbage, not a PDF at all\xff" * 40)
    panel.add_paths([bad])
    qtbot.waitUntil(lambda: bool(desktop.errors.open_error_dialogs()), timeout=TIMEOUT)
    box = desktop.errors.open_error_dialogs()[0]
    exc = box.property("sourcebook_exception")
    assert isinstance(exc, IngestError)
    assert "broken.pdf" in box.text()
    assert box.informativeText()  # what to do about it
    assert panel.documents == []
    box.accept()
    qtbot.waitUntil(lambda: not desktop.errors.open_error_dialogs(), timeout=TIMEOUT)


def test_batch_with_a_bad_file_keeps_the_others(
    qtbot: Any, panel: LibraryPanel, tmp_path: Path, errors: list[BaseException]
) -> None:
    good = tmp_path / "good.pdf"
    make_multipage_pdf(good, 2)
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 truncated nonsense")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    panel.add_paths([good, bad, empty])
    qtbot.waitUntil(lambda: bool(errors), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
    assert isinstance(errors[0], SourcebookError)
    assert "bad.pdf" in errors[0].message and "empty.txt" in errors[0].message
    row = _rows(panel)[0]
    assert "2 could not be added" in row.label.text()
    assert "bad.pdf" in row.failures.text() and not row.failures.isHidden()


def test_adding_a_folder_names_the_files_it_skipped(
    qtbot: Any, panel: LibraryPanel, tmp_path: Path, errors: list[BaseException]
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("Notes on the heron colony.\n", encoding="utf-8")
    (folder / "drawing.xyz").write_text("a format Sourcebook does not read\n")
    panel.add_paths([folder])
    row = _rows(panel)[0]
    qtbot.waitUntil(lambda: "Added 1 document" in row.label.text(), timeout=TIMEOUT)
    assert "1 skipped (unsupported type)" in row.label.text()
    assert "drawing.xyz" in row.failures.text() and not row.failures.isHidden()
    assert not errors


def test_drag_and_drop_adds_files(
    qtbot: Any, panel: LibraryPanel, tmp_path: Path, errors: list[BaseException]
) -> None:
    pdf = tmp_path / "dropped.pdf"
    make_multipage_pdf(pdf, 1)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(pdf))])
    pos = QPointF(10, 10)
    buttons, mods = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime, buttons, mods)
    QApplication.sendEvent(panel, enter)
    assert enter.isAccepted()
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, buttons, mods)
    QApplication.sendEvent(panel, drop)
    qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
    assert panel.documents[0].source_uri.endswith("dropped.pdf")

    web = QMimeData()
    web.setUrls([QUrl("https://example.org/x.pdf")])
    refused = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, web, buttons, mods)
    QApplication.sendEvent(panel, refused)
    assert not refused.isAccepted()


def test_cancel_an_add(
    qtbot: Any, panel: LibraryPanel, tmp_path: Path, errors: list[BaseException]
) -> None:
    files = []
    for i in range(3):
        f = tmp_path / f"doc{i}.pdf"
        make_multipage_pdf(f, 2)
        files.append(f)
    handle = panel.add_paths(files)
    assert handle is not None
    row = _rows(panel)[0]
    row.cancel_button.click()  # before the exclusive worker starts: nothing is added
    with qtbot.waitSignal(handle.finished, timeout=TIMEOUT):
        pass
    qtbot.waitUntil(lambda: "cancelled" in row.label.text(), timeout=TIMEOUT)
    assert len(panel.documents) < 3
    assert not errors


def test_remove_asks_first(
    qtbot: Any,
    panel: LibraryPanel,
    app: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    errors: list[BaseException],
) -> None:
    pdf = tmp_path / "gone.pdf"
    make_multipage_pdf(pdf, 1)
    app.add([pdf])
    with qtbot.waitSignal(panel.documents_loaded, timeout=TIMEOUT):
        panel.refresh()
    panel.table.selectRow(0)
    asked: list[list[str]] = []
    monkeypatch.setattr(
        desktop.library_panel, "confirm_remove", lambda _p, titles: asked.append(titles) or False
    )
    panel.remove_selected()
    assert asked and len(app.documents()) == 1  # declined: nothing happens

    monkeypatch.setattr(desktop.library_panel, "confirm_remove", lambda _p, _t: True)
    panel.table.selectRow(0)
    panel.remove_selected()
    qtbot.waitUntil(lambda: panel.documents == [], timeout=TIMEOUT)
    assert app.documents() == []


def test_search_hit_opens_in_the_evidence_viewer(
    qtbot: Any, app: Any, ops: Operations, tmp_path: Path, errors: list[BaseException]
) -> None:
    pdf = tmp_path / "pages.pdf"
    make_multipage_pdf(pdf, 4)
    app.add([pdf])
    window = MainWindow(app, ops)
    qtbot.addWidget(window)
    panel = window.library_panel
    qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
    panel.search_box.setText("body text of page number 3")
    panel.run_search()
    qtbot.waitUntil(lambda: panel.results.topLevelItemCount() > 0, timeout=TIMEOUT)
    hit = panel.hits[0]
    item = panel.results.topLevelItem(0)
    assert item is not None and item.text(0) == hit.title
    assert item.text(1) == str((hit.page_start or 0) + 1)
    assert "page number" in item.text(2)
    with qtbot.waitSignal(window.viewer.page_shown, timeout=TIMEOUT):
        panel.results.itemActivated.emit(item, 0)
    viewer = window.viewer
    assert viewer.evidence_id == hit.evidence_id
    assert viewer.doc_id == hit.doc_id
    assert viewer.page_index == hit.page_start
    assert viewer.highlight_rects()
    assert not errors


def test_a_library_made_by_another_embedder_shows_a_warning(
    qtbot: Any, panel: LibraryPanel, app: Any, ops: Operations, embedder: Any, tmp_path: Path
) -> None:
    assert not panel.embedder_warning.isVisibleTo(panel)
    pdf = tmp_path / "budget.pdf"
    make_multipage_pdf(pdf, 2)
    app.add([pdf])
    app.close()
    other = SimpleNamespace(
        name=embedder.name,
        dim=embedder.dim,
        max_tokens=embedder.max_tokens,
        identity="another-embedder@0/test",
        count_tokens=embedder.count_tokens,
        embed=embedder.embed,
    )
    service = Sourcebook(app.home, embedder=other)
    flagged = LibraryPanel(service, ops)
    qtbot.addWidget(flagged)
    with qtbot.waitSignal(flagged.documents_loaded, timeout=TIMEOUT):
        flagged.refresh()
    assert flagged.embedder_warning.isVisibleTo(flagged)
    text = flagged.embedder_warning.text()
    assert "another-embedder@0/test" in text and "sourcebook reembed" in text
    service.close()
