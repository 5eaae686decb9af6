"""PDF reading with PyMuPDF: words with boxes, reading order, headings, table rows.

A file is opened by :mod:`core.ingest.pdfrepair` (which recovers what it can of a damaged or
cut-short file) and its pages are read by :mod:`core.ingest.pdfpage`: words with their boxes,
cleaned of extraction artefacts (:mod:`core.ingest.pdfclean`), each tied to its line's font
size and weight, and lines cut into *segments* at wide gaps (table cells). Segments are then
ordered:

- a page is read as two columns when a vertical gutter near the middle has prose on both sides
  (many wide, long lines left and right); segments crossing the gutter (titles, full-width
  figures, footers) cut the page into bands read top to bottom, each band left column first;
- tables are never taken for columns: their cells are short, so the prose test fails, and their
  cells on one baseline become one row ``cell | cell | cell``;
- headings are lines larger than the document's body text, or bold body-size lines standing
  alone; their levels come from the heading styles found in the whole document;
- a block made only of table-of-contents entries (a title, a dot leader, a page number) is
  left out (see :meth:`_Builder.is_toc`).

``page.find_tables()`` was measured at ~1.7 s per page on the FinanceBench filings (vs ~11 ms per
page for everything here), so table rows are rebuilt from word lines instead.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import CorruptFileError, EncryptedFileError, FileTooLargeError
from core.ingest.chunking import Block, WordBox
from core.ingest.ocr import OcrBlock, OcrPage, OcrPageError, OcrProgress, ocr_engine
from core.ingest.pdfclean import toc_page
from core.ingest.pdfpage import CURRENCY, PageData, Seg, read_pages
from core.ingest.pdfrepair import cut_short, key_lost, open_pdf, page_ranges, unreadable_message
from core.ingest.titles import sec_cover_title
from core.settings import IngestSettings
from graph.schemas import Page

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Row:
    segs: list[Seg]
    y0: float
    y1: float
    size: float = 0.0
    bold: bool = False
    seps: list[str] = field(default_factory=list)  # separator before each seg (first: "")

    @property
    def is_table(self) -> bool:
        return " | " in self.seps

    def toc_page(self) -> str | None:
        """The page number if this row is a table-of-contents entry (see ``pdfclean``)."""
        last = self.segs[-1]
        words = [w for seg in self.segs for w in seg.words]
        return toc_page(words, len(last.words) - 1 in last.after_leader)


@dataclass(slots=True)
class PdfContent:
    """What :func:`read_pdf` found: blocks in reading order, pages, title, problems."""

    blocks: list[Block]
    pages: list[Page]
    title: str | None
    problems: list[str]


# ---------------------------------------------------------------- reading order


def _find_gutter(segs: list[Seg], width: float) -> float | None:
    """The x of a two-column gutter, or None when the page is not two prose columns."""
    if len(segs) < 8:
        return None
    lo, hi = int(width * 0.3), int(width * 0.7)
    if hi - lo < 10:
        return None
    diff = [0] * (hi - lo + 2)
    for s in segs:
        a, b = int(s.x0) + 1, int(s.x1)
        if b < lo or a > hi:
            continue
        diff[max(a, lo) - lo] += 1
        diff[min(b, hi) - lo + 1] -= 1
    best_n, best_run, run_start, best_x = 1 << 30, 0, -1, None
    acc = 0
    cover: list[int] = []
    for i in range(hi - lo + 1):
        acc += diff[i]
        cover.append(acc)
    min_n = min(cover)
    for i, n in enumerate([*cover, 1 << 30]):
        if n == min_n:
            if run_start < 0:
                run_start = i
        elif run_start >= 0:
            if i - run_start > best_run:
                best_run, best_n = i - run_start, n
                best_x = lo + (run_start + i - 1) / 2
            run_start = -1
    del best_n
    if best_x is None:
        return None
    g = best_x
    left = [s for s in segs if s.x1 <= g]
    right = [s for s in segs if s.x0 >= g]
    if len(left) < 4 or len(right) < 4:
        return None
    if min_n > 0.25 * (len(left) + len(right)):
        return None
    for side, lo_x, hi_x in (
        (left, min(s.x0 for s in left), g),
        (right, g, max(s.x1 for s in right)),
    ):
        extent = hi_x - lo_x
        widths = sorted(s.width for s in side)
        if widths[len(widths) // 2] < 0.5 * extent:
            return None  # not prose: cells or labels
        if sum(s.nchars() for s in side) / len(side) < 20:
            return None
    return g


def _rows(segs: list[Seg]) -> list[_Row]:
    """Group segments of one region into visual rows, top to bottom, cells left to right."""
    rows: list[_Row] = []
    for s in sorted(segs, key=lambda s: (s.y0, s.x0)):
        if rows:
            r = rows[-1]
            overlap = min(r.y1, s.y1) - max(r.y0, s.y0)
            if overlap >= 0.5 * min(s.height, r.y1 - r.y0):
                r.segs.append(s)
                r.y0, r.y1 = min(r.y0, s.y0), max(r.y1, s.y1)
                continue
        rows.append(_Row([s], s.y0, s.y1))
    for r in rows:
        r.segs.sort(key=lambda s: s.x0)
        r.seps = [""]
        for a, b in zip(r.segs, r.segs[1:], strict=False):
            wide = b.x0 - a.x1 > max(a.size, b.size, 4.0)
            r.seps.append(" | " if wide and a.words[-1][4] not in CURRENCY else " ")
        r.size = max(s.size for s in r.segs)
        r.bold = all(s.bold for s in r.segs)
    return rows


def _ordered_regions(page: PageData) -> list[list[_Row]]:
    """Rows of the page in reading order, as regions (a region switch ends a paragraph)."""
    horiz = [s for s in page.segs if not s.vertical]
    vert = [s for s in page.segs if s.vertical]
    regions: list[list[_Row]] = []
    g = _find_gutter(horiz, page.width)
    if g is None:
        regions.append(_rows(horiz))
    else:
        band: list[Seg] = []
        spanning: list[Seg] = []

        def flush() -> None:
            if band:
                regions.append(_rows([s for s in band if s.x1 <= g]))
                regions.append(_rows([s for s in band if s.x0 >= g]))
                band.clear()
            if spanning:
                regions.append(_rows(spanning))
                spanning.clear()

        for s in sorted(horiz, key=lambda s: s.y0):
            if s.x1 <= g or s.x0 >= g:
                if spanning:
                    flush()
                band.append(s)
            else:
                if band:
                    flush()
                spanning.append(s)
        flush()
    if vert:
        regions.append([_Row([s], s.y0, s.y1, s.size, s.bold, [""]) for s in vert])
    return [r for r in regions if r]


# ---------------------------------------------------------------- headings and blocks


def _body_size(pages: list[PageData]) -> float:
    counts: Counter[float] = Counter()
    for p in pages:
        for s in p.segs:
            counts[round(s.size * 2) / 2] += s.nchars()
    return counts.most_common(1)[0][0] if counts else 10.0


def _heading_style(row: _Row, text: str, body: float, isolated: bool) -> tuple[float, bool] | None:
    """The (size, bold) style key if ``row`` looks like a heading, else None."""
    if row.is_table or len(text) > 160 or sum(c.isalpha() for c in text) < 2:
        return None
    if text.endswith((",", ";", ":")):
        return None
    size = round(row.size * 2) / 2
    if size >= body * 1.15:
        return (size, row.bold)
    if row.bold and size >= body * 0.9 and isolated:
        if text.endswith(".") and len(text.split()) > 8:
            return None
        return (size, True)
    return None


@dataclass(slots=True)
class _Builder:
    """Accumulates one block's text and word boxes."""

    kind: str
    page: int
    style: tuple[float, bool] | None = None
    parts: list[str] = field(default_factory=list)
    words: list[WordBox] = field(default_factory=list)
    length: int = 0
    rows: int = 0
    last_y1: float = 0.0
    toc: list[str | None] = field(default_factory=list)  # each row's TOC page number, if any

    def add_row(self, row: _Row, sep: str) -> None:
        self.toc.append(row.toc_page())
        if self.rows:
            self._put(sep)
        for seg, seg_sep in zip(row.segs, row.seps, strict=True):
            if seg_sep:
                self._put(seg_sep)
            for k, (x0, y0, x1, y1, t) in enumerate(seg.words):
                if k:
                    self._put(" ")
                self.words.append((self.page, x0, y0, x1, y1, self.length, self.length + len(t)))
                self._put(t)
        self.rows += 1
        self.last_y1 = row.y1

    def _put(self, s: str) -> None:
        self.parts.append(s)
        self.length += len(s)

    def text(self) -> str:
        return "".join(self.parts)

    def is_toc(self) -> bool:
        """Whether the block holds only table-of-contents entries.

        Every row ends with a page number after a dot leader, except the first lines of an
        entry whose title wraps (at most two in a row), and the page numbers never go down: a
        column of figures after leaders in a table does not read like that.
        """
        if len(self.toc) != self.rows or not self.toc or self.toc[-1] is None:
            return False
        run = 0
        for page in self.toc:
            run = run + 1 if page is None else 0
            if run > 2:
                return False
        numbers = [int(p) for p in self.toc if p is not None and p.isdigit()]
        return numbers == sorted(numbers)


