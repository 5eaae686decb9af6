"""A report as a Word document (python-docx), for analysts who edit reports in Word.

The document holds what the HTML export holds: the question as the title, the status in words,
the report's headings, paragraphs, lists, tables, bold and italic from its Markdown (parsed by
:mod:`core.export_markdown`, so the same link and image rules apply), each citation ``[n]`` as
an internal link to entry ``n`` of the Sources list, the flagged claims and removed citations,
and the evidence appendix (quote, pages and the highlighted page picture of each passage).

Ordered lists are numbered in the text ("3. ...") rather than by Word's list numbering: the
Sources list must keep the report's numbers, and Word would continue one numbering across
every list in the document.

Threading: pure function of its arguments; runs on the caller's thread.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from docx import Document
from docx.document import Document as DocxDocument
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph
from markdown_it.token import Token

from core.export_evidence import EvidenceEntry, pages_label
from core.export_markdown import parse
from core.research.schemas import Report

logger = logging.getLogger(__name__)

TEXT_WIDTH_PT = 432.0  # 6 inches: the default template's text width
LINK_BLUE = RGBColor(0x1A, 0x4F, 0x9C)


def _bookmark(paragraph: Paragraph, name: str, ident: int) -> None:
    """Mark the whole paragraph as bookmark ``name`` (the target of ``[n]`` links)."""
    start = OxmlElement("w:bookmarkStart")
    start.set(qn("w:id"), str(ident))
    start.set(qn("w:name"), name)
    end = OxmlElement("w:bookmarkEnd")
    end.set(qn("w:id"), str(ident))
    p = paragraph._p
    ppr = p.pPr
    if ppr is not None:
        ppr.addnext(start)
    else:
        p.insert(0, start)
    p.append(end)


def _link(paragraph: Paragraph, text: str, href: str, **style: bool) -> None:
    """A run of ``text`` that links to ``href`` (``#src-n`` -> bookmark ``src_n``)."""
    link = OxmlElement("w:hyperlink")
    if href.startswith("#"):
        link.set(qn("w:anchor"), href[1:].replace("-", "_"))
    else:
        rel = paragraph.part.relate_to(href, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
        link.set(qn("r:id"), rel)
    run = paragraph.add_run(text)
    run.bold = style.get("bold") or None
    run.italic = style.get("italic") or None
    run.font.strike = style.get("strike") or None
    run.font.color.rgb = LINK_BLUE
    run.font.underline = not href.startswith("#")
    link.append(run._r)  # moved from the paragraph into the link
    paragraph._p.append(link)


def _inline(paragraph: Paragraph, children: list[Token]) -> None:
    """Add one inline token stream to ``paragraph`` as runs."""
    style = {"bold": False, "italic": False, "strike": False}
    href: str | None = None
    for tok in children:
        kind = tok.type
        if kind in ("strong_open", "strong_close"):
            style["bold"] = kind == "strong_open"
        elif kind in ("em_open", "em_close"):
            style["italic"] = kind == "em_open"
        elif kind in ("s_open", "s_close"):
            style["strike"] = kind == "s_open"
        elif kind == "link_open":
            href = str(tok.attrGet("href") or "")
        elif kind == "link_close":
            href = None
        elif kind in ("text", "code_inline", "softbreak", "hardbreak"):
            text = " " if kind == "softbreak" else tok.content
            if kind == "hardbreak":
                paragraph.add_run().add_break()
                continue
            if href:
                _link(paragraph, text, href, **style)
                continue
            run = paragraph.add_run(text)
            run.bold = style["bold"] or None
            run.italic = style["italic"] or None
            run.font.strike = style["strike"] or None
            if kind == "code_inline":
                run.font.name = "Courier New"


class _Writer:
    """Walks the block tokens of one report into ``doc`` (one use, one thread)."""

    def __init__(self, doc: DocxDocument) -> None:
        self.doc = doc
        self.lists: list[dict[str, Any]] = []  # open lists: ordered?, next number
        self.item_started = False
        self.quote_depth = 0
        self.bookmarks = 0
        self.table: Any = None
        self.row: list[list[Token]] = []
        self.rows: list[list[list[Token]]] = []

    def paragraph(self, inline: Token, style: str | None = None) -> Paragraph:
        p = self.doc.add_paragraph(style=style)
        _inline(p, inline.children or [])
        return p

    def list_paragraph(self, inline: Token, source: int | None) -> None:
        depth = len(self.lists)
        current = self.lists[-1]
        if self.item_started:  # a later paragraph of the same item: indented, no marker
            p = self.doc.add_paragraph()
            p.paragraph_format.left_indent = Pt(18 * depth)
            _inline(p, inline.children or [])
            return
        self.item_started = True
        if current["ordered"]:
            p = self.doc.add_paragraph()
            p.paragraph_format.left_indent = Pt(18 * depth)
            p.paragraph_format.first_line_indent = Pt(-18)
            p.add_run(f"{current['number']}. ")
            current["number"] += 1
        else:
            p = self.doc.add_paragraph(style="List Bullet" if depth == 1 else "List Bullet 2")
        _inline(p, inline.children or [])
        if source is not None:
            self.bookmarks += 1
            _bookmark(p, f"src_{source}", self.bookmarks)

    def flush_table(self) -> None:
        if not self.rows:
            return
        cols = max(len(r) for r in self.rows)
        table = self.doc.add_table(rows=len(self.rows), cols=cols)
        table.style = "Table Grid"
        for r, row in enumerate(self.rows):
            for c, cell_tokens in enumerate(row):
                cell = table.cell(r, c)
                for inline in cell_tokens:
                    _inline(cell.paragraphs[0], inline.children or [])
                if r == 0:
                    for run in cell.paragraphs[0].runs:
                        run.bold = True
        self.rows = []

    def write(self, tokens: list[Token]) -> None:
        source: int | None = None
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            kind = tok.type
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if kind == "heading_open" and nxt is not None:
                # heading levels were moved down one for HTML (h1 = the question); Word's
                # Title holds the question here, so "# X" is Heading 1 again
                self.paragraph(nxt, f"Heading {max(1, int(tok.tag[1]) - 1)}")
                i += 2
            elif kind in ("bullet_list_open", "ordered_list_open"):
                start = int(tok.attrGet("start") or 1)
                self.lists.append({"ordered": kind == "ordered_list_open", "number": start})
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_open":
                self.item_started = False
                source = (tok.meta or {}).get("source")
                if self.lists and self.lists[-1]["ordered"] and tok.info.isdigit():
                    self.lists[-1]["number"] = int(tok.info)
            elif kind == "paragraph_open" and nxt is not None:
                if self.lists:
                    self.list_paragraph(nxt, source)
                    source = None
                else:
                    self.paragraph(nxt, "Quote" if self.quote_depth else None)
                i += 2
            elif kind in ("blockquote_open", "blockquote_close"):
                self.quote_depth += 1 if kind == "blockquote_open" else -1
            elif kind in ("fence", "code_block"):
                p = self.doc.add_paragraph()
                run = p.add_run(tok.content.rstrip("\n"))
                run.font.name = "Courier New"
            elif kind == "tr_open":
                self.row = []
            elif kind == "tr_close":
                self.rows.append(self.row)
            elif kind in ("th_open", "td_open") and nxt is not None:
                self.row.append([nxt] if nxt.type == "inline" else [])
            elif kind == "table_close":
                self.flush_table()
            i += 1


def _status(doc: DocxDocument, report: Report) -> None:
    p = doc.add_paragraph()
    p.add_run("Status: ").bold = True
    p.add_run(report.status.replace("_", " "))
    for reason in report.status_reasons:
        doc.add_paragraph(reason, style="List Bullet")


def _checks(doc: DocxDocument, report: Report) -> None:
    numbers = {c.evidence_id: c.number for c in report.citations}
    if report.flagged_claims:
        doc.add_heading("Flagged claims", level=1)
        for f in report.flagged_claims:
            p = doc.add_paragraph(style="List Bullet")
            p.add_run("\u26a0 " + f.sentence)
            cited = sorted({numbers[e] for e in f.evidence_ids if e in numbers})
            if cited:
                p.add_run(" " + "".join(f"[{n}]" for n in cited))
            p.add_run(f" \u2014 {f.reason}").italic = True
    if report.removed_citations:
        doc.add_heading("Removed citations", level=1)
        for r in report.removed_citations:
            doc.add_paragraph(f"{r.evidence_id}: {r.reason}", style="List Bullet")


def _evidence(doc: DocxDocument, entries: list[EvidenceEntry]) -> None:
    if not entries:
        return
    doc.add_heading("Evidence", level=1)
    for entry in entries:
        p = doc.add_paragraph()
        p.add_run(f"[{entry.number}] {entry.title}").bold = True
        if entry.pages:
            p.add_run(f" \u2014 {pages_label(entry.pages)}")
        p.add_run(f" \u2014 {entry.source_uri}")
        for passage in entry.passages:
            doc.add_paragraph(passage.quote, style="Quote")
            for image in passage.images:
                width = Pt(min(image.width_pt, TEXT_WIDTH_PT))
                doc.add_picture(io.BytesIO(image.png), width=width)
                doc.add_paragraph(f"Page {image.page}, cited words highlighted.", style="Caption")
            if passage.unavailable:
                doc.add_paragraph(passage.unavailable).runs[0].italic = True


def to_docx(report: Report, entries: list[EvidenceEntry]) -> bytes:
    """The report as .docx bytes (see the module docstring)."""
    doc = Document()
    doc.core_properties.title = report.question[:255]
    doc.core_properties.subject = "Sourcebook research report"
    doc.add_heading(report.question, level=0)
    _status(doc, report)
    _Writer(doc).write(parse(report.markdown))
    _checks(doc, report)
    _evidence(doc, entries)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()
