"""Export a task's report from the menu: Markdown, HTML, PDF, Word, JSON provenance, and its
sources as BibTeX or CSL-JSON.

The analyst picks a file; ``core``'s exporter (``Sourcebook.export``) writes it in the background
through ``Operations``; success is reported in the main window's status bar and failures through
:func:`desktop.errors.show_error`. HTML, PDF and Word carry an evidence appendix (each cited
passage's quote and a picture of its page with the words highlighted), and the JSON provenance
file holds the quote, pages and content hash per citation, so a reader outside the app can
check every claim.

Test seam: set :data:`save_path_hook` to a callable ``(parent, suggested_path, file_filter) ->
Path | None`` to supply the path without a modal dialog (``None`` = the user cancelled).

Threading: call on the UI thread; the export itself runs on the shared pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import cast

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog, QMainWindow, QWidget

from core.errors import ConfigError
from core.service import ExportFormat, Sourcebook
from desktop.errors import show_error
from desktop.operations import Operations

logger = logging.getLogger(__name__)

#: ``fmt`` -> (menu label, file suffix, file-dialog filter).
EXPORT_FORMATS: dict[str, tuple[str, str, str]] = {
    "md": ("Markdown", ".md", "Markdown (*.md)"),
    "html": ("Web page (HTML)", ".html", "Web page (*.html *.htm)"),
    "pdf": ("PDF", ".pdf", "PDF (*.pdf)"),
    "docx": ("Word document", ".docx", "Word document (*.docx)"),
    "json": ("Provenance (JSON)", ".json", "Provenance JSON (*.json)"),
    "bib": ("BibTeX", ".bib", "BibTeX (*.bib)"),
    "csl": ("CSL-JSON", ".csl.json", "CSL-JSON (*.json)"),
}

#: When set, called instead of the save dialog (tests, scripted screenshots).
save_path_hook: Callable[[QWidget, Path, str], Path | None] | None = None

_last_dir: Path | None = None


def _ask_path(parent: QWidget, suggested: Path, file_filter: str) -> Path | None:
    if save_path_hook is not None:
        return save_path_hook(parent, suggested, file_filter)
    path, _ = QFileDialog.getSaveFileName(parent, "Export report", str(suggested), file_filter)
    return Path(path) if path else None


def _default_dir() -> Path:
    if _last_dir is not None:
        return _last_dir
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(docs) if docs else Path.home()


def _status(parent: QWidget, text: str) -> None:
    window = parent.window()
    if isinstance(window, QMainWindow):
        window.statusBar().showMessage(text, 10_000)
    logger.info("%s", text)


def export_report_interactive(
    parent: QWidget, service: Sourcebook, ops: Operations, task_name: str, fmt: str
) -> None:
    """Ask where to save the task's report as ``fmt`` (a key of :data:`EXPORT_FORMATS`), then
    export it.

    Returns at once; the file is written in the background. Nothing happens if the user
    cancels the dialog.
    """
    global _last_dir
    if fmt not in EXPORT_FORMATS:
        show_error(
            parent,
            ConfigError(
                f"Unknown export format {fmt!r}.", hint=f"Use one of {', '.join(EXPORT_FORMATS)}."
            ),
        )
        return
    label, suffix, file_filter = EXPORT_FORMATS[fmt]
    stem = re.sub(r"[^\w.-]+", "-", task_name).strip("-.") or "report"
    path = _ask_path(parent, _default_dir() / f"{stem}{suffix}", file_filter)
    if path is None:
        return
    accepted = (suffix, *{"html": (".htm",), "csl": (".json",)}.get(fmt, ()))
    if not path.name.lower().endswith(accepted):
        path = path.with_name(path.name + suffix)
    _last_dir = path.parent
    export_fmt = cast(ExportFormat, fmt)  # checked against EXPORT_FORMATS above

    def work(_ctx: object) -> int:
        return len(service.export(task_name, export_fmt, path))

    def done(size: int) -> None:
        _status(parent, f"Exported the report as {label} to {path} ({_size(size)}).")

    def failed(exc: BaseException) -> None:
        if isinstance(exc, OSError):
            exc = ConfigError(
                f"Could not write {path}: {exc.strerror or exc}",
                hint="Choose a folder you can write to, and check the free disk space.",
            )
        show_error(parent, exc)

    ops.run(work, label=f"Exporting {task_name} as {label}", on_success=done, on_error=failed)


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.0f} KB"