def _row_text(row: _Row) -> str:
    return "".join(
        sep + " ".join(w[4] for w in seg.words) for seg, sep in zip(row.segs, row.seps, strict=True)
    )


def _page_blocks(page: PageData, body: float) -> list[_Builder]:
    out: list[_Builder] = []
    for region in _ordered_regions(page):
        cur: _Builder | None = None
        prev: _Row | None = None
        for row in region:
            text = _row_text(row)
            height = max(row.y1 - row.y0, 1.0)
            gap = row.y0 - prev.y1 if prev is not None else 1e9
            isolated = prev is None or gap > 0.3 * height or not prev.bold
            style = _heading_style(row, text, body, isolated)
            kind = "table" if row.is_table else ("heading" if style else "paragraph")
            sep = " "
            joinable = False
            if cur is not None and cur.kind == kind and prev is not None:
                if kind == "table":
                    joinable = gap < 2.5 * height
                    sep = "\n"
                elif kind == "heading":
                    joinable = cur.style == style and gap < 0.8 * height and cur.rows < 3
                else:
                    joinable = gap < 0.6 * height and not text.startswith(("•", "◦", "▪", "●"))
                    prev_text = cur.parts[-1] if cur.parts else ""
                    if (
                        joinable
                        and prev_text.endswith("-")
                        and len(prev_text) > 1
                        and prev_text[-2].isalpha()
                        and text[:1].islower()
                    ):
                        sep = ""
            if not joinable:
                cur = _Builder(kind, page.index, style)
                out.append(cur)
            assert cur is not None
            cur.add_row(row, sep)
            prev = row
    # a table of contents is not evidence: as a search hit it only repeats a heading and a
    # page number. Its blocks go before chunking, so passage ordinals (and the evidence ids
    # made from them) stay dense, and the catalog and the index hold the same passages. The
    # heading right above it is its title, which would otherwise head the passages after it.
    kept: list[_Builder] = []
    last_kept = False  # whether the block just before was kept
    for b in _fix_table_labels(out):
        if not b.is_toc():
            kept.append(b)
            last_kept = True
            continue
        if last_kept and kept[-1].kind == "heading":
            kept.pop()
        last_kept = False
    return kept


