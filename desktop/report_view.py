"""The verified report: Markdown with clickable citations, Sources, checks and status.

Why a custom view rather than a plain browser: the product's promise is that every claim can be
checked, so each citation number is a link that opens the cited passage (``citation_activated``
carries the ``CitationRecord``), and what the citation check found — flagged claims, removed
citations, the run's status and its reasons — stays on screen next to the text instead of in a
log.

Safety: the Markdown was sanitized by ``core`` (safe links only, raw HTML escaped); it is still
rendered with raw HTML switched off, no resource (image, stylesheet) is ever loaded, and no link
is followed inside the widget. Citation links use the private ``cite:`` scheme; a plain
``http(s)`` link is handed to the system browser only when the user clicks it.

Hovering a citation shows its quoted words and page (:func:`desktop.report_marks.citation_tooltip`);
each "⚠" that ``core`` puts after a flagged sentence becomes a marker: the sentence is tinted, the
reason shows on hover, a click opens the passage the claim cites, and the list below the text
holds every flag. The status is the first line, in words (:func:`desktop.report_marks.headline`).

Numbering: ``core`` gives one number per document version, so ``[2]`` may stand for several
passages of the same document. Each occurrence is linked to the passage whose words overlap most
with the sentence it ends (the first passage on a tie).

Threading: UI thread only; rendering is cheap (no core calls).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QPoint, Qt, QUrl, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QDesktopServices,
    QHelpEvent,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTextBrowser,
    QToolTip,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.service import Report
from desktop.report_marks import (
    FLAG_SCHEME,
    citation_tooltip,
    flag_tooltip,
    headline,
    link_flags,
    plain_claim,
    sentence_start,
)

logger = logging.getLogger(__name__)

CITE_SCHEME = "cite"
SOURCE_COLUMN_MAX = 260  # px; the Sources list's title column
ROLE_INDEX = Qt.ItemDataRole.UserRole

# What each run status means to an analyst (shared by the research and history panels).
STATUS_TEXT: dict[str, str] = {
    "answered": "Answered: every claim is supported by its cited passage.",
    "insufficient_evidence": "Insufficient evidence: the sources read do not establish an answer.",
    "partial": "Partial answer: read the notes below before relying on it.",
    "partial_retrieval": "Partial answer: some searches or reads failed.",
    "budget_exhausted": "Partial answer: a researcher ran out of its search budget.",
    "recording_failed": "Not saved: the task log could not be written.",
    "cancelled": "Cancelled: the run was stopped. Resume it from History to continue.",
    "running": "Interrupted or still running: it can be resumed.",
    "clarifying": "Waiting for answers to clarifying questions.",
}
STATUS_SHORT: dict[str, str] = {
    "answered": "Answered",
    "insufficient_evidence": "Insufficient evidence",
    "partial": "Partial",
    "partial_retrieval": "Partial (retrieval failed)",
    "budget_exhausted": "Partial (budget used up)",
    "recording_failed": "Not saved",
    "cancelled": "Cancelled",
    "running": "Interrupted",
    "clarifying": "Clarifying",
}
_GOOD = frozenset({"answered"})
_BAD = frozenset({"insufficient_evidence", "recording_failed", "cancelled"})

FLAG_TINT = QColor(230, 160, 20, 60)  # a flagged sentence, readable on light and dark palettes
FLAG_MARK = QColor(200, 120, 0)
EMPTY_HINT = (
    "**No report yet.** Ask a question in the Research tab (Ctrl+N) and press Enter; the "
    "verified report opens here.\n\n"
    "Each **[n]** in the report cites a passage: hover it to read the quoted words and the "
    "page, click it to open the page with those words highlighted in the evidence viewer on the "
    "right. A **⚠** marks a claim the check could not confirm, with the reason.\n\n"
    "Past reports are in History (Ctrl+H)."
)

_CITE_RE = re.compile(r"(?<!\\)\[(\d{1,4})\](?![(:])")
_WORD_RE = re.compile(r"\w+")
_SENTENCE_END = ".!?\n"


def status_short(status: str) -> str:
    return STATUS_SHORT.get(status, status.replace("_", " ").capitalize())


def status_text(status: str) -> str:
    return STATUS_TEXT.get(status, status.replace("_", " ").capitalize())


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text) if len(w) > 2}


def link_citations(report: Report) -> str:
    """The report's Markdown with each ``[n]`` turned into a ``cite:<index>`` link.

    ``index`` is the position in ``report.citations`` of the passage this occurrence stands for.
    Numbers without a record (which ``core`` never produces) stay plain text.
    """
    by_number: dict[int, list[int]] = {}
    for i, rec in enumerate(report.citations):
        by_number.setdefault(rec.number, []).append(i)
    quotes = [_words(rec.quote) for rec in report.citations]
    text = report.markdown
    body_end = text.find("\n## Sources")
    body_end = len(text) if body_end < 0 else body_end

    def sub(m: re.Match[str]) -> str:
        if m.start() >= body_end:
            return m.group(0)
        indices = by_number.get(int(m.group(1)))
        if not indices:
            return m.group(0)
        best = indices[0]
        if len(indices) > 1:
            start = max(text.rfind(c, 0, m.start()) for c in _SENTENCE_END) + 1
            sentence = _words(text[start : m.start()])
            best = max(indices, key=lambda i: (len(sentence & quotes[i]), -i))
        return f"[\\[{m.group(1)}\\]]({CITE_SCHEME}:{best})"

    return _CITE_RE.sub(sub, text)


class _SafeBrowser(QTextBrowser):
    """A text browser that never loads a resource and never navigates by itself; on hover it
    shows the tooltip ``tip_at(point)`` gives for that point of the viewport."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setObjectName("report-text")
        self.tip_at: Callable[[QPoint], str] = lambda _point: ""

    def loadResource(self, type: int, name: QUrl | str, /) -> Any:  # Qt's signature
        logger.debug("report view refused to load %s", name)
        return None

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            tip = self.tip_at(event.pos())
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)


