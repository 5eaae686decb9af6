"""Export a research report: Markdown, HTML, PDF, DOCX, JSON provenance, BibTeX, CSL-JSON.

HTML, PDF and DOCX carry an evidence appendix: each citation ``[n]`` links to entry ``n``, which
holds every cited passage's quote, the document's title, pages and source, and a picture of the
page region with the cited words highlighted (:mod:`core.export_evidence`), so a reader without
Sourcebook can check each claim. The pictures need the library, which this module never
touches: the caller passes ``render_page`` (the service passes its own). Without it, or for a
document that is gone, an entry keeps its quote and says that the page image is unavailable.

The HTML is one self-contained, inert file: the Markdown is parsed by markdown-it-py with raw
HTML off and sanitised by nh3 (:mod:`core.export_markdown`), every other piece of text is
escaped here, the pictures are inline ``data:`` PNGs, and a Content-Security-Policy allows
nothing but inline styles and ``data:`` images (no script, no remote load). The PDF is the same
HTML laid out by PyMuPDF's ``Story``, with the pictures embedded and ``[n]`` as PDF links.
DOCX is :mod:`core.export_docx`; BibTeX and CSL-JSON of the cited documents
:mod:`core.export_refs`.

The JSON provenance format (version 1) holds exactly: ``status``, ``question``,
``report_markdown``, ``citations`` (each: ``number``, ``evidence_id``, ``title``, ``source_uri``,
``pages`` 1-based, ``boxes``, ``quote``, ``content_sha256`` = sha256 of the UTF-8 quote),
``removed_citations`` and ``flagged_claims`` (each: ``sentence``, ``evidence_ids`` (empty for a
claim that cites nothing), ``reason``). A reader can check each claim by hashing the quote and
finding it on the cited pages of the source.

Threading: runs on the caller's thread (a worker: page pictures cost tens of ms each).
"""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pymupdf

from core.errors import ConfigError, SourcebookError
from core.export_evidence import (
    EvidenceEntry,
    EvidenceImage,
    PageRenderer,
    evidence_entries,
    pages_label,
)
from core.export_markdown import markdown_to_html
from core.export_refs import SourceInfoFn, source_refs, to_bibtex, to_csl_json
from core.research.sanitize import safe_url
from core.research.schemas import Report

logger = logging.getLogger(__name__)

ExportFormat = Literal["md", "html", "pdf", "docx", "json", "bib", "csl"]
FORMATS: tuple[ExportFormat, ...] = ("md", "html", "pdf", "docx", "json", "bib", "csl")
#: The file suffix each format is written with (CSL-JSON: ``.json``; see :func:`format_for`).
SUFFIXES: dict[ExportFormat, str] = {
    "md": ".md",
    "html": ".html",
    "pdf": ".pdf",
    "docx": ".docx",
    "json": ".json",
    "bib": ".bib",
    "csl": ".json",
}
BINARY_FORMATS: frozenset[ExportFormat] = frozenset({"pdf", "docx"})

_CSS = (
    "body{font-family:sans-serif;max-width:48em;margin:2em auto;line-height:1.45}"
    "h1,h2,h3{line-height:1.2}sup a,a.cite{text-decoration:none}"
    ".status{color:#555;font-size:90%}"
    "blockquote{margin:.4em 0 .4em 1em;padding-left:.8em;border-left:3px solid #ccc}"
    ".evidence img{max-width:100%;height:auto;border:1px solid #bbb}"
    ".caption,.unavailable{color:#555;font-size:85%}.unavailable{font-style:italic}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .4em}"
)
_PDF_CSS = (
    "body{font-family:sans-serif;font-size:11px}"
    "blockquote{margin-left:12px;color:#333}.caption,.unavailable{font-size:9px;color:#555}"
)
_PDF_TEXT_WIDTH = 495.0  # A4 minus the 50 pt margins


def format_for(path: Path, fmt: str | None = None) -> ExportFormat | None:
    """The format named by ``fmt``, else by ``path``'s suffix (``.csl.json`` is CSL-JSON,
    another ``.json`` the provenance file); ``None`` when neither tells."""
    if fmt:
        chosen = fmt.lower()
    elif path.name.lower().endswith((".csl.json", ".csljson")):
        chosen = "csl"
    else:
        chosen = path.suffix.lstrip(".").lower()
    chosen = {"markdown": "md", "htm": "html", "bibtex": "bib"}.get(chosen, chosen)
    for known in FORMATS:
        if known == chosen:
            return known
    return None