def _fix_table_labels(blocks: list[_Builder]) -> list[_Builder]:
    """A 'heading' or short paragraph between two table parts is a label row of the table."""
    out: list[_Builder] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        if (
            out
            and out[-1].kind == "table"
            and b.kind != "table"
            and b.rows <= 2
            and i + 1 < len(blocks)
            and blocks[i + 1].kind == "table"
        ):
            t = out[-1]
            t.parts.append("\n")
            t.length += 1
            base = t.length
            t.parts.extend(b.parts)
            t.length += b.length
            t.words.extend(
                (p, x0, y0, x1, y1, s + base, e + base) for p, x0, y0, x1, y1, s, e in b.words
            )
            nxt = blocks[i + 1]
            t.parts.append("\n")
            t.length += 1
            base = t.length
            t.parts.extend(nxt.parts)
            t.length += nxt.length
            t.words.extend(
                (p, x0, y0, x1, y1, s + base, e + base) for p, x0, y0, x1, y1, s, e in nxt.words
            )
            t.rows += b.rows + nxt.rows
            t.toc.extend(b.toc + nxt.toc)
            i += 2
            continue
        out.append(b)
        i += 1
    return out


def _meaningful_title(title: str | None) -> str | None:
    if not title:
        return None
    t = " ".join(title.split())
    low = t.lower()
    if len(t) < 4 or sum(c.isalpha() for c in t) < 3:
        return None
    if low in {"untitled", "title", "document", "untitled document", "slide 1"}:
        return None
    if low.startswith(("microsoft word", "microsoft powerpoint", "powerpoint presentation")):
        return None
    if low.endswith((".pdf", ".doc", ".docx", ".tex", ".dvi", ".ps", ".indd", ".htm", ".html")):
        return None
    return t


READ_BY_OCR = "read by OCR (Tesseract); recognition errors are possible"  # a note: text was read


def image_only_problem(page_numbers: list[int], reason: str = "OCR is not available") -> str:
    """The problem text for scanned pages (1-based page numbers) that were not OCRed."""
    if len(page_numbers) == 1:
        return f"page {page_numbers[0]} has no text layer (scanned image?); {reason}"
    return f"pages {page_ranges(page_numbers)} have no text layer (scanned images?); {reason}"


def _ocr_builder(b: OcrBlock) -> _Builder:
    """An OCR block (already in Tesseract's reading order) as a block of this reader."""
    style = (b.size, False) if b.kind == "heading" else None
    return _Builder(
        kind=b.kind, page=b.page, style=style, parts=[b.text], words=list(b.words),
        length=len(b.text), rows=b.rows,
    )  # fmt: skip


