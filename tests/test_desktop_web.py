"""Adding a web page from the app (issue 6): File → Add web page… (Ctrl+L) and the library
panel's button. With web access off the app explains where to turn it on and opens no
connection; with it on (local hosts allowed for this test's server only) the page is listed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox, QTabWidget, QWidget

import desktop.errors
import desktop.web_pages
from core.service import Sourcebook
from core.settings import Settings, WebSettings
from desktop.library_panel import LibraryPanel
from desktop.main_window import MainWindow
from desktop.operations import Operations
from desktop.settings_dialog import SettingsDialog

TIMEOUT = 30_000
PAGE = b"""<!doctype html><html><head><title>Lighthouse survey 2024</title></head>
<body><nav><a href="/">Home</a></nav><main><article><h1>Lighthouse survey 2024</h1>
<p>The survey counted 41 working lighthouses on the northern coast in 2024.</p>
</article></main><footer>Cookie settings</footer></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        status, body = (200, PAGE) if self.path == "/survey.html" else (404, b"not found")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[str] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


class _Asker:
    """Stands in for the address dialog: answers ``answer`` and counts the questions."""

    def __init__(self) -> None:
        self.answer: str | None = None
        self.calls = 0

    def __call__(self, _parent: QWidget) -> str | None:
        self.calls += 1
        return self.answer


@pytest.fixture
def asker(monkeypatch: pytest.MonkeyPatch) -> _Asker:
    ask = _Asker()
    monkeypatch.setattr(desktop.web_pages, "ask_url_hook", ask)
    return ask


@pytest.fixture
def network_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every name lookup or connection Python code attempts (recorded, then refused)."""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def _f(*a: Any, **kw: Any) -> Any:
            calls.append(f"{name}{a}")
            raise OSError(f"network use in a test with the web off: {name}")

        return _f

    for name in ("getaddrinfo", "create_connection"):
        monkeypatch.setattr(socket, name, refuse(name))
    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse(f"socket.{name}"))
    return calls


def _window(qtbot: Any, svc: Sourcebook, ops: Operations) -> MainWindow:
    w = MainWindow(svc, ops)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(
        lambda: not w.library_panel.empty_label.text().startswith("Opening"), timeout=TIMEOUT
    )
    w.leave_first_run()
    return w


def test_web_off_explains_where_to_turn_it_on_and_opens_no_connection(
    qtbot: Any,
    app: Sourcebook,
    ops: Operations,
    errors: list[BaseException],
    asker: _Asker,
    network_calls: list[str],
) -> None:
    assert not app.settings.web.enabled  # the default
    window = _window(qtbot, app, ops)
    action = window.add_web_action
    assert action.shortcut().toString() == "Ctrl+L"
    file_menu = window.menuBar().actions()[0].menu()
    assert isinstance(file_menu, QMenu) and action in file_menu.actions()

    action.trigger()

    box = window.library_panel.web_off_box
    assert isinstance(box, QMessageBox) and box.isVisible()
    assert "Web access is off" in box.text()
    info = box.informativeText()
    assert "Settings" in info and "Web access" in info and "offline" in info
    assert asker.calls == 0  # no address was asked for: it could not be used
    assert not any(h.label.startswith("Adding") for h in ops.running)
    assert network_calls == [] and errors == []

    # "Open Settings…" opens the settings on the tab with the web access switch
    settings_button = next(b for b in box.buttons() if b.text().startswith("Open Settings"))
    qtbot.mouseClick(settings_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: any(isinstance(w, SettingsDialog) and w.isVisible() for w in _top_levels()),
        timeout=TIMEOUT,
    )
    dialog = next(w for w in _top_levels() if isinstance(w, SettingsDialog) and w.isVisible())
    tabs = dialog.findChild(QTabWidget)
    assert tabs is not None and tabs.currentWidget().isAncestorOf(dialog.web_enabled)
    assert not dialog.web_enabled.isChecked()
    dialog.reject()
    qtbot.wait(50)
    assert window.library_panel.documents == []
    assert network_calls == [] and errors == []


def test_web_on_adds_the_page_and_lists_it(
    qtbot: Any,
    tmp_path: Any,
    embedder: Any,
    server: _Server,
    ops: Operations,
    errors: list[BaseException],
    asker: _Asker,
) -> None:
    web = WebSettings(enabled=True, local_allowlist=[f"127.0.0.1:{server.server_address[1]}"])
    svc = Sourcebook(tmp_path / "home", settings=Settings(web=web), embedder=embedder)
    try:
        panel = LibraryPanel(svc, ops)
        qtbot.addWidget(panel)
        panel.show()
        with qtbot.waitSignal(panel.documents_loaded, timeout=TIMEOUT):
            panel.refresh()
        url = f"{server.base}/survey.html"
        asker.answer = url

        qtbot.mouseClick(panel.add_web_button, Qt.MouseButton.LeftButton)

        qtbot.waitUntil(lambda: len(panel.documents) == 1, timeout=TIMEOUT)
        qtbot.waitUntil(lambda: panel.documents[0].status == "ready", timeout=TIMEOUT)
        doc = panel.documents[0]
        assert doc.kind == "web" and doc.source_uri == url
        assert doc.title == "Lighthouse survey 2024" and doc.passage_count >= 1
        model = panel.model
        assert model.data(model.index(0, 0)) == "Lighthouse survey 2024"
        assert url in str(model.data(model.index(0, 0), Qt.ItemDataRole.ToolTipRole))
        assert server.hits == ["/survey.html"]
        assert panel.web_off_box is None and errors == []
        qtbot.waitUntil(lambda: not ops.running, timeout=TIMEOUT)
    finally:
        ops.wait(TIMEOUT)
        svc.close()


def test_address_without_scheme_gets_https(qtbot: Any, asker: _Asker) -> None:
    parent = QWidget()
    qtbot.addWidget(parent)
    asker.answer = "  example.org/report  "
    assert desktop.web_pages.ask_url(parent) == "https://example.org/report"
    asker.answer = "https://"  # the dialog's prefilled text, left as it was
    assert desktop.web_pages.ask_url(parent) is None


def _top_levels() -> list[Any]:
    return list(QApplication.topLevelWidgets())
