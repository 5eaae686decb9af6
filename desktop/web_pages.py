"""Adding a web page from the app: ask for its address, or say that web access is off.

Sourcebook is offline by default (``settings.web.enabled`` is off). With it off, "Add web page…"
asks for no address and touches no network: it explains, in a non-blocking message box, that web
access is off and where to turn it on (Settings → Library and web → Web access), with a button
that opens the settings there. With it on, the address goes to the library panel's add, which
hands it to ``Sourcebook.add`` like a file path: ``core`` fetches it (and refuses what it must).

Test seam: set :data:`ask_url_hook` to a callable returning the address (or ``None``) instead of
the input dialog. The web-off box has the object name :data:`WEB_OFF_NAME`.

Threading: UI thread only; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog, QLineEdit, QMessageBox, QWidget

WEB_OFF_NAME = "web-access-off"
WEB_OFF_TEXT = "Web access is off, so web pages cannot be added."
WEB_OFF_INFO = (
    "Sourcebook works offline by default: nothing is fetched from the internet until you allow "
    "it. To add web pages, turn on Settings → Library and web → Web access (“Allow fetching web "
    "pages”), then use Add web page… again."
)

#: When set, :func:`ask_url` calls this instead of opening the input dialog (tests).
ask_url_hook: Callable[[QWidget], str | None] | None = None


def ask_url(parent: QWidget) -> str | None:
    """The address the user typed (``https://`` added when the scheme is missing), or None."""
    if ask_url_hook is not None:
        text = ask_url_hook(parent)
    else:
        text, ok = QInputDialog.getText(
            parent,
            "Add web page",
            "Address of the page (http:// or https://):",
            QLineEdit.EchoMode.Normal,
            "https://",
        )
        text = text if ok else None
    text = (text or "").strip()
    if not text or text in ("https://", "http://"):
        return None
    return text if "://" in text else f"https://{text}"


def explain_web_off(parent: QWidget, open_settings: Callable[[], None]) -> QMessageBox:
    """Say that web access is off and where to turn it on; "Open Settings…" calls
    ``open_settings``. Non-blocking (window-modal, opened with ``open()``); returns the box."""
    box = QMessageBox(parent)
    box.setObjectName(WEB_OFF_NAME)
    box.setIcon(QMessageBox.Icon.Information)
    box.setWindowTitle("Web access is off")
    box.setText(WEB_OFF_TEXT)
    box.setInformativeText(WEB_OFF_INFO)
    settings_button = box.addButton("Open Settings…", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Close)
    box.setDefaultButton(QMessageBox.StandardButton.Close)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    settings_button.clicked.connect(open_settings)
    box.open()
    return box