def read_pdf(
    data: bytes,
    *,
    path: Path,
    max_pages: int,
    ocr_settings: IngestSettings | None = None,
    ocr_progress: OcrProgress | None = None,
) -> PdfContent:
    """Read a PDF's bytes into blocks in reading order. Raises IngestError subclasses.

    Pages without a text layer are OCRed when ``ocr_settings`` allow it and Tesseract is
    installed (:mod:`core.ingest.ocr`; ``ocr_progress(done, total)`` after each page, and it may
    raise to cancel); otherwise they are reported in ``problems``.
    """
    name = path.name
    try:
        opened = open_pdf(data)
    except Exception as exc:  # pymupdf raises FileDataError, RuntimeError, ValueError...
        if cut_short(data):
            message, hint = unreadable_message(name, 0, truncated=True, repaired=True)
            raise CorruptFileError(message, path=path, hint=hint) from exc
        raise CorruptFileError(f"{name} cannot be opened as a PDF: {exc}.", path=path) from exc
    doc = opened.doc
    try:
        if doc.needs_pass:
            raise EncryptedFileError(f"{name} is password-protected.", path=path)
        n = doc.page_count
        if n > max_pages:
            raise FileTooLargeError(
                f"{name} has {n:,} pages, over the {max_pages:,}-page limit.",
                path=path,
                hint="Split the PDF, or raise `ingest.max_pages` in the settings.",
            )
        pages_data, first_lines, problems = read_pages(opened, name)
        if all(pd.lost for pd in pages_data):
            message, hint = unreadable_message(
                name,
                n,
                truncated=opened.truncated,
                repaired=opened.repaired,
                encrypted=key_lost(data, opened),
            )
            raise CorruptFileError(message, path=path, hint=hint)
        scans = [pd.index for pd in pages_data if pd.image_only]
        ocr_results: dict[int, OcrPage | OcrPageError] = {}
        no_ocr = "OCR is not available"
        if scans and ocr_settings is not None:
            engine, no_ocr = ocr_engine(ocr_settings)
            if engine is not None:
                ocr_results = engine.ocr_pages(doc, scans, progress=ocr_progress)
        metadata = doc.metadata or {}
    finally:
        doc.close()

    body = _body_size(pages_data)
    builders: list[_Builder] = []
    pages: list[Page] = []
    scanned: list[int] = []
    ocred: list[int] = []
    ocr_empty: list[int] = []
    for pd in pages_data:
        ocr = ocr_results.get(pd.index)
        pages.append(
            Page(
                page_index=pd.index,
                width=pd.width,
                height=pd.height,
                char_count=ocr.chars if isinstance(ocr, OcrPage) else pd.chars,
                has_text_layer=not pd.image_only and not pd.lost and pd.chars > 0,
            )
        )
        if pd.image_only:
            if isinstance(ocr, OcrPage) and ocr.blocks:
                ocred.append(pd.index + 1)
                builders.extend(_ocr_builder(b) for b in ocr.blocks)
            elif isinstance(ocr, OcrPage):
                ocr_empty.append(pd.index + 1)
            elif isinstance(ocr, OcrPageError):
                problems.append(image_only_problem([pd.index + 1], f"OCR failed: {ocr}"))
            else:
                scanned.append(pd.index + 1)
            continue
        builders.extend(_page_blocks(pd, body))
    if scanned:
        problems.append(image_only_problem(scanned, no_ocr))
    if ocr_empty:
        problems.append(image_only_problem(ocr_empty, "OCR found no text"))
    if ocred:
        problems.append(
            f"{'pages' if len(ocred) > 1 else 'page'} {page_ranges(ocred)} had no text layer and "
            f"{'were' if len(ocred) > 1 else 'was'} {READ_BY_OCR}"
        )

    styles = sorted(
        {b.style for b in builders if b.kind == "heading" and b.style is not None},
        key=lambda st: (-st[0], not st[1]),
    )
    level_of = {st: min(i + 1, 6) for i, st in enumerate(styles)}
    blocks: list[Block] = []
    first_heading: str | None = None
    for b in builders:
        text = b.text()
        if b.kind == "heading":
            level = level_of[b.style] if b.style is not None else 6
            blocks.append(Block("heading", text, level, b.words, b.page))
            if first_heading is None:
                first_heading = " ".join(text.split())
        elif b.kind == "table":
            blocks.append(Block("table", text, 0, b.words, b.page))
        else:
            blocks.append(Block("paragraph", text, 0, b.words, b.page))
    # an SEC filing's cover fields first: its first heading is the agency's letterhead, and its
    # metadata title, when there is one, is a filing number or "Form 10-K for X filed <date>"
    title = (
        sec_cover_title(first_lines)
        or _meaningful_title(metadata.get("title"))
        or (first_heading[:200] if first_heading else None)
    )
    return PdfContent(blocks, pages, title, problems)
