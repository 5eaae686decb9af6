"""The library panel's parts: the documents as a table model, and the row that shows one add
in progress (what it is doing, a progress bar, cancel; then its outcome and any failures)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QVBoxLayout, QWidget

from core.service import AddProgress, Collection, Document, LibraryChanges, text_lost
from desktop.operations import OpHandle

COLUMNS = ("Title", "Pages", "Passages", "Status", "Collections")
_Index = QModelIndex | QPersistentModelIndex


def status_text(doc: Document) -> str:
    """Ready / indexing, plus the document's problems (text not read: image-only pages left
    unread) and notes (how text was read: by OCR, in a guessed encoding)."""
    lost = [p for p in doc.problems if text_lost(p)]
    notes = [p for p in doc.problems if not text_lost(p)]
    out = doc.status
    if lost:
        out += "; problems: " + "; ".join(lost)
    if notes:
        out += "; notes: " + "; ".join(notes)
    return out


def status_cell(doc: Document) -> str:
    """The status column: "problems" when text was not read, "ready, with notes" when all
    of it was but some by OCR or a guessed encoding (the tooltip says which)."""
    if any(text_lost(p) for p in doc.problems):
        return "problems"
    return f"{doc.status}, with notes" if doc.problems else doc.status


class DocumentsModel(QAbstractTableModel):
    """The documents as a table; replaced wholesale on each refresh (libraries are small)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.docs: list[Document] = []
        self._collections: dict[str, list[str]] = {}

    def set_documents(self, docs: list[Document], collections: list[Collection]) -> None:
        self.beginResetModel()
        self.docs = sorted(docs, key=lambda d: d.title.lower())
        self._collections = {}
        for c in collections:
            for doc_id in c.doc_ids:
                self._collections.setdefault(doc_id, []).append(c.name)
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.docs)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        doc = self.docs[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                doc.title,
                str(doc.page_count) if doc.page_count else "–",
                str(doc.passage_count),
                status_cell(doc),
                ", ".join(sorted(self._collections.get(doc.doc_id, []))),
            )[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            return (
                f"{doc.title}\n{doc.source_uri}\n{doc.page_count or 'no'} pages, "
                f"{doc.passage_count} passages · {doc.doc_id} · {status_text(doc)}"
            )
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class AddRow(QWidget):
    """One add in progress: what it is doing, a progress bar, cancel; then its outcome."""

    def __init__(self, label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.handle: OpHandle[LibraryChanges] | None = None
        self.label = QLabel(label)
        self.label.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy until the first progress report
        self.bar.setTextVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop adding; nothing half-added is kept")
        self.cancel_button.clicked.connect(self._cancel)
        self.dismiss_button = QToolButton()
        self.dismiss_button.setText("✕")
        self.dismiss_button.setToolTip("Dismiss")
        self.dismiss_button.setAccessibleName("Dismiss")
        self.dismiss_button.setVisible(False)
        self.dismiss_button.clicked.connect(self.deleteLater)
        self.failures = QLabel("")
        self.failures.setWordWrap(True)
        self.failures.setVisible(False)
        self.failures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel_button)
        row.addWidget(self.dismiss_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.addWidget(self.label)
        layout.addLayout(row)
        layout.addWidget(self.failures)

    def _cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.cancel_button.setEnabled(False)
            self.label.setText("Cancelling…")

    def on_progress(self, value: object) -> None:
        if not isinstance(value, AddProgress):
            return
        step = {"extracting": 0.1, "indexing": 0.5, "embedding": 0.6, "done": 1.0}[value.stage]
        if value.stage == "embedding" and value.of:
            step = 0.6 + 0.4 * value.done / value.of
        elif value.stage == "extracting" and value.of:
            step = 0.5 * value.done / value.of
        total = max(value.total, value.index + 1)
        self.bar.setRange(0, 1000)
        self.bar.setValue(int(1000 * (value.index + step) / total))
        name = Path(value.source).name or value.source
        if not (self.handle and self.handle.cancel_event.is_set()):
            self.label.setText(f"{name}: {value.stage} ({value.index + 1} of {total})")

    def finish(self, text: str, failures: list[str]) -> None:
        self.cancel_button.setVisible(False)
        self.bar.setRange(0, 1)
        self.bar.setValue(1)
        self.label.setText(text)
        if failures:
            self.failures.setText("\n".join(failures))
            self.failures.setVisible(True)
            self.dismiss_button.setVisible(True)
        else:
            QTimer.singleShot(5000, self.deleteLater)
