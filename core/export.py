"""Export a research report: Markdown, self-contained safe HTML, PDF, JSON provenance.

HTML is built by a small converter that escapes every piece of text first and then adds only
the few tags it knows (headings, paragraphs, lists, emphasis, safe links, citation anchors), so
no script, style or event handler from a model or a passage can reach a browser. The PDF is
that HTML laid out by PyMuPDF's ``Story``; it keeps the numbered citations and the Sources list.

The JSON provenance format (version 1) holds exactly: ``status``, ``question``,
``report_markdown``, ``citations`` (each: ``number``, ``evidence_id``, ``title``, ``source_uri``,
``pages`` 1-based, ``boxes``, ``quote``, ``content_sha256`` = sha256 of the UTF-8 quote),
``removed_citations`` and ``flagged_claims`` (each: ``sentence``, ``evidence_ids`` (empty for a
claim that cites nothing), ``reason``). A reader can check each claim by hashing the quote and
finding it on the cited pages of the source.
"""

from __future__ import annotations

import html
import io
import json
import re
from typing import Any, Literal

import pymupdf

from core.research.sanitize import safe_url
from core.research.schemas import Report

ExportFormat = Literal["md", "html", "pdf", "json"]
FORMATS: tuple[ExportFormat, ...] = ("md", "html", "pdf", "json")

_CSS = (
    "body{font-family:sans-serif;max-width:48em;margin:2em auto;line-height:1.45}"
    "h1,h2,h3{line-height:1.2}sup a,a.cite{text-decoration:none}"
    ".status{color:#555;font-size:90%}"
)


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


def _inline(text: str) -> str:
    """Escape, then add emphasis, safe links and citation anchors."""
    out = html.escape(text, quote=True)

    def link(m: re.Match[str]) -> str:
        label, url = m.group(1), html.unescape(m.group(2))
        if not safe_url(url):
            return label
        return f'<a href="{html.escape(url, quote=True)}">{label}</a>'

    out = re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", link, out)
    out = re.sub(
        r"&lt;(https?://[^\s&]+)&gt;",
        lambda m: (
            f'<a href="{html.escape(m.group(1), quote=True)}">{m.group(1)}</a>'
            if safe_url(m.group(1))
            else m.group(1)
        ),
        out,
    )
    out = re.sub(r"\[(\d+)\]", r'<a class="cite" href="#src-\1">[\1]</a>', out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"(?<![*\w])\*([^*\n]+)\*(?![*\w])", r"<em>\1</em>", out)
    return out


def markdown_to_html(markdown: str) -> str:
    """A deliberately small Markdown subset, escaped: headings, lists, paragraphs, tables as
    preformatted text."""
    blocks: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = "ul"
    in_sources = False

    def flush() -> None:
        nonlocal items
        if para:
            blocks.append("<p>" + " ".join(_inline(p) for p in para) + "</p>")
            para.clear()
        if items:
            blocks.append(f"<{list_tag}>" + "".join(items) + f"</{list_tag}>")
            items = []

    for raw in markdown.splitlines():
        line = raw.rstrip()
        if not line.strip():
            flush()
            continue
        h = re.match(r"^(#{1,6})\s+(.*)$", line)
        if h:
            flush()
            level = min(len(h.group(1)) + 1, 6)
            in_sources = h.group(2).strip().lower() == "sources"
            blocks.append(f"<h{level}>{_inline(h.group(2))}</h{level}>")
            continue
        li = re.match(r"^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$", line)
        if li:
            if para:
                flush()
            list_tag = "ol" if li.group(2) else "ul"
            anchor = f' id="src-{li.group(2)}"' if in_sources and li.group(2) else ""
            value = f' value="{li.group(2)}"' if li.group(2) else ""
            items.append(f"<li{anchor}{value}>{_inline(li.group(3))}</li>")
            continue
        if line.lstrip().startswith("|"):
            flush()
            blocks.append(f"<pre>{html.escape(line)}</pre>")
            continue
        if items:
            flush()
        para.append(line.strip())
    flush()
    return "\n".join(blocks)


def to_html(report: Report) -> str:
    title = html.escape(report.question)
    body = markdown_to_html(report.markdown)
    status = html.escape(report.status.replace("_", " "))
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        f"<title>{title}</title><style>{_CSS}</style></head>\n<body>"
        f'<h1>{title}</h1><p class="status">Status: {status}</p>\n{body}\n</body></html>\n'
    )


def to_pdf(report: Report) -> bytes:
    """Lay the report's HTML out on A4 pages with PyMuPDF's Story."""
    body = (
        f"<h1>{html.escape(report.question)}</h1>"
        f"<p>Status: {html.escape(report.status.replace('_', ' '))}</p>"
        + markdown_to_html(report.markdown)
    )
    story = pymupdf.Story(html=body, user_css="body{font-family:sans-serif;font-size:11px}")
    buf = io.BytesIO()
    writer = pymupdf.DocumentWriter(buf)
    page_rect = pymupdf.paper_rect("a4")
    where = pymupdf.Rect(50, 50, page_rect.width - 50, page_rect.height - 50)
    more = 1
    while more:
        device = writer.begin_page(page_rect)
        more, _ = story.place(where)
        story.draw(device)
        writer.end_page()
    writer.close()
    return buf.getvalue()


def export_report(report: Report, fmt: ExportFormat) -> bytes:
    if fmt == "md":
        return report.markdown.encode("utf-8")
    if fmt == "html":
        return to_html(report).encode("utf-8")
    if fmt == "pdf":
        return to_pdf(report)
    if fmt == "json":
        return json.dumps(provenance(report), indent=2, ensure_ascii=False).encode("utf-8")
    raise ValueError(f"unknown export format {fmt!r}")
