"""The library panel: the documents, adding and removing them, and searching them.

Adds run as exclusive operations (library writes never overlap) with a row per add showing its
progress (``AddProgress`` through ``ctx.progress``) and a cancel button
(:class:`desktop.library_items.AddRow`; the documents' table model is there too). A batch where
some files fail keeps the others; the failures are listed in the add's row and reported once
through :func:`desktop.errors.show_error`. Every successful change is announced on
``Operations.library_did_change``, and this panel refreshes from that one signal (whoever made
the change). Web pages are added by address the same way (:mod:`desktop.web_pages` asks for it,
or explains that web access is off). When another embedder made the library's vectors, a
warning above everything says so and what to do (adds are refused until then).

Threading: all service calls go through :class:`~desktop.operations.Operations`; slots run on
the UI thread. Results of a refresh or a search that was overtaken by a newer one are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGridLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.errors import IngestError, SourcebookError
from core.service import AddProgress, Collection, Document, LibraryChanges, SearchHit, Sourcebook
from desktop import web_pages
from desktop.errors import guarded, show_error
from desktop.library_items import COLUMNS, AddRow, DocumentsModel
from desktop.operations import OpContext, Operations, OpHandle
from desktop.search_results import ROLE_EVIDENCE, SearchResults

logger = logging.getLogger(__name__)

SEARCH_DELAY_MS = 350


def confirm_remove(parent: QWidget, titles: Sequence[str]) -> bool:
    """Ask before removing (module-level so tests can replace it)."""
    shown = "\n".join(f"• {t}" for t in titles[:8])
    more = f"\n… and {len(titles) - 8} more" if len(titles) > 8 else ""
    answer = QMessageBox.question(
        parent,
        "Remove documents",
        f"Remove these documents from the library?\n\n{shown}{more}\n\n"
        "The files on disk are not touched; reports that cite them keep their quotes.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


class LibraryPanel(QWidget):
    """Documents table, search box and results, add/remove; see the module docstring.

    Signals: ``evidence_requested(str)`` when a search hit is activated (the main window shows
    it in the evidence viewer); ``documents_loaded(list)`` after each refresh;
    ``settings_requested()`` when the user asks to open the settings (to turn web access on).
    """

    evidence_requested = Signal(str)
    documents_loaded = Signal(object)
    settings_requested = Signal()

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        self._refresh_gen = 0
        self._search_gen = 0
        self._hits: list[SearchHit] = []
        self._searching: OpHandle[list[SearchHit]] | None = None
        self._refresh_timer = QTimer(self)  # coalesces refreshes during a long add
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(800)
        self._refresh_timer.timeout.connect(self.refresh)
        self._search_again = False
        self.web_off_box: QMessageBox | None = None  # the last "web access is off" message
        self.setAcceptDrops(True)

        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search the library (Ctrl+F)")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.setAccessibleName("Search the library")
        self.search_box.returnPressed.connect(self.run_search)
        self.search_box.textChanged.connect(self._search_changed)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self.run_search)
        self.results = SearchResults()
        self.results.itemActivated.connect(self._hit_activated)
        self.results.setVisible(False)
        self.search_status = QLabel("")
        self.search_status.setVisible(False)

        self.model = DocumentsModel(self)
        self.table = QTableView()
        self.table.setObjectName("documents")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        # Titles wrap (a row grows to fit its title) in a column about 300 px wide on a laptop;
        # the passage count, which an analyst rarely needs, is in the tooltip instead.
        self.table.setWordWrap(True)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(COLUMNS)):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setColumnHidden(COLUMNS.index("Passages"), True)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        remove_key = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table)
        remove_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        remove_key.activated.connect(self.remove_selected)
        # Another embedder made the vectors: adds are refused until the library is re-embedded.
        self.embedder_warning = QLabel("")
        self.embedder_warning.setObjectName("embedder-warning")
        self.embedder_warning.setWordWrap(True)
        self.embedder_warning.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.embedder_warning.setStyleSheet(
            "QLabel#embedder-warning { background: rgba(210, 153, 34, 0.20); padding: 4px; }"
        )
        self.embedder_warning.setVisible(False)
        self.empty_label = QLabel("Opening the library…")
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self.add_files_button = QPushButton("Add files…")
        self.add_files_button.clicked.connect(self.add_files_dialog)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.clicked.connect(self.add_folder_dialog)
        self.add_web_button = QPushButton("Add web page…")
        self.add_web_button.setToolTip("Add a web page by its address (Ctrl+L)")
        self.add_web_button.clicked.connect(self.add_web_page_dialog)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected documents (Delete)")
        self.remove_button.setEnabled(False)
        self.remove_button.clicked.connect(self.remove_selected)
        # Two rows, so the library column fits a laptop screen's third (about 300 px).
        buttons = QGridLayout()
        buttons.addWidget(self.add_files_button, 0, 0)
        buttons.addWidget(self.add_folder_button, 0, 1)
        buttons.addWidget(self.add_web_button, 1, 0, 1, 2, Qt.AlignmentFlag.AlignLeft)
        buttons.addWidget(self.remove_button, 1, 3)
        buttons.setColumnStretch(2, 1)
        self.adds = QVBoxLayout()
        self.adds.setContentsMargins(0, 0, 0, 0)

        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.search_box)
        top_layout.addWidget(self.search_status)
        top_layout.addWidget(self.results, 1)
        docs = QWidget()
        docs_layout = QVBoxLayout(docs)
        docs_layout.setContentsMargins(0, 0, 0, 0)
        docs_layout.addWidget(self.empty_label)
        docs_layout.addWidget(self.table, 1)
        docs_layout.addLayout(self.adds)
        docs_layout.addLayout(buttons)
        self._split = QSplitter(Qt.Orientation.Vertical)
        self._split.addWidget(top)
        self._split.addWidget(docs)
        self._split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.embedder_warning)
        layout.addWidget(self._split)
        ops.library_did_change.connect(lambda _changes: self.refresh())

    # ---------------------------------------------------------------- documents

    @property
    def documents(self) -> list[Document]:
        return list(self.model.docs)

    def refresh(self) -> None:
        """Reload documents and collections in the background (opens the library once)."""
        self._refresh_gen += 1
        gen = self._refresh_gen
        service = self._service

        def load(ctx: OpContext) -> tuple[list[Document], list[Collection], str | None]:
            docs = service.documents(include_superseded=False)
            return docs, service.collections(), service.embedder_mismatch()

        self._ops.run(
            load,
            label="Reading the library",
            on_success=guarded(self, lambda res: self._loaded(gen, *res)),
            on_error=guarded(self, lambda exc: self._load_failed(gen, exc)),
        )

    def _loaded(
        self,
        gen: int,
        docs: list[Document],
        collections: list[Collection],
        mismatch: str | None,
    ) -> None:
        if gen != self._refresh_gen:
            return
        self.embedder_warning.setText(mismatch or "")
        self.embedder_warning.setVisible(bool(mismatch))
        self.model.set_documents(docs, collections)
        # An empty Collections column only takes room from the titles.
        self.table.setColumnHidden(
            COLUMNS.index("Collections"), not any(c.doc_ids for c in collections)
        )
        self.empty_label.setText(
            "The library is empty. Add PDFs, text, Markdown or HTML files with “Add files…” "
            "or drop them here; add a web page by its address with “Add web page…”."
        )
        self.empty_label.setVisible(not docs)
        self._selection_changed()
        self.documents_loaded.emit(list(self.model.docs))

    def _load_failed(self, gen: int, exc: BaseException) -> None:
        if gen == self._refresh_gen:
            self.empty_label.setText("The library could not be opened.")
            show_error(self, exc)

    def selected_documents(self) -> list[Document]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.docs[r] for r in rows if r < len(self.model.docs)]

    def _selection_changed(self, *_args: object) -> None:
        self.remove_button.setEnabled(bool(self.selected_documents()))

    # ---------------------------------------------------------------- adding

    def add_files_dialog(self) -> None:
        patterns = " ".join(f"*{s}" for s in self._service.supported_suffixes())
        files, _ = QFileDialog.getOpenFileNames(
            self, "Add files", "", f"Documents ({patterns});;All files (*)"
        )
        if files:
            self.add_paths([Path(f) for f in files])

    def add_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder (and its subfolders)")
        if folder:
            self.add_paths([Path(folder)])

    def add_web_page_dialog(self) -> None:
        """Ask for a page's address and add it; with web access off, say so and where to
        turn it on instead (nothing touches the network)."""
        if not self._service.settings.web.enabled:
            self.web_off_box = web_pages.explain_web_off(self, self.settings_requested.emit)
            return
        url = web_pages.ask_url(self)
        if url:
            self.add_paths([url])

    def add_paths(self, paths: Sequence[Path | str]) -> OpHandle[LibraryChanges] | None:
        """Add files, folders and (web access on) web addresses in the background, with a
        progress row and cancel."""
        paths = list(paths)
        if not paths:
            return None
        first = paths[0]
        if len(paths) > 1:
            what = f"{len(paths)} items"
        else:
            what = first.name if isinstance(first, Path) else first
        row = AddRow(f"Adding {what}…", self)
        self.adds.addWidget(row)
        service = self._service

        def add(ctx: OpContext) -> LibraryChanges:
            return service.add(paths, progress=ctx.progress, cancel=ctx.cancel)

        handle = self._ops.run(
            add,
            label=f"Adding {what}",
            exclusive=True,
            on_progress=guarded(self, lambda value: self._add_progress(row, value)),
            on_success=guarded(self, lambda changes: self._added(row, changes)),
            on_error=guarded(self, lambda exc: self._add_failed(row, exc)),
        )
        row.handle = handle
        return handle

    def _add_progress(self, row: AddRow, value: object) -> None:
        if shiboken6.isValid(row):
            row.on_progress(value)
        if isinstance(value, AddProgress) and value.stage in ("indexing", "done"):
            # A staged document is keyword-searchable already: list it (status "indexing").
            self._refresh_timer.start()

    def _added(self, row: AddRow, changes: LibraryChanges) -> None:
        cancelled = row.handle is not None and row.handle.cancel_event.is_set()
        added = len(changes.added)
        unchanged = sum(1 for r in changes.results if r.outcome == "unchanged")
        failed = changes.failed
        parts = [f"Added {added} document{'s' if added != 1 else ''}"]
        if unchanged:
            parts.append(f"{unchanged} already in the library")
        if failed:
            parts.append(f"{len(failed)} could not be added")
        if changes.skipped:
            parts.append(f"{len(changes.skipped)} skipped (unsupported type)")
        if cancelled:
            parts.append("cancelled")
        lines = [f"✗ {Path(r.source).name}: {r.error or 'failed'}" for r in failed]
        lines += [f"– {Path(s).name}: skipped, unsupported type" for s in changes.skipped[:10]]
        if len(changes.skipped) > 10:
            lines.append(f"… and {len(changes.skipped) - 10} more skipped")
        row.finish(", ".join(parts) + ".", lines)
        if changes.results:
            self._ops.library_did_change.emit(changes)
        if failed:
            show_error(self, _failures_error(changes))

    def _add_failed(self, row: AddRow, exc: BaseException) -> None:
        row.finish("Adding failed.", [str(exc)])
        show_error(self, exc)
        self.refresh()  # part of the batch may have been stored before the failure

    # ---------------------------------------------------------------- drag and drop

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragEnterEvent) -> None:  # type: ignore[override]
        self.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.add_paths(paths)
        else:
            event.ignore()

    # ---------------------------------------------------------------- removing

    def remove_selected(self) -> None:
        docs = self.selected_documents()
        if not docs or not confirm_remove(self, [d.title for d in docs]):
            return
        service = self._service
        ids = [d.doc_id for d in docs]

        def remove(ctx: OpContext) -> LibraryChanges:
            changes = LibraryChanges()
            for doc_id in ids:
                if ctx.cancelled:
                    break
                changes.removed.extend(service.remove(doc_id).removed)
            return changes

        self._ops.run(
            remove,
            label=f"Removing {len(ids)} document{'s' if len(ids) != 1 else ''}",
            exclusive=True,
            on_success=self._ops.library_did_change.emit,
            on_error=guarded(self, self._remove_failed),
        )

    def _remove_failed(self, exc: BaseException) -> None:
        show_error(self, exc)
        self.refresh()  # some documents may have been removed before the failure

    # ---------------------------------------------------------------- search

    def focus_search(self) -> None:
        self.search_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search_box.selectAll()

    def _search_changed(self, text: str) -> None:
        if text.strip():
            self._search_timer.start()
        else:
            self._search_timer.stop()
            self._search_gen += 1
            self.results.clear()
            self.results.setVisible(False)
            self.search_status.setVisible(False)

    def run_search(self) -> None:
        """Search now (Enter, or shortly after typing stops)."""
        self._search_timer.stop()
        query = self.search_box.text().strip()
        if not query:
            return
        self._search_gen += 1
        gen = self._search_gen
        self.search_status.setText("Searching…")
        self.search_status.setVisible(True)
        if self._searching is not None:
            # One search at a time: the running one's result is dropped (gen moved on) and
            # the latest text is searched when it ends, so fast typing never piles up work.
            self._search_again = True
            return
        service = self._service
        handle = self._ops.run(
            lambda ctx: service.search(query, k=20),
            label="Searching",
            on_success=guarded(self, lambda hits: self._show_hits(gen, query, hits)),
            on_error=guarded(self, lambda exc: self._search_failed(gen, exc)),
        )
        handle.finished.connect(guarded(self, self._search_finished))
        self._searching = handle

    def _search_finished(self) -> None:
        self._searching = None
        if self._search_again:
            self._search_again = False
            self.run_search()

    def _show_hits(self, gen: int, query: str, hits: list[SearchHit]) -> None:
        if gen != self._search_gen:
            return
        self._hits = hits
        self.results.set_hits(hits, query)
        self.results.setVisible(True)
        top, bottom = self._split.sizes()
        total = top + bottom
        if top < total * 3 // 5 - 20:  # the results get most of the panel, the documents the rest
            self._split.setSizes([total * 3 // 5, total - total * 3 // 5])
        self.search_status.setText(
            f"{len(hits)} result{'s' if len(hits) != 1 else ''} for “{query}”"
            if hits
            else f"Nothing found for “{query}”."
        )
        first = self.results.topLevelItem(0)
        if first is not None:
            self.results.setCurrentItem(first)

    def _search_failed(self, gen: int, exc: BaseException) -> None:
        if gen == self._search_gen:
            self.search_status.setText("Search failed.")
            show_error(self, exc)

    @property
    def hits(self) -> list[SearchHit]:
        return list(self._hits)

    def _hit_activated(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        evidence_id = item.data(0, ROLE_EVIDENCE)
        if evidence_id:
            self.evidence_requested.emit(str(evidence_id))


def _failures_error(changes: LibraryChanges) -> SourcebookError:
    """One error describing a batch's failed files (the rest were added)."""
    failed = changes.failed
    if len(failed) == 1 and len(changes.results) == 1:
        r = failed[0]
        return IngestError(r.error or "The file could not be added.", path=r.source, hint=r.hint)
    lines = "\n".join(f"• {Path(r.source).name}: {r.error}" for r in failed[:10])
    more = f"\n… and {len(failed) - 10} more" if len(failed) > 10 else ""
    kept = len(changes.results) - len(failed)
    return SourcebookError(
        f"{len(failed)} of {len(changes.results)} files could not be added:\n{lines}{more}",
        hint=f"The other {kept} were processed normally. "
        + (failed[0].hint or "Fix or remove the files above and add them again."),
    )