def check_out(path: Path) -> None:
    """Refuse, before any work, a path no report can be written to: a folder, or a file in a
    folder that does not exist (a research run would otherwise end in an error after minutes)."""
    if path.is_dir():
        raise ConfigError(f"{path} is a folder.", hint="Give a file name, e.g. report.md.")
    if not path.parent.is_dir():
        raise ConfigError(
            f"Cannot write {path}: the folder {path.parent} does not exist.",
            hint="Create the folder, or choose another file.",
        )


def write_out(path: Path, data: bytes) -> None:
    """``data`` written to ``path`` (checked with :func:`check_out` before the report was made),
    or a clear error saying why not."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise SourcebookError(
            f"Could not write {path}: {exc.strerror or exc}.",
            hint="Choose a file in a folder you can write to.",
        ) from exc


def provenance(report: Report) -> dict[str, Any]:
    """The JSON provenance document (see the module docstring)."""
    return {
        "status": report.status,
        "question": report.question,
        "report_markdown": report.markdown,
        "citations": [
            {
                "number": c.number,
                "evidence_id": c.evidence_id,
                "title": c.title,
                "source_uri": c.source_uri,
                "pages": c.pages,
                "boxes": [
                    {"page": w.page_index + 1, "rect": list(w.rect), "start": w.start, "end": w.end}
                    for w in c.boxes
                ],
                "quote": c.quote,
                "content_sha256": c.content_sha256,
            }
            for c in report.citations
        ],
        "removed_citations": [r.model_dump() for r in report.removed_citations],
        "flagged_claims": [f.model_dump() for f in report.flagged_claims],
    }


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _source_html(uri: str) -> str:
    if safe_url(uri):
        return f'<a href="{_esc(uri)}">{_esc(uri)}</a>'
    return _esc(uri)


def _head_html(report: Report) -> str:
    status = _esc(report.status.replace("_", " "))
    out = f'<h1>{_esc(report.question)}</h1>\n<p class="status">Status: {status}</p>\n'
    if report.status_reasons:
        items = "".join(f"<li>{_esc(r)}</li>" for r in report.status_reasons)
        out += f'<ul class="status">{items}</ul>\n'
    return out


def _checks_html(report: Report, mark: str) -> str:
    """The flagged claims and removed citations, as the report view shows them (each flagged
    claim after ``mark``)."""
    numbers = {c.evidence_id: c.number for c in report.citations}
    out = ""
    if report.flagged_claims:
        items = []
        for f in report.flagged_claims:
            cited = sorted({numbers[e] for e in f.evidence_ids if e in numbers})
            links = "".join(f'<a class="cite" href="#src-{n}">[{n}]</a>' for n in cited)
            items.append(
                f"<li>{mark}{_esc(f.sentence)} {links} <em>\u2014 {_esc(f.reason)}</em></li>"
            )
        out += '<h2>Flagged claims</h2>\n<ul class="flagged">' + "".join(items) + "</ul>\n"
    if report.removed_citations:
        items = [
            f"<li>{_esc(r.evidence_id)}: {_esc(r.reason)}</li>" for r in report.removed_citations
        ]
        out += '<h2>Removed citations</h2>\n<ul class="removed">' + "".join(items) + "</ul>\n"
    return out


def _evidence_html(
    entries: list[EvidenceEntry], image_src: Callable[[EvidenceImage], str], max_width: float
) -> str:
    """The evidence appendix: one ``id="src-n"`` block per citation number."""
    if not entries:
        return ""
    blocks = ['<h2 id="evidence">Evidence</h2>\n<div class="evidence">']
    for e in entries:
        head = f"<strong>[{e.number}]</strong> {_esc(e.title)}"
        if e.pages:
            head += f" \u2014 {_esc(pages_label(e.pages))}"
        head += f" \u2014 {_source_html(e.source_uri)}"
        if e.superseded:
            head += " \u2014 superseded version"
        parts = [f'<div class="entry" id="src-{e.number}">\n<p class="ref">{head}</p>']
        for p in e.passages:
            parts.append(f"<blockquote>{_esc(p.quote)}</blockquote>")
            for img in p.images:
                width = round(min(img.width_pt, max_width))
                alt = f"Page {img.page} of {e.title}, the cited words highlighted"
                parts.append(
                    f'<p><img src="{_esc(image_src(img))}" width="{width}" alt="{_esc(alt)}"></p>'
                    f'<p class="caption">Page {img.page}, the cited words highlighted.</p>'
                )
            if not p.images and p.pages:
                parts.append(f'<p class="caption">{_esc(pages_label(p.pages))}</p>')
            if p.unavailable:
                parts.append(f'<p class="unavailable">{_esc(p.unavailable)}</p>')
        parts.append("</div>")
        blocks.append("\n".join(parts))
    blocks.append("</div>")
    return "\n".join(blocks) + "\n"


def _body_html(
    report: Report,
    entries: list[EvidenceEntry],
    image_src: Callable[[EvidenceImage], str],
    max_width: float,
    flag_mark: str,
) -> str:
    # with an appendix, "#src-n" is the evidence entry and the Sources items get other ids
    body = markdown_to_html(report.markdown, source_ids="source-" if entries else "src-")
    return (
        _head_html(report)
        + body
        + "\n"
        + _checks_html(report, flag_mark)
        + _evidence_html(entries, image_src, max_width)
    )


def _data_uri(img: EvidenceImage) -> str:
    return "data:image/png;base64," + base64.b64encode(img.png).decode("ascii")


def to_html(report: Report, entries: list[EvidenceEntry] | None = None) -> str:
    """The report as one self-contained, inert HTML file (see the module docstring)."""
    body = _body_html(report, entries or [], _data_uri, 640.0, "\u26a0 ")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_esc(report.question)}</title><style>{_CSS}</style></head>\n<body>\n"
        f"{body}</body></html>\n"
    )


def to_pdf(report: Report, entries: list[EvidenceEntry] | None = None) -> bytes:
    """Lay the report's HTML out on A4 pages with PyMuPDF's Story, pictures embedded and
    ``[n]`` linked to its appendix entry."""
    archive = pymupdf.Archive()
    names: dict[int, str] = {}

    def image_src(img: EvidenceImage) -> str:
        key = id(img)
        if key not in names:
            names[key] = f"evidence-{len(names) + 1}.png"
            archive.add(img.png, names[key])
        return names[key]

    # no warning sign in the PDF: it would embed a symbol font of ~300 KB for one glyph
    body = _body_html(report, entries or [], image_src, _PDF_TEXT_WIDTH, "")
    story = pymupdf.Story(html=body, user_css=_PDF_CSS, archive=archive)
    page_rect = pymupdf.paper_rect("a4")
    where = pymupdf.Rect(50, 50, page_rect.width - 50, page_rect.height - 50)

    def rectfn(_num: int, _filled: Any) -> tuple[Any, Any, Any]:
        return page_rect, where, None

    doc = story.write_with_links(rectfn)
    doc.set_metadata({"title": report.question, "subject": "Sourcebook research report"})
    data: bytes = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    return data


def export_report(
    report: Report,
    fmt: ExportFormat,
    *,
    render_page: PageRenderer | None = None,
    source_info: SourceInfoFn | None = None,
) -> bytes:
    """The report as ``fmt`` bytes. ``render_page`` draws the evidence pictures (html, pdf,
    docx) and ``source_info`` tells years and access dates (bib, csl); both may be omitted."""
    if fmt == "md":
        return report.markdown.encode("utf-8")
    if fmt == "json":
        return json.dumps(provenance(report), indent=2, ensure_ascii=False).encode("utf-8")
    if fmt == "bib":
        return to_bibtex(source_refs(report, source_info)).encode("utf-8")
    if fmt == "csl":
        return to_csl_json(source_refs(report, source_info)).encode("utf-8")
    if fmt in ("html", "pdf", "docx"):
        entries = evidence_entries(report, render_page)
        if fmt == "html":
            return to_html(report, entries).encode("utf-8")
        if fmt == "pdf":
            return to_pdf(report, entries)
        from core.export_docx import to_docx  # python-docx (lxml) loads only when asked for

        return to_docx(report, entries)
    raise ValueError(f"unknown export format {fmt!r}")
