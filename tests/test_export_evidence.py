"""HTML and PDF exports carry the evidence: every [n] links to an appendix entry with the quote,
title, page and a highlighted picture of the cited words, cut from the real page; a removed
document leaves its entry without a picture but does not break the export."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from export_fixtures import (
    CITED,
    QUESTION,
    build_library,
    data_uri_png,
    export_app,  # noqa: F401 - fixture
    is_highlight,
    make_report,
    png_pixels,
)
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from core.export import export_report
from core.export_evidence import crop_region, pages_label
from core.research.schemas import Report
from core.service import Sourcebook

HARBOR_TITLE, RAIL_TITLE = "Northport Harbor Report", "Eastline Railway Facts"


def _entries(tree: HTMLParser) -> dict[str, Any]:
    return {n.attributes["id"]: n for n in tree.css("div.evidence div.entry")}


def test_html_citations_link_to_evidence_with_highlighted_pictures(
    export_app: Sourcebook, tmp_path: Path
) -> None:
    report = make_report(export_app)
    out = tmp_path / "r.html"
    export_app.export_report(report, "html", out)
    text = out.read_text(encoding="utf-8")
    tree = HTMLParser(text)

    csp = tree.css_first('meta[http-equiv="Content-Security-Policy"]').attributes["content"] or ""
    assert "default-src 'none'" in csp and "img-src data:" in csp and "script" not in csp
    assert not tree.css("script") and "javascript:" not in text.lower()
    assert tree.css_first("h1").text() == QUESTION  # "&" escaped, read back as itself

    entries = _entries(tree)
    assert set(entries) == {"src-1", "src-2", "src-3"}
    cites = tree.css("a.cite")
    assert {c.text() for c in cites} >= {"[1]", "[2]", "[3]"}
    for link in cites:  # every [n] lands on an entry that exists
        href = link.attributes["href"] or ""
        assert href.startswith("#") and href[1:] in entries, href
        assert link.text() == f"[{href.removeprefix('#src-')}]"
    # the Sources list is still there, under its own ids
    assert tree.css_first("li#source-1") is not None and "Sources" in text

    harbor, rail, note = entries["src-1"], entries["src-2"], entries["src-3"]
    assert HARBOR_TITLE in harbor.text() and "pp. 1\u20132" in harbor.text()
    assert "Page 1, the cited" in harbor.text() and "Page 2, the cited" in harbor.text()
    assert {q.text() for q in harbor.css("blockquote")} == {
        "handled 4,200 ships in 2019",
        "founded in 1921 by Mayor Ellen Park",
    }
    assert RAIL_TITLE in rail.text() and "The Eastline railway opened in 1887" in rail.text()
    assert "ferry-notes" in note.text()
    assert "The ferry terminal at Northport reopened in 2021" in note.text()
    assert not note.css("img") and "unavailable" not in note.text()  # a text passage: quote only

    pictures = harbor.css("img") + rail.css("img")
    assert len(pictures) == 3  # one per PDF passage (each on one page)
    for img in pictures:
        png = data_uri_png(img.attributes["src"] or "")
        assert len(png) < 120_000  # small
        width, height, pixels = png_pixels(png)
        assert 400 < width < 1300 and 60 < height < 900  # a crop at a readable zoom, not a page
        marked = sum(map(is_highlight, pixels))
        dark = sum(1 for r, g, b in pixels if r + g + b < 200)
        assert marked > 1500, marked  # the cited words are painted
        assert dark > 200  # and the text is still there to read
        assert "highlighted" in (img.attributes["alt"] or "")


def test_html_stays_inert_with_hostile_markdown(export_app: Sourcebook) -> None:
    body = (
        "# Findings <script>alert(1)</script>\n\nShips [1]. <img src=x onerror=alert(1)>"
        ' [click](javascript:alert(1)) ![p](http://example.org/x.png) <a href="x" onclick="y">a</a>'
        " [ok](https://www.nara.gov/x) [data](data:text/html,hi)\n\n"
    )
    text = export_app.export_report(make_report(export_app, body), "html").decode()
    tree = HTMLParser(text)
    assert not tree.css("script") and not tree.css("iframe") and not tree.css("style")[1:]
    for node in tree.css("*"):
        for name, value in node.attributes.items():
            assert not name.lower().startswith("on"), (node.tag, name)
            if name in ("href", "src"):
                v = (value or "").lower()
                assert v.startswith(("#src-", "https://", "data:image/png;base64,")), v
    assert [a.attributes["href"] for a in tree.css("a:not(.cite)")] == ["https://www.nara.gov/x"]
    assert all((i.attributes["src"] or "").startswith("data:image/png") for i in tree.css("img"))
    assert "&lt;script&gt;" in text  # shown as text, not run


def test_pdf_appendix_has_quotes_pages_pictures_and_links(
    export_app: Sourcebook, tmp_path: Path
) -> None:
    out = tmp_path / "r.pdf"
    export_app.export_report(make_report(export_app), "pdf", out)
    with pymupdf.open(out) as doc:
        texts = [page.get_text() for page in doc]
        appendix_at = next(i for i, t in enumerate(texts) if "Evidence" in t and "[1]" in t)
        appendix = " ".join(" ".join(t.split()) for t in texts[appendix_at:])
        for _words, cited in CITED:
            assert cited in appendix, cited
        assert HARBOR_TITLE in appendix and RAIL_TITLE in appendix and "p. 1" in appendix
        images = [img for page in doc for img in page.get_images(full=True)]
        assert len(images) >= 3
        # [n] in the body is a link to a later page (the appendix)
        gotos = [link for link in doc[0].get_links() if link.get("kind") == pymupdf.LINK_GOTO]
        assert gotos and all(link["page"] >= appendix_at for link in gotos)


def test_export_survives_a_removed_document(tmp_path: Path, embedder: Any) -> None:
    app = build_library(tmp_path, embedder)
    try:
        report = make_report(app)
        harbor_id = next(c.doc_id for c in report.citations if c.number == 1)
        app.remove(harbor_id)
        html = app.export_report(report, "html").decode()
        entries = _entries(HTMLParser(html))
        harbor = entries["src-1"]
        assert "Page image unavailable" in harbor.text() and not harbor.css("img")
        assert "handled 4,200 ships in 2019" in harbor.text() and HARBOR_TITLE in harbor.text()
        assert entries["src-2"].css("img")  # the other documents keep their pictures
        pdf = app.export_report(report, "pdf")
        with pymupdf.open(stream=pdf, filetype="pdf") as doc:
            text = " ".join(" ".join(page.get_text().split()) for page in doc)
        assert "Page image unavailable" in text and "handled 4,200 ships in 2019" in text
        assert app.export_report(report, "docx").startswith(b"PK")
        bib = app.export_report(report, "bib").decode()
        assert bib.count("@misc{") == 3 and "no longer in the library" in bib
    finally:
        app.close()


def test_without_a_renderer_entries_say_why() -> None:
    report = Report.model_validate_json(
        '{"task": "t", "question": "q", "status": "answered", "markdown": "A [1].",'
        ' "citations": [{"number": 1, "evidence_id": "ev1:00", "doc_id": "doc_1", "title": "T",'
        ' "source_uri": "/x.pdf", "pages": [2], "quote": "Q", "content_sha256": "0",'
        ' "boxes": [{"page_index": 1, "start": 0, "end": 1, "rect": [1, 2, 3, 4]}]}]}'
    )
    tree = HTMLParser(export_report(report, "html").decode())
    entry = tree.css_first("div#src-1")
    assert entry is not None and "Page image unavailable" in entry.text() and "p. 2" in entry.text()


@pytest.mark.parametrize(
    ("rects", "expect"),
    [
        ([(100, 100, 140, 112)], (0, 84, 260, 128)),  # one word: widened, kept on the page
        ([(72, 100, 540, 112), (72, 114, 300, 126)], (48, 84, 564, 142)),  # margins
        ([(72, 10, 540, 700)], (48, 0, 564, 414)),  # tall: cut to its first 420 points
    ],
)
def test_crop_region(
    rects: list[tuple[float, float, float, float]], expect: tuple[float, ...]
) -> None:
    assert crop_region(rects, 612, 792) == pytest.approx(expect)


def test_pages_label() -> None:
    assert pages_label([3]) == "p. 3"
    assert pages_label([5, 3, 4, 9]) == "pp. 3\u20135, 9"
    assert pages_label([]) == ""
    assert re.fullmatch(r"pp\. 1, 3", pages_label([1, 3]))


def test_crop_keeps_to_the_column_and_whole_words(tmp_path: Path) -> None:
    """On a real two-column page, a citation spanning lines of the left column is cut out with
    its lines whole and without the right column."""
    from pdfgen import make_two_column_pdf

    from core.export_evidence import highlighted_crop
    from core.render import render_pdf_page

    pdf = tmp_path / "two.pdf"
    make_two_column_pdf(pdf)
    with pymupdf.open(pdf) as doc:
        words = [w for w in doc[0].get_text("words") if w[0] < 300][40:62]
    image = highlighted_crop(render_pdf_page(pdf, 0, 2.0), [tuple(w[:4]) for w in words])
    left_column = (50, 296)  # pdfgen's left text box; the right one starts at 316
    assert left_column[1] - left_column[0] - 10 < image.width_pt < 316 - 50 + 2 * 24
    assert 3 * 11 < image.height_pt < 8 * 14  # the cited lines and one line around them
    _w, _h, pixels = png_pixels(image.png)
    assert sum(map(is_highlight, pixels)) > 5000
