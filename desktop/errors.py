"""The one function in ``desktop/`` that turns an exception into a dialog.

A :class:`~core.errors.SourcebookError` carries ``message`` (what happened) and ``hint`` (what to
do); the dialog shows both and never a bare traceback. Any other exception is a bug: the dialog
says so in plain words and puts the traceback under "Show Details…".

Threading: call :func:`show_error` on the UI thread only (``Operations`` callbacks already run
there). The dialog is window-modal but opened with ``open()``, so the call returns at once and
never blocks an event loop (nor a test).

:func:`guarded` wraps an operation callback so it is dropped, not failing, when the widget it
updates was deleted meanwhile (a dialog closed while its work was still running).

Test seam: set :data:`error_hook` to a callable to receive ``(parent, exc)`` instead of a dialog,
or find the open dialog with :func:`open_error_dialogs` (its object name is
``"sourcebook-error"``).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from core.errors import CancelledError, IngestError, SourcebookError

logger = logging.getLogger(__name__)

ERROR_DIALOG_NAME = "sourcebook-error"

#: When set, :func:`show_error` calls this instead of opening a dialog (tests, headless runs).
error_hook: Callable[[QWidget | None, BaseException], None] | None = None

_open_boxes: list[QMessageBox] = []


def describe(exc: BaseException) -> tuple[str, str, str]:
    """Return ``(title, text, informative)`` for ``exc``: what happened and what to do."""
    if isinstance(exc, SourcebookError):
        title = "Cancelled" if isinstance(exc, CancelledError) else "Sourcebook"
        text = exc.message
        if isinstance(exc, IngestError) and exc.path and exc.path not in text:
            text = f"{text}\n\n{exc.path}"
        return title, text, exc.hint or ""
    return (
        "Unexpected error",
        f"Something went wrong: {type(exc).__name__}: {exc}",
        "This is a bug in Sourcebook. Your library was not changed by the failed step; "
        "please report it with the details below.",
    )


def show_error(parent: QWidget | None, exc: BaseException) -> None:
    """Show ``exc`` to the user in a non-blocking, window-modal message box."""
    if error_hook is not None:
        error_hook(parent, exc)
        return
    if isinstance(exc, SourcebookError):
        logger.info("showing error: %s", exc)
    else:
        logger.error("unexpected error shown to the user", exc_info=exc)
    title, text, informative = describe(exc)
    box = QMessageBox(parent)
    box.setObjectName(ERROR_DIALOG_NAME)
    box.setIcon(
        QMessageBox.Icon.Information
        if isinstance(exc, CancelledError)
        else QMessageBox.Icon.Warning
        if isinstance(exc, SourcebookError)
        else QMessageBox.Icon.Critical
    )
    box.setWindowTitle(title)
    box.setText(text)
    if informative:
        box.setInformativeText(informative)
    if not isinstance(exc, SourcebookError):
        box.setDetailedText("".join(traceback.format_exception(exc)))
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    box.setProperty("sourcebook_exception", exc)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    # A parentless box has no owner but Python: keep it alive until it is closed.
    _open_boxes.append(box)
    box.finished.connect(lambda _result, b=box: _forget(b))
    box.open()


def _forget(box: QMessageBox) -> None:
    if box in _open_boxes:
        _open_boxes.remove(box)


def open_error_dialogs() -> list[QMessageBox]:
    """The error dialogs currently open (for tests)."""
    if QApplication.instance() is None:
        return []
    return [b for b in _open_boxes if b.isVisible()]


def guarded(owner: QObject, fn: Callable[..., object]) -> Callable[..., None]:
    """``fn`` wrapped to do nothing once ``owner``'s C++ object is deleted.

    Operation callbacks are plain callables, so Qt cannot drop them when the widget they update
    is destroyed (a dialog closed, a test's window torn down) while the work is still running;
    without this they would raise ``RuntimeError: Internal C++ object already deleted``.
    """

    def call(*args: object) -> None:
        if shiboken6.isValid(owner):
            fn(*args)

    return call
