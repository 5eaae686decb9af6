"""OCR of scanned pages with Tesseract: generated image-only pages (straight, /Rotate'd,
skewed), word boxes where the words are, the missing-Tesseract message, progress and
cancellation, and the shared scans when present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest
from conftest import shared_eval

from core.errors import CancelledError
from core.ingest import extract_file, text_lost
from core.ingest import ocr as ocr_mod
from core.ingest.ocr import char_error_rate, ocr_engine
from core.settings import IngestSettings

SETTINGS = IngestSettings()
HAVE_TESSERACT = ocr_engine(SETTINGS)[0] is not None
needs_tesseract = pytest.mark.skipif(
    not HAVE_TESSERACT, reason="Tesseract is not installed (packaging/system-deps.sh installs it)"
)

LINES = [
    "Quarterly Harbour Report",
    "Container traffic rose by four percent in the third quarter.",
    "The eastern terminal handled most of the growth in volume.",
    "Dredging of the northern channel will finish next spring.",
]


def _count(texts: Any) -> list[int]:
    return [len(t.split()) + 2 for t in texts]


def _scan_pdf(path: Path, *, rotate: int = 0, skew: float = 0.0, dpi: int = 200) -> dict[str, Any]:
    """Typeset LINES, rasterise the page (optionally tilted), and make a PDF whose only page
    is that image. Returns the word boxes of the original text (page coordinates)."""
    src = pymupdf.open()
    page = src.new_page(width=612, height=792)
    y = 110.0
    for i, line in enumerate(LINES):
        page.insert_text((72, y), line, fontsize=20 if i == 0 else 12, fontname="tiro")
        y += 40 if i == 0 else 22
    words = {w[4]: pymupdf.Rect(w[:4]) for w in page.get_text("words")}
    z = dpi / 72
    m = pymupdf.Matrix(z, z).prerotate(skew) if skew else pymupdf.Matrix(z, z)
    pix = page.get_pixmap(matrix=m, colorspace=pymupdf.csGRAY, alpha=False)
    out = pymupdf.open()
    scan = out.new_page(width=612, height=792)
    scan.insert_image(scan.rect, pixmap=pix)
    if rotate:
        scan.set_rotation(rotate)
    out.save(path)
    out.close()
    src.close()
    return words


def _box_of(doc: Any, word: str) -> pymupdf.Rect:
    for p in doc.passages:
        for w in p.words:
            if p.text[w.start : w.end].strip(".,") == word:
                return pymupdf.Rect(w.rect)
    raise AssertionError(f"{word!r} not found in the OCR words")


def _on_word(ocr: pymupdf.Rect, text_layer: pymupdf.Rect) -> bool:
    """Same left and right edges (2 pt); vertically inside the text layer's box, which spans
    the font's ascent to descent while Tesseract's box hugs the ink."""
    return (
        abs(ocr.x0 - text_layer.x0) <= 2
        and abs(ocr.x1 - text_layer.x1) <= 2
        and text_layer.y0 - 1 <= ocr.y0 < ocr.y1 <= text_layer.y1 + 1
    )


@needs_tesseract
@pytest.mark.parametrize("rotate", [0, 90])
def test_image_only_page_is_read_with_word_boxes(tmp_path: Path, rotate: int) -> None:
    path = tmp_path / "scan.pdf"
    truth = _scan_pdf(path, rotate=rotate)
    events: list[tuple[int, int]] = []
    doc = extract_file(path, settings=SETTINGS, count_tokens=_count,
                       ocr_progress=lambda d, n: events.append((d, n)))  # fmt: skip
    assert events == [(1, 1)]
    assert doc.pages[0].has_text_layer is False and doc.pages[0].char_count > 100
    assert any("read by OCR" in p for p in doc.document.problems)
    assert not any(text_lost(p) for p in doc.document.problems)  # read whole: a note, no loss
    assert char_error_rate("\n".join(LINES), doc.text) < 0.03, doc.text
    assert doc.document.title == "Quarterly Harbour Report"
    assert doc.passages[0].heading_path == ["Quarterly Harbour Report"]
    # the highlight lands on the words: same place as the text layer had them (unrotated space)
    for word in ("eastern", "Dredging", "percent"):
        assert _on_word(_box_of(doc, word), truth[word]), (word, _box_of(doc, word), truth[word])


@needs_tesseract
def test_skewed_scan_is_straightened(tmp_path: Path) -> None:
    path = tmp_path / "skew.pdf"
    truth = _scan_pdf(path, skew=3.0)
    doc = extract_file(path, settings=SETTINGS, count_tokens=_count)
    assert char_error_rate("\n".join(LINES), doc.text) < 0.03, doc.text
    # the page image is tilted, so the boxes are only near the untilted positions
    assert _box_of(doc, "eastern").intersects(truth["eastern"])


@needs_tesseract
def test_blank_scan_reports_no_text(tmp_path: Path) -> None:
    import pdfgen

    path = tmp_path / "blank.pdf"
    pdfgen.make_image_only_pdf(path, text_pages=1)
    doc = extract_file(path, settings=SETTINGS, count_tokens=_count)
    assert any("page 2 has no text layer" in p and "OCR found no text" in p
               for p in doc.document.problems)  # fmt: skip


@needs_tesseract
def test_cancel_between_pages(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    _scan_pdf(path)

    def stop(done: int, total: int) -> None:
        raise CancelledError("Adding was cancelled.")

    with pytest.raises(CancelledError):
        extract_file(path, settings=SETTINGS, count_tokens=_count, ocr_progress=stop)


def test_missing_tesseract_is_reported_with_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "scan.pdf"
    _scan_pdf(path)
    ocr_mod.probe_tesseract.cache_clear()
    monkeypatch.setattr(ocr_mod.shutil, "which", lambda _name: None)
    try:
        doc = extract_file(path, settings=SETTINGS, count_tokens=_count)
    finally:
        ocr_mod.probe_tesseract.cache_clear()
    [problem] = doc.document.problems
    assert "page 1 has no text layer" in problem
    assert "apt-get install tesseract-ocr" in problem
    assert doc.passages == []


def test_ocr_can_be_turned_off(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    _scan_pdf(path)
    doc = extract_file(path, settings=IngestSettings(ocr_enabled=False), count_tokens=_count)
    assert any("ingest.ocr_enabled" in p for p in doc.document.problems)


def test_char_error_rate() -> None:
    assert char_error_rate("kitten", "sitting") == pytest.approx(3 / 6)
    assert char_error_rate("a  b\n\nc", "a b c") == 0.0  # whitespace runs count as one space
    assert char_error_rate("ﬁne", "fine") == 0.0  # NFKC folds ligatures


@needs_tesseract
def test_scan_added_to_library_with_progress(tmp_path: Path, app: Any) -> None:
    path = tmp_path / "harbour-scan.pdf"
    _scan_pdf(path)
    events: list[Any] = []
    changes = app.add([path], progress=events.append)
    [r] = changes.results
    assert r.outcome == "added", r
    assert any(e.stage == "extracting" and e.of == 1 and e.done == 1 for e in events)
    hits = app.search("eastern terminal growth", mode="keyword")
    assert hits and hits[0].doc_id == r.doc_id and hits[0].page_start == 0
    ev = app.evidence(hits[0].evidence_id)
    assert ev.boxes and ev.pages == [1]


# ------------------------------------------------------------------ the shared scans


@needs_tesseract
@pytest.mark.slow
@pytest.mark.parametrize("name", ["linn", "skew", "cardinal"])
def test_shared_scans(name: str, tmp_path: Path) -> None:
    """linn: straight; skew: tilted ~1.7 degrees; cardinal: the page turned 90 and 180 degrees
    inside the image (its pages 2-3; bench/ocr_cer.py measures all four)."""
    pdf = shared_eval("pdfs", "scanned", f"{name}.pdf")
    ref = shared_eval("pdfs", "scanned", "linn.txt").read_text(encoding="utf-8")
    if name == "cardinal":
        src = pymupdf.open(pdf)
        part = pymupdf.open()
        part.insert_pdf(src, from_page=1, to_page=2)
        pdf = tmp_path / "cardinal-90-180.pdf"
        part.save(pdf)
    doc = extract_file(pdf, settings=SETTINGS, count_tokens=_count)
    assert doc.document.passage_count > 0
    by_page: dict[int, list[str]] = {}  # each page's words, in reading order
    for p in doc.passages:
        for w in p.words:
            by_page.setdefault(w.page_index, []).append(p.text[w.start : w.end])
    assert sorted(by_page) == list(range(doc.document.page_count))
    for page_index, words in by_page.items():
        cer = char_error_rate(ref, " ".join(words))
        assert cer < 0.05, (name, page_index, cer)
    # every word box lies on its page
    for p in doc.passages:
        page = doc.pages[p.words[0].page_index]
        for w in p.words:
            x0, y0, x1, y1 = w.rect
            assert -1 <= x0 < x1 <= page.width + 1 and -1 <= y0 < y1 <= page.height + 1
