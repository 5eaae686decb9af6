"""A small real library and a report whose citations point at real word boxes, for the export
tests: two PDFs made with PyMuPDF (harbor, rail) and one plain-text note (a passage without
boxes). The report is built the way a run builds it: span evidence from the library, records
from ``citation_records``, the Sources list from ``sources_section``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from research_fixtures import HARBOR, RAIL, _pdf

from core.research.citations import citation_records
from core.research.sanitize import sources_section
from core.research.schemas import FlaggedClaim, Report
from core.service import Sourcebook

NOTE = "Field notes. The ferry terminal at Northport reopened in 2021 after repairs."

#: (words of a passage, the cited words inside it) in order of first citation
CITED = [
    ("4,200 ships", "handled 4,200 ships in 2019"),
    ("Ellen Park", "founded in 1921 by Mayor Ellen Park"),
    ("opened in 1887", "The Eastline railway opened in 1887"),
    ("ferry terminal", "The ferry terminal at Northport reopened in 2021"),
]
QUESTION = "What do the sources say about Northport's harbor & railway?"


def build_library(root: Path, embedder: Any) -> Sourcebook:
    app = Sourcebook(root / "home", embedder=embedder)
    harbor = _pdf(root / "harbor.pdf", "Northport Harbor Report", HARBOR)
    with pymupdf.open(harbor) as doc:  # a creation date, as most published PDFs have
        doc.set_metadata({"title": "Northport Harbor Report", "creationDate": "D:20190315"})
        doc.saveIncr()
    rail = _pdf(root / "rail.pdf", "Eastline Railway Facts", RAIL)
    note = root / "ferry-notes.txt"
    note.write_text(NOTE, encoding="utf-8")
    changes = app.add([harbor, rail, note])
    assert not changes.failed, changes.failed
    return app


@pytest.fixture(scope="module")
def export_app(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Sourcebook]:
    app = build_library(tmp_path_factory.mktemp("export"), embedder)
    yield app
    app.close()


def span_of(app: Sourcebook, passage_words: str, cited: str) -> str:
    """The span evidence id of ``cited`` inside the passage holding ``passage_words``."""
    for doc in app.documents():
        for p in app.library.store.get_document_passages(doc.doc_id):
            if passage_words in p.text:
                start = p.text.index(cited)
                return f"{p.passage_id}#{start}-{start + len(cited)}"
    raise AssertionError(f"no passage holds {passage_words!r}")


def make_report(
    app: Sourcebook,
    markdown_body: str | None = None,
    cited_words: list[tuple[str, str]] = CITED,
) -> Report:
    """Harbor [1] (two passages), rail [2], the text note [3]; one flagged claim."""
    evidence = {}
    for words, cited in cited_words:
        ev_id = span_of(app, words, cited)
        evidence[ev_id] = app.evidence(ev_id)
    doc_numbers: dict[str, int] = {}
    numbers = {}
    for ev_id, ev in evidence.items():
        numbers[ev_id] = doc_numbers.setdefault(ev.doc_id, len(doc_numbers) + 1)
    records = citation_records(evidence, numbers, app.document)
    body = markdown_body or (
        "# Findings\n\n"
        "**Answer:** the harbor handled *4,200 ships* in 2019 [1], the railway is older [2].\n\n"
        "The Harbor Authority dates from 1921 [1]. The Eastline line opened in 1887 [2].\n\n"
        "- The ferry terminal reopened in 2021 [3].\n"
        "- The port is _busy_ [1][2].\n\n"
        "| Fact | Year |\n| --- | ---: |\n| Railway | 1887 |\n\n"
    )
    return Report(
        task="export-test",
        question=QUESTION,
        status="partial",
        status_reasons=["One claim is not supported by its citations."],
        markdown=body + sources_section(records),
        citations=records,
        flagged_claims=[
            FlaggedClaim(
                sentence="The port is busy.",
                evidence_ids=[next(iter(evidence))],
                reason="its citations do not state it",
            )
        ],
    )


def png_pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode a PNG with PyMuPDF: (width, height, RGB pixels)."""
    pix = pymupdf.Pixmap(png)
    if pix.alpha or pix.n != 3:
        pix = pymupdf.Pixmap(pymupdf.csRGB, pix, 0)
    data = pix.samples
    pixels = [
        (data[i], data[i + 1], data[i + 2])
        for row in range(pix.height)
        for i in range(row * pix.stride, row * pix.stride + pix.width * 3, 3)
    ]
    return pix.width, pix.height, pixels


def is_highlight(rgb: tuple[int, int, int]) -> bool:
    """The highlighter colour over paper (see ``core.export_evidence.HIGHLIGHT_RGB``)."""
    r, g, b = rgb
    return r > 235 and 190 < g < 235 and b < 110


def data_uri_png(src: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    png = base64.b64decode(src[len(prefix) :], validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return png
