"""Search results as readable cards: the document's title (wrapped, never cut), the page, and
the snippet with the query's words marked.

Why a card rather than a title / page / snippet table: the library column is narrow (about
300 px on a laptop), and columns there cut titles to a few letters and snippets mid-word. Each
hit is one row of a :class:`SearchResults` tree whose item keeps the plain fields in its columns
(title, page, snippet: what accessibility tools and tests read), and :class:`HitDelegate` draws
them as one card in the only visible column, wrapped to its width.

Safety: titles and snippets are document text. They are HTML-escaped before the query's words
are wrapped in a marking tag, so a passage cannot inject markup (a ``<script>`` in a PDF stays
text), and the text documents that draw the cards never load a resource.

Threading: UI thread only; nothing here calls ``core``.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPoint, QSize, Qt, QTimer
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QFont,
    QPainter,
    QPalette,
    QResizeEvent,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QApplication,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from core.service import STOP_WORDS, SearchHit

logger = logging.getLogger(__name__)

ROLE_EVIDENCE = Qt.ItemDataRole.UserRole
ROLE_HTML = Qt.ItemDataRole.UserRole + 1
PAD = 6  # px around a card's text
MARK_STYLE = "font-weight:600; background-color:rgba(255, 196, 0, 90);"
_WORD = re.compile(r"\w+")
_Index = QModelIndex | QPersistentModelIndex


def query_terms(query: str) -> list[str]:
    """The words of ``query`` worth marking in a snippet: no function words, longest first (so
    a longer term wins where two overlap)."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in dict.fromkeys(words) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    return sorted(kept, key=len, reverse=True)


def mark_terms(text: str, terms: Iterable[str]) -> str:
    """``text`` as escaped HTML with each word that starts with a term marked (a query's
    "ship" marks "ships"). Matching runs on the plain text, so a term never matches inside an
    escape sequence."""
    terms = [t for t in terms if t]
    if not terms:
        return html.escape(text)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\w*", re.IGNORECASE)
    out: list[str] = []
    last = 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        out.append(f'<span style="{MARK_STYLE}">{html.escape(m.group(0))}</span>')
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def whole_words(snippet: str) -> str:
    """The snippet on one line, ending on a whole word: a snippet cut at a fixed length (it
    ends in "…") loses the piece of a word before the ellipsis."""
    text = " ".join(snippet.split())
    if text.endswith("…"):
        body = text[:-1].rstrip()
        space = body.rfind(" ")
        if space > len(body) // 2:
            body = body[:space].rstrip(" ,;:")
        text = body + " …"
    return text


def page_label(hit: SearchHit) -> str:
    """ "3" or "3–4" (1-based), "" for a passage without pages (a web page or a text file)."""
    if hit.page_start is None:
        return ""
    if hit.page_end not in (None, hit.page_start):
        return f"{hit.page_start + 1}–{(hit.page_end or 0) + 1}"
    return str(hit.page_start + 1)


def card_html(hit: SearchHit, terms: list[str]) -> str:
    """One hit as the HTML its card draws: title, where it is, marked snippet (all escaped)."""
    title = html.escape(hit.title or "Untitled")
    where = []
    page = page_label(hit)
    if page:
        where.append(f"page {page}" if "–" not in page else f"pages {page}")
    if hit.heading_path:
        where.append(html.escape(hit.heading_path[-1]))
    if hit.superseded:
        where.append("older version")
    meta = f"<div><small>{' · '.join(where)}</small></div>" if where else ""
    snippet = mark_terms(whole_words(hit.snippet), terms)
    return f"<div><b>{title}</b></div>{meta}<div>{snippet}</div>"


def tooltip_html(text: str) -> str:
    """Plain ``text`` as a rich-text tooltip: escaped, so nothing in it is read as markup."""
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def _document(html_text: str, width: int, font: QFont) -> QTextDocument:
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(font)
    doc.setHtml(html_text)
    doc.setTextWidth(max(width, 40))
    return doc


class HitDelegate(QStyledItemDelegate):
    """Draws a hit's card (``ROLE_HTML``) wrapped to the column's width, selection-aware.

    A card's laid-out text document is kept (by its HTML and width) and serves both its size
    and its painting: laying out rich text is the costly part, and a view asks for both many
    times (each repaint, each scroll)."""

    CACHE = 200  # documents kept: a search shows 20 hits, a few widths

    def __init__(self, view: QTreeWidget) -> None:
        super().__init__(view)
        self._view = view
        self._docs: dict[tuple[str, int], QTextDocument] = {}

    def _width(self, option: QStyleOptionViewItem) -> int:
        width = self._view.columnWidth(0) or option.rect.width()
        return int(width) - 2 * PAD

    def _doc(self, index: _Index, width: int, font: QFont) -> QTextDocument:
        text = str(index.data(ROLE_HTML) or "")
        key = (text, width)
        doc = self._docs.get(key)
        if doc is None:
            if len(self._docs) >= self.CACHE:
                self._docs.clear()
            doc = self._docs[key] = _document(text, width, font)
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = self._view.style() or QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, self._view)
        rect = opt.rect
        doc = self._doc(index, self._width(option), opt.font)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        palette = opt.palette
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        ctx.palette.setColor(QPalette.ColorRole.Text, palette.color(role))
        painter.save()
        painter.translate(rect.topLeft() + QPoint(PAD, PAD))
        painter.setClipRect(0, 0, rect.width() - PAD, rect.height() - PAD)
        doc.documentLayout().draw(painter, ctx)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        width = self._width(option)
        doc = self._doc(index, width, option.font)
        return QSize(width + 2 * PAD, int(doc.size().height()) + 2 * PAD)


class SearchResults(QTreeWidget):
    """The hits of one search as cards (see the module docstring). Items keep the plain title,
    page and snippet in columns 0-2 and the evidence id under ``ROLE_EVIDENCE``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("search-results")
        self.setHeaderLabels(["Title", "Page", "Snippet"])
        self.setColumnHidden(1, True)
        self.setColumnHidden(2, True)
        self.setHeaderHidden(True)
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(False)
        self.setWordWrap(True)
        self.setAlternatingRowColors(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setItemDelegateForColumn(0, HitDelegate(self))
        self.setAccessibleName("Search results")
        self._relayout = QTimer(self)  # cards re-wrap once per burst of resizes
        self._relayout.setSingleShot(True)
        self._relayout.setInterval(0)
        self._relayout.timeout.connect(self.doItemsLayout)

    def set_hits(self, hits: list[SearchHit], query: str) -> None:
        self.clear()
        terms = query_terms(query)
        for hit in hits:
            snippet = whole_words(hit.snippet)
            item = QTreeWidgetItem([hit.title, page_label(hit), snippet])
            item.setData(0, ROLE_EVIDENCE, hit.evidence_id)
            item.setData(0, ROLE_HTML, card_html(hit, terms))
            page = page_label(hit)
            where = f" · page {page}" if page else ""
            item.setToolTip(0, tooltip_html(f"{hit.title}{where}\n{hit.evidence_id}"))
            self.addTopLevelItem(item)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._relayout.start()