class ReportView(QWidget):
    """Shows one verified report (see the module docstring).

    Signal ``citation_activated(CitationRecord)``: a citation link, a Sources entry or a flagged
    claim was activated; the main window opens the evidence viewer on it.
    """

    citation_activated = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._report: Report | None = None

        self.title = QLabel()
        self.title.setObjectName("report-question")
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)

        self.status = QLabel()
        self.status.setObjectName("report-status")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setMargin(6)

        self.browser = _SafeBrowser()
        self.browser.anchorClicked.connect(self._on_anchor)
        self.browser.tip_at = self.tooltip_at

        self.sources = QTreeWidget()
        self.sources.setObjectName("report-sources")
        self.sources.setHeaderLabels(["#", "Source", "Pages", "Quoted passage"])
        self.sources.setRootIsDecorated(False)
        self.sources.setToolTip("Double-click or press Enter to open the cited passage.")
        self.sources.itemActivated.connect(self._on_source)

        self.flagged_label = QLabel(
            "Flagged claims (uncited, or not clearly supported by their citation)"
        )
        self.flagged = QListWidget()
        self.flagged.setObjectName("report-flagged")
        self.flagged.setWordWrap(True)
        self.flagged.setToolTip("Activate a flagged claim to open the passage it cites.")
        self.flagged.itemActivated.connect(self._on_flagged)

        self.removed_label = QLabel("Citations removed because they could not be verified")
        self.removed = QListWidget()
        self.removed.setObjectName("report-removed")
        self.removed.setWordWrap(True)

        checks = QWidget()
        lay = QVBoxLayout(checks)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Sources"))
        lay.addWidget(self.sources, 3)
        lay.addWidget(self.flagged_label)
        lay.addWidget(self.flagged, 1)
        lay.addWidget(self.removed_label)
        lay.addWidget(self.removed, 1)

        self._checks = checks
        split = QSplitter(Qt.Orientation.Vertical)
        split.setObjectName("report-split")  # its sizes are remembered (desktop.pane_memory)
        split.addWidget(self.browser)
        split.addWidget(checks)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        self.split = split

        root = QVBoxLayout(self)
        root.addWidget(self.title)
        root.addWidget(self.status)
        root.addWidget(split, 1)
        self.clear()

    # ------------------------------------------------------------------ public

    def clear(self) -> None:
        """Show the empty state."""
        self._report = None
        self.title.setText("")
        self.title.setVisible(False)
        self.status.setText("")
        self.status.setVisible(False)
        self.status.setStyleSheet("")
        self.browser.document().setMarkdown(EMPTY_HINT)
        self.sources.clear()
        self.flagged.clear()
        self.removed.clear()
        self._show_checks()

    def show_report(self, report: Report) -> None:
        """Render ``report`` (cheap: UI thread)."""
        self._report = report
        self.title.setText(report.question)
        self.title.setVisible(True)
        lines = [headline(report, status_text(report.status))]
        lines += [f"• {r}" for r in report.status_reasons]
        self.status.setText("\n".join(lines))
        self.status.setVisible(True)
        self.status.setToolTip(f"Task: {report.task}")
        self.status.setStyleSheet(_status_style(report.status))
        doc_features = (
            QTextDocument.MarkdownFeature.MarkdownDialectGitHub
            | QTextDocument.MarkdownFeature.MarkdownNoHTML
        )
        body = link_flags(_body(link_citations(report), report), report.flagged_claims)
        self.browser.document().setMarkdown(body or "*The report is empty.*", doc_features)
        self._mark_flagged_sentences()

        self.sources.clear()
        for i, rec in enumerate(report.citations):
            pages = ", ".join(str(p) for p in rec.pages)
            title = rec.title + (" (superseded version)" if rec.superseded else "")
            quote = " ".join(rec.quote.split())
            row = QTreeWidgetItem([str(rec.number), title, pages, quote[:160]])
            row.setData(0, ROLE_INDEX, i)
            row.setToolTip(1, f"{title}\n{rec.source_uri}")
            row.setToolTip(3, quote[:600])
            self.sources.addTopLevelItem(row)
        for col in range(3):
            self.sources.resizeColumnToContents(col)
        # Long titles are elided (full title in the tooltip) so the quoted passage shows.
        self.sources.setColumnWidth(1, min(self.sources.columnWidth(1), SOURCE_COLUMN_MAX))

        self.flagged.clear()
        for f in report.flagged_claims:
            item = QListWidgetItem(f"⚠ {plain_claim(f.sentence)}\n    {f.reason}")
            item.setData(ROLE_INDEX, self._index_of(f.evidence_ids))
            self.flagged.addItem(item)
        self.removed.clear()
        for r in report.removed_citations:
            self.removed.addItem(QListWidgetItem(f"{r.evidence_id}: {r.reason}"))
        self._show_checks()

    def current_report(self) -> Report | None:
        return self._report

    def citation_links(self) -> list[tuple[str, str]]:
        """(visible text, href) of every link in the rendered report, in order (tests, a11y),
        but the ⚠ markers of flagged claims (:meth:`flag_markers`)."""
        out: list[tuple[str, str]] = []
        block = self.browser.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                href = frag.charFormat().anchorHref() if frag.isValid() else ""
                if frag.charFormat().isAnchor() and not href.startswith(f"{FLAG_SCHEME}:"):
                    out.append((frag.text(), href))
                it += 1
            block = block.next()
        return out

    def tooltip_at(self, point: QPoint) -> str:
        """The hover text at ``point`` of the report's viewport: a citation's quote and page, a
        flag's reason, or "" (tooltips, tests)."""
        report = self._report
        if report is None:
            return ""
        href = self.browser.anchorAt(point)
        scheme, _, ref = href.partition(":")
        if ref.isdigit():
            i = int(ref)
            if scheme == CITE_SCHEME and i < len(report.citations):
                return citation_tooltip(report.citations[i])
            if scheme == FLAG_SCHEME and i < len(report.flagged_claims):
                return flag_tooltip(report.flagged_claims[i])
        return self.browser.cursorForPosition(point).charFormat().toolTip()

    def flag_markers(self) -> list[tuple[int, str]]:
        """(flagged claim index, the sentence it marks) for each marker in the text, in order."""
        out = []
        for href, start, end in self._anchors(FLAG_SCHEME):
            cursor = QTextCursor(self.browser.document())
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            out.append((int(href.partition(":")[2]), cursor.selectedText().strip()))
        return out

    def activate_citation(self, index: int) -> None:
        """Emit ``citation_activated`` for ``report.citations[index]`` (keyboard, tests)."""
        if self._report is not None and 0 <= index < len(self._report.citations):
            self.citation_activated.emit(self._report.citations[index])

    # ------------------------------------------------------------------ internals

    def _show_checks(self) -> None:
        self._checks.setVisible(self._report is not None)
        has_flagged = self.flagged.count() > 0
        has_removed = self.removed.count() > 0
        self.flagged_label.setVisible(has_flagged)
        self.flagged.setVisible(has_flagged)
        self.removed_label.setVisible(has_removed)
        self.removed.setVisible(has_removed)

    def _anchors(self, scheme: str) -> list[tuple[str, int, int]]:
        """(href, sentence start, anchor start) of each ``scheme:`` link, in document order."""
        out: list[tuple[str, int, int]] = []
        block = self.browser.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                href = frag.charFormat().anchorHref() if frag.isValid() else ""
                if href.startswith(f"{scheme}:") and href.partition(":")[2].isdigit():
                    offset = frag.position() - block.position()
                    start = block.position() + sentence_start(block.text(), offset)
                    out.append((href, start, frag.position()))
                it += 1
            block = block.next()
        return out

    def _mark_flagged_sentences(self) -> None:
        """Tint each flagged sentence (its reason on hover) and colour its ⚠ marker."""
        report = self._report
        if report is None:
            return
        doc = self.browser.document()
        for href, start, at in self._anchors(FLAG_SCHEME):
            i = int(href.partition(":")[2])
            if i >= len(report.flagged_claims):
                continue
            tint = QTextCharFormat()
            tint.setBackground(QBrush(FLAG_TINT))
            tint.setToolTip(flag_tooltip(report.flagged_claims[i]))
            cursor = QTextCursor(doc)
            cursor.setPosition(start)
            cursor.setPosition(at, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(tint)
            mark = QTextCharFormat()
            mark.setForeground(QBrush(FLAG_MARK))
            mark.setFontUnderline(False)
            mark.setFontWeight(700)
            cursor.setPosition(at)
            cursor.setPosition(at + 1, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(mark)

    def _index_of(self, evidence_ids: list[str]) -> int:
        if self._report is None:
            return -1
        for ev in evidence_ids:
            for i, rec in enumerate(self._report.citations):
                if rec.evidence_id == ev or rec.evidence_id.split("#")[0] == ev.split("#")[0]:
                    return i
        return -1

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() in (CITE_SCHEME, FLAG_SCHEME):
            try:
                index = int(url.path())
            except ValueError:
                logger.warning("bad report link %s", url.toString())
                return
            if url.scheme() == CITE_SCHEME:
                self.activate_citation(index)
            elif 0 <= index < self.flagged.count():
                item = self.flagged.item(index)
                self.flagged.setCurrentItem(item)
                self.flagged.scrollToItem(item)
                self._on_flagged(item)
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)  # the system browser, on the user's click only
        else:
            logger.info("ignored link %s", url.toString())

    def _on_source(self, item: QTreeWidgetItem, _column: int) -> None:
        self.activate_citation(int(item.data(0, ROLE_INDEX)))

    def _on_flagged(self, item: QListWidgetItem) -> None:
        self.activate_citation(int(item.data(ROLE_INDEX)))


def _body(markdown: str, report: Report) -> str:
    """The report without the Sources and Flagged claims sections ``core`` appends: the lists
    below the text show them (and open the passages), so they are not repeated above."""
    heads = ["\n## Sources"] if report.citations else []
    heads += ["\n## Flagged claims"] if report.flagged_claims else []
    cuts = [i for head in heads if (i := markdown.rfind(head)) >= 0]
    return markdown[: min(cuts)].rstrip() + "\n" if cuts else markdown


def _status_style(status: str) -> str:
    # Translucent tints read on both light and dark palettes; the words carry the meaning.
    if status in _GOOD:
        tint = "rgba(46, 160, 67, 0.18)"
    elif status in _BAD:
        tint = "rgba(218, 54, 51, 0.18)"
    else:
        tint = "rgba(210, 153, 34, 0.20)"
    return f"QLabel#report-status {{ background: {tint}; border-radius: 4px; }}"
