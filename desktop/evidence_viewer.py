"""The evidence viewer: the product's promise made visible.

Given an evidence id (a passage or a span inside one) it shows the exact words: for PDFs the
page rendered by PyMuPDF (through ``Sourcebook.render_page``) with the cited words' boxes drawn
as translucent rectangles and scrolled into view; for text and web documents the passage text
with the span highlighted. A header names the document, page and evidence id; "Open original"
hands the file to the system viewer at that page.

Coordinates: the scene is in PDF points (the word boxes' unit), the view's transform scales
points to logical pixels (``zoom``), and the pixmap is rendered at ``zoom * devicePixelRatio``
and scaled back, so the page is drawn at screen resolution and boxes line up at any zoom.

Threading: every call into the service (evidence lookup, rendering, locating the file) goes
through :class:`~desktop.operations.Operations`; results come back on the UI thread and stale
ones (an older request overtaken by a newer one) are dropped by a generation counter.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import shiboken6
from PySide6.QtCore import QProcess, QRectF, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QDesktopServices,
    QImage,
    QKeySequence,
    QPainter,
    QPen,
    QPixmap,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsPixmapItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from core.errors import NotFoundError
from core.service import Evidence, RenderedPage, Sourcebook
from desktop.errors import guarded, show_error
from desktop.operations import Operations

logger = logging.getLogger(__name__)

Rect = tuple[float, float, float, float]

ZOOM_STEP = 1.25
MIN_ZOOM, MAX_ZOOM = 0.25, 6.0
HIGHLIGHT_FILL = QColor(255, 196, 0, 110)
PAGE_SURROUND = QColor(128, 128, 128)  # mid grey: a white page stands out on light and dark

#: Test seam: when set, "Open original" calls this with the URL instead of the system viewer.
open_url_hook: Callable[[QUrl], None] | None = None


class CitationLike(Protocol):
    """What the viewer needs from a report's citation record (``CitationRecord``)."""

    evidence_id: str
    title: str
    quote: str


class _PageView(QGraphicsView):
    """The page canvas; tells the viewer when its width changes (for fit-width)."""

    resized = Signal()

    def resizeEvent(self, event: object) -> None:
        super().resizeEvent(event)  # type: ignore[arg-type]
        self.resized.emit()


