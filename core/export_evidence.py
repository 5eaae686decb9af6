"""The evidence appendix of an exported report: each citation's quote, source, pages and a small
picture of the page region with the cited words highlighted.

The picture is what lets a reader without Sourcebook check a claim: it is cut from the page the
library rendered from the very bytes that were added, with the stored word boxes painted over it
the way the evidence viewer paints them. The exporter never reaches into the library: it is
handed a :class:`PageRenderer` (the service's ``render_page``), so it can be tested with any
callable and a report still exports when a document was removed or its file moved (the entry
then says why its picture is missing).

Threading: runs on the caller's thread (a worker, never the UI thread: a page render costs tens
of ms). Nothing is shared between calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import pymupdf
from pydantic import BaseModel, Field

from core.errors import SourcebookError
from core.render import RenderedPage
from core.research.schemas import CitationRecord, Report

logger = logging.getLogger(__name__)

ZOOM = 2.0  # pixels per PDF point: small print stays legible when shown at half size
MARGIN_X = 24.0  # points of page kept left and right of the cited words
MARGIN_Y = 16.0  # about a line of context above and below
MIN_WIDTH = 260.0  # a one-word citation still shows the words around it
MAX_HEIGHT = 420.0  # a long passage shows its beginning; the full quote is in the text
GAP_PT = 9.0  # blank space at least this wide ends a line (words are ~3 pt apart)
INK_LEVEL = 200  # a pixel darker than this (any channel) is ink, not paper
MAX_PAGES = 2  # pictures per passage (a passage rarely spans more than two pages)
# Multiplied into the page pixels, like a highlighter pen: paper turns yellow, ink stays dark.
HIGHLIGHT_RGB = (255, 214, 64)


class PageRenderer(Protocol):
    """Renders page ``page_index`` (0-based) of document ``doc_id`` at ``zoom`` px per point.

    Raises a :class:`~core.errors.SourcebookError` when it cannot (the document was removed,
    its file moved or changed, it has no pages); its ``message`` is shown in the appendix.
    """

    def __call__(self, doc_id: str, page_index: int, zoom: float) -> RenderedPage: ...


class EvidenceImage(BaseModel):
    """A PNG crop of one page around the cited words, highlighted."""

    page: int = Field(description="1-based page number.")
    png: bytes = Field(repr=False)
    width_pt: float = Field(description="Size of the cropped region in PDF points.")
    height_pt: float


class EvidencePassage(BaseModel):
    """One cited passage: its quote and, for a PDF passage, the pictures of its words."""

    evidence_id: str
    quote: str
    pages: list[int] = Field(default_factory=list, description="1-based.")
    images: list[EvidenceImage] = Field(default_factory=list)
    unavailable: str = Field(
        "", description="Why a passage with word boxes has no picture (empty when it has one)."
    )


class EvidenceEntry(BaseModel):
    """Everything the appendix shows for citation number ``number`` (one document)."""

    number: int
    title: str
    source_uri: str
    pages: list[int] = Field(default_factory=list)
    superseded: bool = False
    passages: list[EvidencePassage] = Field(default_factory=list)


def pages_label(pages: Iterable[int]) -> str:
    """``p. 3`` or ``pp. 3–5, 9`` (runs of pages joined)."""
    nums = sorted(set(pages))
    if not nums:
        return ""
    runs: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}\u2013{prev}")
        if n is not None:
            start = prev = n
    return ("p. " if len(nums) == 1 else "pp. ") + ", ".join(runs)


def crop_region(
    rects: list[tuple[float, float, float, float]], page_width: float, page_height: float
) -> tuple[float, float, float, float]:
    """The page region (PDF points) shown for ``rects``: their union plus a margin, widened
    to :data:`MIN_WIDTH` and cut to :data:`MAX_HEIGHT`, inside the page."""
    x0 = min(r[0] for r in rects) - MARGIN_X
    x1 = max(r[2] for r in rects) + MARGIN_X
    y0 = min(r[1] for r in rects) - MARGIN_Y
    y1 = max(r[3] for r in rects) + MARGIN_Y
    if x1 - x0 < MIN_WIDTH:
        grow = (MIN_WIDTH - (x1 - x0)) / 2
        x0, x1 = x0 - grow, x1 + grow
    if x0 < 0:
        x0, x1 = 0.0, x1 - x0
    if x1 > page_width:
        x0, x1 = max(0.0, x0 - (x1 - page_width)), page_width
    y1 = min(y1, y0 + MAX_HEIGHT)
    return (max(0.0, x0), max(0.0, y0), min(page_width, x1), min(page_height, y1))


def line_runs(
    rects: list[tuple[float, float, float, float]],
) -> list[tuple[float, float, float, float]]:
    """Word boxes joined into one box per run of words on a line (a highlighter stroke, not a
    row of separate patches): neighbours on the same line whose gap is under a line height."""
    runs: list[list[float]] = []
    for x0, y0, x1, y1 in sorted(rects, key=lambda r: (round(r[1]), r[0])):
        last = runs[-1] if runs else None
        height = y1 - y0
        if (
            last is not None
            and abs(last[1] - y0) < height / 3
            and abs(last[3] - y1) < height / 3
            and -1 <= x0 - last[2] < height
        ):
            last[2], last[1], last[3] = max(last[2], x1), min(last[1], y0), max(last[3], y1)
        else:
            runs.append([x0, y0, x1, y1])
    return [(a, b, c, d) for a, b, c, d in runs]


def ink_extent(ink: np.ndarray, start: int, end: int, gap: float) -> tuple[int, int]:
    """The first and last inked column reached from ``start``..``end`` before a run of at
    least ``gap`` blank columns (``ink``: one bool per pixel column)."""
    width = len(ink)
    start, end = max(0, min(start, width - 1)), max(0, min(end, width - 1))
    lo, hi = start, end
    blank = 0
    for x in range(start - 1, -1, -1):
        blank = 0 if ink[x] else blank + 1
        if blank >= gap:
            break
        if ink[x]:
            lo = x
    blank = 0
    for x in range(end + 1, width):
        blank = 0 if ink[x] else blank + 1
        if blank >= gap:
            break
        if ink[x]:
            hi = x
    return lo, hi


def highlighted_crop(
    page: RenderedPage, rects: list[tuple[float, float, float, float]]
) -> EvidenceImage:
    """Cut the region around ``rects`` out of ``page`` and paint ``rects`` as highlighted."""
    cx0, cy0, cx1, cy1 = crop_region(rects, page.width, page.height)
    zx = page.pixel_width / page.width if page.width else page.zoom
    zy = page.pixel_height / page.height if page.height else page.zoom
    px0, px1 = int(cx0 * zx), max(int(cx0 * zx) + 1, min(page.pixel_width, round(cx1 * zx)))
    py0, py1 = int(cy0 * zy), max(int(cy0 * zy) + 1, min(page.pixel_height, round(cy1 * zy)))
    rows = np.frombuffer(page.samples, dtype=np.uint8).reshape(page.pixel_height, page.stride)
    pixels = rows[:, : page.pixel_width * 3].reshape(page.pixel_height, page.pixel_width, 3)
    # widen to where the lines around the words end (a column gutter or the page's margin), so
    # no word is cut in half at the picture's edge and the neighbouring column stays out
    ink = (pixels[py0:py1].min(axis=2) < INK_LEVEL).any(axis=0)
    lx0, lx1 = ink_extent(
        ink, int(min(r[0] for r in rects) * zx), int(max(r[2] for r in rects) * zx), GAP_PT * zx
    )
    px0 = max(0, min(px0, lx0 - int(MARGIN_X * zx)))
    px1 = min(page.pixel_width, max(px1, lx1 + 1 + int(MARGIN_X * zx)))
    crop = pixels[py0:py1, px0:px1].copy()
    # one mask, applied once, so words whose boxes touch are not darkened twice
    mask = np.zeros(crop.shape[:2], dtype=bool)
    for x0, y0, x1, y1 in line_runs(rects):
        bx0, bx1 = max(0, int(x0 * zx) - px0), min(crop.shape[1], round(x1 * zx) - px0 + 1)
        by0, by1 = max(0, int(y0 * zy) - py0), min(crop.shape[0], round(y1 * zy) - py0 + 1)
        if bx1 > bx0 and by1 > by0:
            mask[by0:by1, bx0:bx1] = True
    tint = np.array(HIGHLIGHT_RGB, dtype=np.uint16)
    crop[mask] = (crop[mask].astype(np.uint16) * tint // 255).astype(np.uint8)
    height, width = crop.shape[:2]
    pix = pymupdf.Pixmap(pymupdf.csRGB, width, height, crop.tobytes(), False)
    return EvidenceImage(
        page=page.page_index + 1,
        png=pix.tobytes("png"),
        width_pt=width / zx,
        height_pt=height / zy,
    )


def _passage(citation: CitationRecord, render: PageRenderer | None) -> EvidencePassage:
    passage = EvidencePassage(
        evidence_id=citation.evidence_id, quote=citation.quote, pages=citation.pages
    )
    if not citation.boxes:  # a text or web passage: its quote is the evidence
        return passage
    if render is None:
        passage.unavailable = "Page image unavailable: the library was not at hand."
        return passage
    by_page: dict[int, list[tuple[float, float, float, float]]] = {}
    for word in citation.boxes:
        by_page.setdefault(word.page_index, []).append(word.rect)
    for page_index in sorted(by_page)[:MAX_PAGES]:
        try:
            page = render(citation.doc_id, page_index, ZOOM)
        except SourcebookError as exc:
            logger.info("no picture of %s p%d: %s", citation.doc_id, page_index, exc.message)
            passage.unavailable = f"Page image unavailable: {exc.message}"
            break
        passage.images.append(highlighted_crop(page, by_page[page_index]))
    return passage


def _cached(render: PageRenderer, keep: int = 4) -> PageRenderer:
    """``render`` remembering its last few pages: passages of one document often share a page,
    and a whole page's pixels are a few MB, so only a handful are kept."""
    recent: dict[tuple[str, int, float], RenderedPage] = {}

    def cached(doc_id: str, page_index: int, zoom: float) -> RenderedPage:
        key = (doc_id, page_index, zoom)
        page = recent.pop(key, None)
        if page is None:
            page = render(doc_id, page_index, zoom)
        recent[key] = page
        while len(recent) > keep:
            recent.pop(next(iter(recent)))
        return page

    return cached


def evidence_entries(report: Report, render: PageRenderer | None) -> list[EvidenceEntry]:
    """One entry per citation number, in number order, each with its passages' pictures.

    A citation whose page cannot be drawn (``render`` is ``None`` or raises) keeps its quote
    and source and says why the picture is missing; nothing here raises for it.
    """
    render = _cached(render) if render is not None else None
    entries: dict[int, EvidenceEntry] = {}
    for c in sorted(report.citations, key=lambda c: c.number):
        entry = entries.get(c.number)
        if entry is None:
            entry = entries[c.number] = EvidenceEntry(
                number=c.number, title=c.title, source_uri=c.source_uri, superseded=c.superseded
            )
        entry.passages.append(_passage(c, render))
        entry.pages = sorted({*entry.pages, *c.pages})
    return list(entries.values())
