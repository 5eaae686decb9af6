"""PDF ingestion on real PDFs generated with PyMuPDF (and one shared two-column paper)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pdfgen
import pymupdf
import pytest
from conftest import shared_eval

from core.ingest import extract_file, text_lost
from core.settings import IngestSettings
from models.embedder import WordPieceCounter, minilm_dir

SETTINGS = IngestSettings()


@pytest.fixture(scope="module")
def count() -> WordPieceCounter:
    return WordPieceCounter(minilm_dir())


def test_two_column_reading_order(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "two.pdf"
    expected = pdfgen.make_two_column_pdf(path)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    text = doc.text
    positions = [text.index(s) for s in expected["left"] + expected["right"]]
    assert positions == sorted(positions), "left column must be read before the right one"
    assert text.index(expected["left"][-1]) < text.index(expected["right"][0])
    assert doc.document.title == "A Study of Two Columns"


def test_table_rows_readable(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "table.pdf"
    rows = pdfgen.make_table_pdf(path)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    lines = doc.text.split("\n")
    for row in rows:
        assert " | ".join(row) in lines
    # the table is not taken for two columns: rows stay whole and in order
    assert doc.text.index("North | ") < doc.text.index("South | ") < doc.text.index("West | ")


def test_multipage_page_numbers_and_headings(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "multi.pdf"
    sentences = pdfgen.make_multipage_pdf(path, 4)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    assert doc.document.page_count == 4 and len(doc.pages) == 4
    for i, s in enumerate(sentences):
        (p,) = [p for p in doc.passages if s in p.text]
        assert p.page_start == p.page_end == i
        assert p.heading_path == [f"Chapter {i + 1}"]
        assert {w.page_index for w in p.words} == {i}
    for p in doc.passages:
        assert doc.text[p.char_start : p.char_end] == p.text


def test_heading_path(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "head.pdf"
    pdfgen.make_headings_pdf(path)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    by_text = {p.text.split("\n")[0]: p for p in doc.passages}
    data = next(p for p in doc.passages if "Data was collected" in p.text)
    assert data.heading_path == ["Annual Report", "Methods", "Data Collection"]
    intro = next(p for p in doc.passages if "introduction explains" in p.text)
    assert intro.heading_path[:2] == ["Annual Report", "Introduction"]
    assert by_text  # passages start with their heading text


def test_word_boxes_cover_span_words(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "two.pdf"
    expected = pdfgen.make_two_column_pdf(path)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    target = expected["right"][5]
    pdf = pymupdf.open(path)
    page = pdf[0]
    for p in doc.passages:
        for sp in p.spans:
            if p.text[sp.start : sp.end] != target:
                continue
            words = [w for w in p.words if w.start >= sp.start and w.end <= sp.end]
            assert " ".join(p.text[w.start : w.end] for w in words) == target
            for w in words:
                found = page.search_for(p.text[w.start : w.end], clip=pymupdf.Rect(w.rect))
                assert found, f"no box for {p.text[w.start : w.end]!r}"
                r = pymupdf.Rect(w.rect)
                assert any(abs(f.x0 - r.x0) < 1 and abs(f.y0 - r.y0) < 2 for f in found)
            pdf.close()
            return
    pdf.close()
    pytest.fail("span not found")


def test_ids_stable(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "table.pdf"
    pdfgen.make_table_pdf(path)
    a = extract_file(path, settings=SETTINGS, count_tokens=count)
    b = extract_file(path, settings=SETTINGS, count_tokens=count)
    assert a.document.doc_id == b.document.doc_id
    assert a.text == b.text
    assert [p.passage_id for p in a.passages] == [p.passage_id for p in b.passages]
    assert [s.span_id for p in a.passages for s in p.spans] == [
        s.span_id for p in b.passages for s in p.spans
    ]
    assert [m.entity_id for m in a.mentions] == [m.entity_id for m in b.mentions]
    assert a.passages[0].passage_id.startswith("ev1:")


def test_image_only_page_reported(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "scan.pdf"
    pdfgen.make_image_only_pdf(path, text_pages=1)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    assert [p.has_text_layer for p in doc.pages] == [True, False]
    assert any("page 2 has no text layer" in pr for pr in doc.document.problems)
    assert any(text_lost(pr) for pr in doc.document.problems)  # OCR off here: page 2 unread
    only = tmp_path / "only.pdf"
    pdfgen.make_image_only_pdf(only)
    doc2 = extract_file(only, settings=SETTINGS, count_tokens=count)
    assert doc2.passages == [] and doc2.document.passage_count == 0
    assert doc2.document.page_count == 1
    assert any("no text layer" in pr for pr in doc2.document.problems)


def test_document_fields(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "multi.pdf"
    pdfgen.make_multipage_pdf(path, 2)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    d = doc.document
    assert d.kind == "pdf" and d.status == "indexing" and d.version == 1
    assert d.source_key == f"file:{path.resolve()}" and d.source_uri == str(path.resolve())
    assert d.byte_size == path.stat().st_size and d.content_sha256 and d.doc_id.startswith("doc_")
    assert d.passage_count == len(doc.passages)


def test_real_two_column_paper(count: WordPieceCounter) -> None:
    path = shared_eval("pdfs", "academic", "2020.acl-main.447.pdf")
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    assert doc.document.page_count >= 4
    assert all(p.token_count <= SETTINGS.passage_max_tokens for p in doc.passages)
    # page 2: a full-width table on top, then two columns; left column before right column
    t = " ".join(doc.text.split())
    order = [
        "Table 1: A comparison of S2ORC",
        "Yet, existing corpora are not without",
        "Notably, we release structured",
        "In this paper, we describe the construction of",
        "S2ORC is constructed using data from",
    ]
    positions = [t.index(s) for s in order]
    assert positions == sorted(positions)
    (passage,) = [p for p in doc.passages if "Yet, existing corpora" in p.text]
    assert passage.page_start == 1


def test_dot_leaders_and_bookmark_ids_cleaned(tmp_path: Path, count: WordPieceCounter) -> None:
    path = tmp_path / "toc.pdf"
    pdfgen.make_toc_pdf(path)
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    text = doc.text
    assert "....." not in text and ". . . . ." not in text
    for sid in pdfgen.STRUCTURE_IDS:
        assert sid not in text
    assert "It counts contractors, employees and volunteers" in text
    # the table of contents is not indexed, nor its title: no passage has words on its page
    assert not [w for p in doc.passages for w in p.words if w.page_index == 0]
    assert doc.passages[0].heading_path == ["1. Introduction"]
    # a figure table joined by leaders keeps its labels and figures as cells
    for label, num in pdfgen.LEADER_ROWS:
        assert f"{label} | {num}" in text.split("\n")
    # every word that stays has a box around exactly its own characters
    pdf = pymupdf.open(path)
    checked = 0
    for p in doc.passages:
        for w in p.words:
            word = p.text[w.start : w.end]
            assert "." * 5 not in word
            found = pdf[w.page_index].search_for(word)
            assert any(
                max(abs(a - b) for a, b in zip(f, w.rect, strict=True)) < 0.5 for f in found
            ), (word, w.rect, found)
            checked += 1
    pdf.close()
    assert checked > 30


def test_sample_contents_and_bookmark_ids_cleaned(count: WordPieceCounter) -> None:
    path = Path(__file__).parents[1] / "resources" / "samples" / "DOL2022.pdf"
    doc = extract_file(path, settings=SETTINGS, count_tokens=count)
    assert "....." not in doc.text and "_9cdf804c-c003-4ebd-8997-69fb44b7fda2" not in doc.text
    page5 = " ".join(
        p.text
        for p in doc.passages
        if p.page_start is not None and p.page_start <= 4 <= (p.page_end or 0)
    )
    assert "Empowering all workers morning, noon and night." in page5
    # the table of contents (pages 1-4) gives no passage of its own
    assert not any("Workforce Solutions | 4" in p.text for p in doc.passages)


def test_pymupdf_s_layout_model_is_not_loaded_by_sourcebook(tmp_path: Path) -> None:
    """PyMuPDF 2 loads an ONNX layout model on import when it is installed, which Sourcebook
    never uses: a process that renders a PDF page through ``core`` does without it."""
    pdf = tmp_path / "harbor.pdf"
    pdfgen.write_pdf(pdf, ["Northport harbor opened in 1871."])
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from core.render import render_pdf_page\n"
        f"page = render_pdf_page(Path({str(pdf)!r}), 0, 1.0)\n"
        "assert page.samples, 'rendered'\n"
        "print(sys.modules.get('pymupdf.layout'), 'pymupdf.layout.onnx' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["None", "False"]