class EvidenceViewer(QWidget):
    """Shows one piece of evidence; see the module docstring for coordinates and threading.

    For tests and callers: :attr:`evidence_id`, :attr:`doc_id`, :attr:`page_index` (0-based,
    the page on screen), :attr:`page_count`, :attr:`mode` (``"empty"``, ``"page"``,
    ``"text"``) and :meth:`highlight_rects` (PDF points, the boxes drawn on the shown page).
    ``evidence_shown`` fires when new evidence is on screen, ``page_shown`` after each render.
    """

    evidence_shown = Signal(str)
    page_shown = Signal(int)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        self._evidence: Evidence | None = None
        self._page_index: int | None = None
        self._page_count = 0
        self._zoom = 1.0
        self._fit = True
        self._gen = 0  # bumped per request; callbacks of older requests are ignored
        self._page_size: dict[tuple[str, int], tuple[float, float]] = {}
        self._highlights: list[Rect] = []
        self._rendering = 0  # generation of the render in flight, 0 when none
        self.mode = "empty"

        self._title = QLabel("No evidence selected")
        self._title.setWordWrap(True)
        font = self._title.font()
        font.setBold(True)
        self._title.setFont(font)
        self._meta = QLabel("")
        self._meta.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._meta.setWordWrap(True)
        self._notice = QLabel("")
        self._notice.setWordWrap(True)
        self._notice.setVisible(False)

        self._prev = self._tool("◀", "Previous page (Page Up)", self.previous_page)
        self._next = self._tool("▶", "Next page (Page Down)", self.next_page)
        self._page_label = QLabel("")
        self._zoom_out = self._tool("−", "Zoom out (Ctrl+-)", self.zoom_out)
        self._zoom_in = self._tool("+", "Zoom in (Ctrl++)", self.zoom_in)
        self._fit_btn = self._tool("Fit", "Fit page width (Ctrl+0)", self.fit_width)
        self._open_btn = self._tool("Open original", "Open the file in the system viewer", None)
        self._open_btn.clicked.connect(self.open_original)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        for tool in (self._prev, self._page_label, self._next, self._zoom_out, self._zoom_in):
            bar.addWidget(tool)
        bar.addWidget(self._fit_btn)
        bar.addStretch(1)
        bar.addWidget(self._open_btn)

        self._scene = QGraphicsScene(self)
        self._view = _PageView(self._scene)
        self._view.setObjectName("evidence-page")
        self._view.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        self._view.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self._view.setFrameShape(QFrame.Shape.NoFrame)
        self._view.setBackgroundBrush(QBrush(PAGE_SURROUND))  # the page's edges stay visible
        self._view.resized.connect(self._on_view_resized)
        self._pixmap_item = QGraphicsPixmapItem()
        self._pixmap_item.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
        self._scene.addItem(self._pixmap_item)
        self._highlight_items: list[QGraphicsRectItem] = []
        self._text = QTextBrowser()
        self._text.setObjectName("evidence-text")
        self._text.setOpenLinks(False)
        empty = QLabel("Click a citation or a search result to see the cited words here.")
        empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        empty.setWordWrap(True)
        self._stack = QStackedWidget()
        for w in (empty, self._view, self._text):
            self._stack.addWidget(w)
        self._stack.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

        layout = QVBoxLayout(self)
        layout.addWidget(self._title)
        layout.addWidget(self._meta)
        layout.addLayout(bar)
        layout.addWidget(self._notice)
        layout.addWidget(self._stack, 1)

        self._fit_timer = QTimer(self)
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(120)
        self._fit_timer.timeout.connect(self._refit)
        ctx = Qt.ShortcutContext.WidgetWithChildrenShortcut
        for keys, slot in (
            (QKeySequence.StandardKey.MoveToPreviousPage, self.previous_page),
            (QKeySequence.StandardKey.MoveToNextPage, self.next_page),
            (QKeySequence.StandardKey.ZoomIn, self.zoom_in),
            (QKeySequence.StandardKey.ZoomOut, self.zoom_out),
            (QKeySequence("Ctrl+0"), self.fit_width),
        ):
            sc = QShortcut(QKeySequence(keys), self)
            sc.setContext(ctx)
            sc.activated.connect(slot)
        self._update_controls()

    def _tool(self, text: str, tip: str, slot: Callable[[], None] | None) -> QToolButton:
        b = QToolButton()
        b.setText(text)
        b.setToolTip(tip)
        b.setAccessibleName(tip)
        if slot is not None:
            b.clicked.connect(slot)
        return b

    # ---------------------------------------------------------------- state for callers

    @property
    def evidence(self) -> Evidence | None:
        return self._evidence

    @property
    def evidence_id(self) -> str | None:
        return self._evidence.evidence_id if self._evidence else None

    @property
    def doc_id(self) -> str | None:
        return self._evidence.doc_id if self._evidence else None

    @property
    def page_index(self) -> int | None:
        return self._page_index

    @property
    def page_count(self) -> int:
        return self._page_count

    @property
    def zoom(self) -> float:
        return self._zoom

    @property
    def busy(self) -> bool:
        """True while a page render or a fit-to-width adjustment is pending."""
        return self._rendering == self._gen or self._fit_timer.isActive()

    def highlight_rects(self) -> list[Rect]:
        """The highlight rectangles on the page on screen, in PDF points."""
        return list(self._highlights)

    # ---------------------------------------------------------------- showing evidence

    def show_evidence(self, evidence_id: str) -> None:
        """Look the id up in the background, then show it."""
        self._gen += 1
        gen = self._gen
        service = self._service
        self._ops.run(
            lambda ctx: service.evidence(evidence_id),
            label="Opening evidence",
            on_success=lambda ev: self._if_current(gen, self.display, ev),
            on_error=lambda exc: self._if_current(gen, self._lookup_failed, exc),
        )

    def show_citation(self, citation: CitationLike) -> None:
        """Show a report's citation (by its evidence id; its quote if the id is gone)."""
        self._gen += 1
        gen = self._gen
        service = self._service

        def failed(exc: BaseException) -> None:
            if isinstance(exc, NotFoundError):
                self._show_quote(citation, exc)
            else:
                self._lookup_failed(exc)

        self._ops.run(
            lambda ctx: service.evidence(citation.evidence_id),
            label="Opening citation",
            on_success=lambda ev: self._if_current(gen, self.display, ev),
            on_error=lambda exc: self._if_current(gen, failed, exc),
        )

    def display(self, evidence: Evidence) -> None:
        """Show evidence already looked up (UI thread)."""
        self._gen += 1
        self._evidence = evidence
        self._notice.setVisible(False)
        self._title.setText(evidence.title or "(untitled)")
        self._title.setToolTip(evidence.source_uri)
        self._update_meta()
        if evidence.kind == "pdf" and (evidence.boxes or evidence.pages):
            first = evidence.boxes[0].page_index if evidence.boxes else evidence.pages[0] - 1
            self._page_count = 0
            self.show_page(first)
        else:
            self._show_text(evidence)
        self.evidence_shown.emit(evidence.evidence_id)

    def _if_current(self, gen: int, fn: Callable[[Any], None], value: object) -> None:
        if shiboken6.isValid(self) and gen == self._gen:
            fn(value)

    def _lookup_failed(self, exc: object) -> None:
        assert isinstance(exc, BaseException)
        show_error(self, exc)

    def _show_quote(self, citation: CitationLike, exc: NotFoundError) -> None:
        self._evidence = None
        self._page_index = None
        self._highlights = []
        self._title.setText(citation.title or citation.evidence_id)
        self._meta.setText(f"Evidence {citation.evidence_id}")
        self._notice.setText(f"{exc.message} Showing the quote saved in the report.")
        self._notice.setVisible(True)
        self._text.setPlainText(citation.quote)
        self.mode = "text"
        self._stack.setCurrentWidget(self._text)
        self._update_controls()
        self.evidence_shown.emit(citation.evidence_id)

    def _update_meta(self) -> None:
        ev = self._evidence
        if ev is None:
            return
        parts = [f"Evidence {ev.evidence_id}"]
        if self._page_index is not None:
            parts.append(f"page {self._page_index + 1}")
        elif ev.pages:
            parts.append("pages " + ", ".join(str(p) for p in ev.pages))
        headings = [h for h in ev.heading_path if h.strip() != ev.title.strip()]
        if headings:  # the title is shown above; its repetition as a heading is not
            parts.append(" › ".join(headings))
        if ev.superseded:
            parts.append("a newer version of this document exists")
        self._meta.setText(" · ".join(parts))

    def _show_text(self, ev: Evidence) -> None:
        self._page_index = None
        self._page_count = 0
        self._highlights = []
        self.mode = "text"
        self._text.setPlainText(ev.passage_text)
        fmt = QTextCharFormat()
        dark = self.palette().base().color().lightness() < 128
        fmt.setBackground(QColor(120, 95, 0) if dark else QColor(255, 236, 140))
        cursor = QTextCursor(self._text.document())
        cursor.setPosition(ev.start)
        cursor.setPosition(ev.end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(fmt)
        cursor.setPosition(ev.start)
        self._text.setTextCursor(cursor)
        self._text.ensureCursorVisible()
        self._stack.setCurrentWidget(self._text)
        self._update_meta()
        self._update_controls()

    # ---------------------------------------------------------------- pages and zoom

    def show_page(self, page_index: int) -> None:
        """Render ``page_index`` (0-based) of the current PDF evidence in the background."""
        ev = self._evidence
        if ev is None or ev.kind != "pdf":
            return
        if self._page_count and not 0 <= page_index < self._page_count:
            return
        self._page_index = page_index
        size = self._page_size.get((ev.doc_id, page_index))
        if self._fit and size is not None:
            self._zoom = self._fit_zoom(size[0])
        elif self._fit:
            self._zoom = self._fit_zoom(612.0)  # a guess until the page's size is known
        self._update_meta()
        self._update_controls()
        self._request_render()

    def previous_page(self) -> None:
        if self._page_index is not None and self._page_index > 0:
            self.show_page(self._page_index - 1)

    def next_page(self) -> None:
        if self._page_index is not None and self._page_index + 1 < self._page_count:
            self.show_page(self._page_index + 1)

    def zoom_in(self) -> None:
        self._set_zoom(self._zoom * ZOOM_STEP)

    def zoom_out(self) -> None:
        self._set_zoom(self._zoom / ZOOM_STEP)

    def fit_width(self) -> None:
        self._fit = True
        self._refit()

    def _set_zoom(self, zoom: float) -> None:
        self._fit = False
        self._zoom = min(max(zoom, MIN_ZOOM), MAX_ZOOM)
        self._apply_transform()
        if self.mode == "page":
            self._request_render()

    def _fit_zoom(self, page_width: float) -> float:
        avail = max(self._view.viewport().width() - 24, 100)
        return min(max(avail / max(page_width, 1.0), MIN_ZOOM), MAX_ZOOM)

    def _on_view_resized(self) -> None:
        if self._fit and self.mode == "page":
            self._fit_timer.start()

    def _refit(self) -> None:
        ev, page = self._evidence, self._page_index
        if not self._fit or ev is None or page is None or self.mode != "page":
            return
        size = self._page_size.get((ev.doc_id, page))
        zoom = self._fit_zoom(size[0] if size else 612.0)
        if abs(zoom - self._zoom) / self._zoom > 0.02:
            self._zoom = zoom
            self._apply_transform()
            self._request_render()

    def _apply_transform(self) -> None:
        self._view.resetTransform()
        self._view.scale(self._zoom, self._zoom)

    def _request_render(self) -> None:
        ev, page = self._evidence, self._page_index
        if ev is None or page is None:
            return
        self._gen += 1
        gen = self._gen
        self._rendering = gen
        service, doc_id = self._service, ev.doc_id
        render_zoom = self._zoom * self.devicePixelRatioF()

        def render(ctx: object) -> tuple[RenderedPage, QImage]:
            # Runs on a worker: the pixels become a QImage here (QImage, unlike QPixmap, may be
            # built off the UI thread), so the UI thread only uploads them.
            rendered = service.render_page(doc_id, page, render_zoom)
            image = QImage(
                rendered.samples,
                rendered.pixel_width,
                rendered.pixel_height,
                rendered.stride,
                QImage.Format.Format_RGB888,
            ).copy()  # own the pixels; the bytes object is gone after this function
            return rendered, image

        self._ops.run(
            render,
            label=f"Rendering page {page + 1}",
            on_success=lambda r: self._if_current(gen, self._on_rendered, r),
            on_error=lambda exc: self._if_current(gen, self._on_render_failed, exc),
        )

    def _on_rendered(self, result: tuple[RenderedPage, QImage]) -> None:
        value, image = result
        self._rendering = 0
        ev = self._evidence
        if ev is None:
            return
        self._page_count = value.page_count
        self._page_size[(ev.doc_id, value.page_index)] = (value.width, value.height)
        if self._fit:
            fit = self._fit_zoom(value.width)
            if abs(fit - self._zoom) / self._zoom > 0.05:
                self._zoom = fit  # the guess was off: draw this one scaled, render again
                self._request_render()
        pix = QPixmap.fromImage(image)
        dpr = self.devicePixelRatioF()
        pix.setDevicePixelRatio(dpr)
        # Items are kept and replaced explicitly, never through QGraphicsScene.clear(): clear()
        # deletes C++ items behind their Python wrappers, which can crash when those are freed.
        self._pixmap_item.setPixmap(pix)
        # The pixmap has width*value.zoom pixels; scale it back to points.
        self._pixmap_item.setScale(1.0 / value.zoom * dpr)
        self._scene.setSceneRect(QRectF(0, 0, value.width, value.height))
        for old in self._highlight_items:
            self._scene.removeItem(old)
        self._highlight_items = []
        self._highlights = [w.rect for w in ev.boxes if w.page_index == value.page_index]
        for x0, y0, x1, y1 in self._highlights:
            item = QGraphicsRectItem(QRectF(x0, y0, x1 - x0, y1 - y0))
            item.setBrush(QBrush(HIGHLIGHT_FILL))
            item.setPen(QPen(Qt.PenStyle.NoPen))  # filled word boxes read as a marker stroke
            item.setZValue(1)
            self._scene.addItem(item)
            self._highlight_items.append(item)
        self._apply_transform()
        self.mode = "page"
        self._stack.setCurrentWidget(self._view)
        self._scroll_to_highlights()
        self._update_meta()
        self._update_controls()
        self.page_shown.emit(value.page_index)

    def _scroll_to_highlights(self) -> None:
        if not self._highlights:
            self._view.ensureVisible(QRectF(0, 0, 1, 1), 0, 0)
            return
        x0 = min(r[0] for r in self._highlights)
        y0 = min(r[1] for r in self._highlights)
        x1 = max(r[2] for r in self._highlights)
        y1 = max(r[3] for r in self._highlights)
        self._view.ensureVisible(QRectF(x0, y0, x1 - x0, y1 - y0), 30, 60)

    def _on_render_failed(self, exc: object) -> None:
        self._rendering = 0
        ev = self._evidence
        if ev is None:
            return
        message = getattr(exc, "message", None) or str(exc)
        logger.info("cannot render %s page %s: %s", ev.doc_id, self._page_index, message)
        self._show_text(ev)
        self._notice.setText(f"The page image is unavailable: {message} Showing the passage text.")
        self._notice.setVisible(True)

    def _update_controls(self) -> None:
        paged = self.mode == "page" and self._page_index is not None
        idx = self._page_index or 0
        self._prev.setEnabled(paged and idx > 0)
        self._next.setEnabled(paged and idx + 1 < self._page_count)
        for b in (self._zoom_in, self._zoom_out, self._fit_btn):
            b.setEnabled(paged)
        self._open_btn.setEnabled(self._evidence is not None)
        if self._page_index is not None:
            of = f" of {self._page_count}" if self._page_count else ""
            self._page_label.setText(f"Page {self._page_index + 1}{of}")
        else:
            self._page_label.setText("")

    # ---------------------------------------------------------------- open original

    def open_original(self) -> None:
        """Open the document's file (or URL) in the system viewer, at the shown page."""
        ev = self._evidence
        if ev is None:
            return
        page = (self._page_index or 0) + 1
        service = self._service
        self._ops.run(
            lambda ctx: (service.source_path(ev.doc_id), _pdf_viewer_command()),
            label="Opening the original",
            on_success=guarded(self, lambda res: self._launch(ev, page, *res)),
        )

    def _launch(self, ev: Evidence, page: int, path: Path | None, viewer: list[str] | None) -> None:
        if path is None and "://" in ev.source_uri:
            url = QUrl(ev.source_uri)
            if ev.kind == "pdf":
                url.setFragment(f"page={page}")
        elif path is None:
            show_error(
                self,
                NotFoundError(
                    f"The original file {ev.source_uri} is missing or has changed since it was "
                    "added.",
                    hint="Put it back, or add it again to index the new version.",
                ),
            )
            return
        else:
            url = QUrl.fromLocalFile(str(path))
            if ev.kind == "pdf":
                url.setFragment(f"page={page}")
        if open_url_hook is not None:
            open_url_hook(url)
            return
        if path is not None and ev.kind == "pdf" and viewer:
            args = [a.replace("{page}", str(page)).replace("{file}", str(path)) for a in viewer]
            if QProcess.startDetached(args[0], args[1:])[0]:
                return
        if url.isLocalFile():
            url.setFragment("")  # file URLs with a fragment confuse xdg-open and Windows
        if not QDesktopServices.openUrl(url):
            logger.warning("the system could not open %s", url.toString())


# Page arguments of the common PDF viewers, used when one of them is the system's default.
_VIEWERS = {
    "okular": ["okular", "--page", "{page}", "{file}"],
    "evince": ["evince", "--page-index={page}", "{file}"],
    "atril": ["atril", "--page-index={page}", "{file}"],
    "xreader": ["xreader", "--page-index={page}", "{file}"],
    "zathura": ["zathura", "--page={page}", "{file}"],
}


def _pdf_viewer_command() -> list[str] | None:
    """The default PDF viewer's command line with a page argument (Linux), else None.

    Runs ``xdg-mime`` (a short subprocess): call from a worker thread.
    """
    if not sys.platform.startswith("linux") or shutil.which("xdg-mime") is None:
        return None
    try:
        out = subprocess.run(
            ["xdg-mime", "query", "default", "application/pdf"],
            capture_output=True,
            text=True,
            timeout=3,
            check=False,
        ).stdout.lower()
    except (OSError, subprocess.SubprocessError):
        return None
    for name, cmd in _VIEWERS.items():
        if name in out and shutil.which(cmd[0]):
            return cmd
    return None
