"""One PDF page's words, cut into line segments, and every page of a possibly damaged file.

:func:`read_page` takes one ``TextPage`` per page for both the line styles (``extractDICT``)
and the word boxes (``extractWORDS``); the two share block and line numbers, so every word is
tied to its line's font size and weight. Words are cleaned of extraction artefacts
(:mod:`core.ingest.pdfclean`) before lines are cut into segments at wide gaps (table cells).
:func:`read_pages` reads every page of a file opened by :func:`core.ingest.pdfrepair.open_pdf`
and keeps going past the pages that cannot be read.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import pymupdf

from core.ingest.pdfclean import Char, Word, clean_line
from core.ingest.pdfrepair import (
    OpenedPdf,
    bad_char,
    content_damaged,
    page_lost,
    page_ranges,
    repair_problem,
)
from core.ingest.titles import COVER_LINES

logger = logging.getLogger(__name__)

_FLAGS = pymupdf.TEXTFLAGS_WORDS  # ligatures, whitespace, mediabox clip; no images
CURRENCY = frozenset({"$", "€", "£", "¥", "(", "($", "US$"})
_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")
_IMAGE_ONLY_MAX_CHARS = 100
_IMAGE_ONLY_MIN_COVER = 0.5


@dataclass(slots=True)
class Seg:
    """A run of words on one line, without wide gaps: a text line or a table cell."""

    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    bold: bool
    words: list[Word]
    block: int
    vertical: bool = False
    after_leader: frozenset[int] = frozenset()  # indices of words that came after a dot leader

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    def nchars(self) -> int:
        return sum(len(w[4]) for w in self.words) + len(self.words) - 1


@dataclass(slots=True)
class PageData:
    index: int
    width: float
    height: float
    segs: list[Seg]
    chars: int
    image_only: bool = False
    bad_chars: int = 0  # characters whose character map was lost (see pdfrepair.bad_char)
    lost: bool = False  # a page of a damaged file that could not be read


def _is_bold(span: dict[str, object]) -> bool:
    flags = span.get("flags", 0)
    font = str(span.get("font", "")).lower()
    return bool(int(flags) & 16) or any(k in font for k in _BOLD_NAMES)  # type: ignore[call-overload]


def read_page(page: pymupdf.Page, *, repaired: bool = False) -> PageData:
    """A page's lines cut into segments, its words cleaned of artefacts (:mod:`pdfclean`)."""
    tp = page.get_textpage(flags=_FLAGS)
    d = tp.extractDICT()
    by_line: dict[tuple[int, int], list[Word]] = {}
    for x0, y0, x1, y1, text, b, ln, _wn in tp.extractWORDS():
        by_line.setdefault((b, ln), []).append((x0, y0, x1, y1, text))
    raw: dict[tuple[int, int], list[Char]] | None = None

    def line_chars(key: tuple[int, int]) -> list[Char]:
        # character boxes are read only for pages with glued leaders: rawdict is slower
        nonlocal raw
        if raw is None:
            raw = {}
            for rb in tp.extractRAWDICT()["blocks"]:
                for rli, rline in enumerate(rb.get("lines", ())):
                    raw[(rb["number"], rli)] = [
                        (ch["c"], float(ch["bbox"][0]), float(ch["bbox"][2]))
                        for span in rline["spans"]
                        for ch in span["chars"]
                    ]
        return raw.get(key, [])

    segs: list[Seg] = []
    chars = 0
    bad = 0
    for block in d["blocks"]:
        bno = block["number"]
        for li, line in enumerate(block.get("lines", ())):
            words = by_line.get((bno, li))
            if not words:
                continue
            best = 0
            size = 0.0
            bold = True
            for span in line["spans"]:
                n = len(span["text"].strip())
                if not n:
                    continue
                if n > best:
                    best, size = n, float(span["size"])
                bold = bold and _is_bold(span)
            _dx, dy = line["dir"]
            vertical = abs(dy) > 0.2
            chars += sum(len(w[4]) for w in words)
            bad += sum(bad_char(c) for w in words for c in w[4])
            chars_of = None if vertical else functools.partial(line_chars, (bno, li))
            words, after = clean_line(words, chars_of, repaired=repaired)
            if not words:
                continue
            # cut the line at wide gaps: table cells that MuPDF put on one line (a dot leader
            # taken out leaves such a gap between a label and its number)
            start = 0
            gap_limit = max(1.8 * size, 8.0)
            for k in range(1, len(words)):
                gap = words[k][0] - words[k - 1][2]
                if not vertical and gap > gap_limit and words[k - 1][4] not in CURRENCY:
                    segs.append(_make_seg(words, start, k, after, size, bold, bno, vertical))
                    start = k
            segs.append(_make_seg(words, start, len(words), after, size, bold, bno, vertical))
    rect = page.rect
    return PageData(
        page.number or 0, float(rect.width), float(rect.height), segs, chars, bad_chars=bad
    )


def _make_seg(
    line: list[Word],
    start: int,
    end: int,
    after: set[int],
    size: float,
    bold: bool,
    block: int,
    vertical: bool,
) -> Seg:
    words = line[start:end]
    return Seg(
        min(w[0] for w in words),
        min(w[1] for w in words),
        max(w[2] for w in words),
        max(w[3] for w in words),
        size,
        bold,
        words,
        block,
        vertical,
        frozenset(i - start for i in after if start <= i < end),
    )


def _image_cover(page: pymupdf.Page) -> float:
    """Fraction of the page area covered by images (0..1, overlaps counted once at most)."""
    area = abs(page.rect) or 1.0
    covered = 0.0
    for info in page.get_image_info():
        r = pymupdf.Rect(info["bbox"]) & page.rect
        covered += abs(r)
    return min(1.0, covered / area)


def read_pages(opened: OpenedPdf, name: str) -> tuple[list[PageData], list[str], list[str]]:
    """Every page's data (a page that cannot be read is ``lost``), the first page's first
    lines, and the problems found.

    A page that fails to load or parse is lost, not the whole file: a damaged file keeps the
    pages MuPDF could read. In a repaired file a page is also lost when its object or content
    is gone, when MuPDF's warnings say its content is broken and nothing came out, or when
    most of its characters are garbage (``pdfrepair.bad_char``); a page that came out while
    MuPDF warned about its content may be incomplete.
    """
    doc = opened.doc
    pages_data: list[PageData] = []
    first_lines: list[str] = []
    lost: list[int] = []
    partial: list[int] = []
    for i in range(doc.page_count):
        if opened.repaired:
            content_damaged()  # forget the warnings of earlier pages
        width = height = 0.0
        try:
            page = doc.load_page(i)
            width, height = float(page.rect.width), float(page.rect.height)
            if opened.repaired and page_lost(doc, page):
                raise ValueError("its page object or content is missing")
            pd = read_page(page, repaired=opened.repaired)
            if i == 0:
                first_lines = page.get_text().splitlines()[:COVER_LINES]
            if pd.chars < _IMAGE_ONLY_MAX_CHARS:
                cover = _image_cover(page)
                pd.image_only = (pd.chars == 0 and cover > 0) or cover >= _IMAGE_ONLY_MIN_COVER
                if pd.chars == 0 and cover == 0:
                    pd.image_only = False
        except Exception as exc:  # pymupdf raises several unrelated types
            logger.info("%s: page %d cannot be read: %s", name, i + 1, exc)
            pages_data.append(PageData(i, width, height, [], 0, lost=True))
            lost.append(i + 1)
            continue
        broken = opened.repaired and content_damaged()
        empty = pd.chars == 0 and not pd.image_only
        if opened.repaired and (pd.bad_chars * 2 > pd.chars or (broken and empty)):
            pd.lost, pd.segs = True, []
            lost.append(i + 1)
        elif broken:
            partial.append(i + 1)
        pages_data.append(pd)
    problems: list[str] = []
    if opened.repaired:
        problems.append(repair_problem(opened, pages=len(pages_data), lost=lost, partial=partial))
    elif lost:
        pages = "pages" if len(lost) > 1 else "page"
        problems.append(f"{pages} {page_ranges(lost)} could not be read (the file looks damaged)")
    return pages_data, first_lines, problems
