"""The app shell: entry point (CLI without Qt), main window menus and shortcuts, first-run
screen, settings round trip, error dialogs, status bar, history and export wiring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytestqt")

from pdfgen import make_multipage_pdf
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication

import desktop.errors
import desktop.main_window
from core.errors import CancelledError, ConfigError, CorruptFileError
from core.research.schemas import Report
from core.service import Sourcebook
from core.settings import load_settings
from desktop.app import dark_palette, is_dark
from desktop.entry import wants_app
from desktop.main_window import MainWindow
from desktop.operations import OpContext, Operations
from desktop.settings_dialog import SAME_AS_DEFAULT, SettingsDialog

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 20_000


@pytest.fixture
def window(qtbot: Any, app: Sourcebook, ops: Operations) -> MainWindow:
    w = MainWindow(app, ops)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: not w.library_panel.empty_label.text().startswith("Opening"))
    return w


# ---------------------------------------------------------------- entry point


def test_wants_app_only_without_a_command() -> None:
    assert wants_app([])
    assert wants_app(["--home", "/tmp/x"])
    assert wants_app(["--home=/tmp/x", "-v"])
    assert not wants_app(["docs"])
    assert not wants_app(["--home", "/tmp/x", "search", "q"])
    assert not wants_app(["--help"])
    assert not wants_app(["--home"])


def test_entry_runs_the_cli_without_importing_pyside(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from desktop.entry import main\n"
        "rc = main(['tasks'])\n"
        "print('QT' if any(m.startswith('PySide6') for m in sys.modules) else 'NOQT', rc)\n"
    )
    env = {**os.environ, "SOURCEBOOK_HOME": str(tmp_path / "home")}
    env.pop("QT_QPA_PLATFORM", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "NOQT 0"


def test_console_script_points_at_the_entry() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'sourcebook = "desktop.entry:main"' in text


# ---------------------------------------------------------------- main window


def test_menus_have_the_keyboard_shortcuts(window: MainWindow) -> None:
    def keys(action: Any) -> set[str]:
        return {k.toString(QKeySequence.SequenceFormat.PortableText) for k in action.shortcuts()}

    assert "Ctrl+O" in keys(window.add_files_action)
    assert "Ctrl+N" in keys(window.new_research_action)
    assert "Ctrl+F" in keys(window.find_action)
    assert "Ctrl+E" in keys(window.export_actions["md"])
    assert "Ctrl+," in keys(window.settings_action)
    assert "Ctrl+Q" in keys(window.quit_action)
    menus = [a.text() for a in window.menuBar().actions()]
    assert menus[:3] == ["&File", "&Research", "&View"]
    assert set(window.export_actions) == {"md", "html", "pdf", "docx", "json", "bib", "csl"}


def test_keyboard_reaches_search_and_panels(qtbot: Any, window: MainWindow) -> None:
    window.leave_first_run()
    window.activateWindow()
    window.find_action.trigger()
    qtbot.waitUntil(lambda: window.library_panel.search_box.hasFocus(), timeout=TIMEOUT)
    window.focus_panel(window.history_panel)
    assert window.centre.currentWidget() is window.history_panel
    qtbot.waitUntil(
        lambda: window.history_panel.isAncestorOf(QApplication.focusWidget()), timeout=TIMEOUT
    )
    window.new_research_action.trigger()
    assert window.centre.currentWidget() is window.research_panel


def test_failed_operation_shows_an_error_and_cancel_does_not(
    qtbot: Any, window: MainWindow, errors: list[BaseException]
) -> None:
    def fail(ctx: OpContext) -> None:
        raise CorruptFileError("x.pdf is damaged.", path="x.pdf")

    def cancelled(ctx: OpContext) -> None:
        raise CancelledError("Stopped.")

    h = window.ops.run(fail, label="failing")
    qtbot.waitUntil(lambda: h.done and bool(errors), timeout=TIMEOUT)
    assert isinstance(errors[0], CorruptFileError)
    h2 = window.ops.run(cancelled, label="cancelling")
    qtbot.waitUntil(lambda: h2.done, timeout=TIMEOUT)
    assert len(errors) == 1
    assert "Stopped." in window.statusBar().currentMessage()


def test_error_dialog_says_what_and_what_to_do(qtbot: Any) -> None:
    desktop.errors.show_error(None, ConfigError("Bad setting x.", hint="Fix x."))
    box = desktop.errors.open_error_dialogs()[-1]
    assert box.text() == "Bad setting x." and box.informativeText() == "Fix x."
    assert not box.detailedText()
    box.accept()
    try:
        raise ValueError("boom")
    except ValueError as exc:
        desktop.errors.show_error(None, exc)
    box = desktop.errors.open_error_dialogs()[-1]
    assert "boom" in box.text() and "Traceback" in box.detailedText()
    box.accept()
    qtbot.waitUntil(lambda: not desktop.errors.open_error_dialogs(), timeout=TIMEOUT)


def test_busy_status_follows_operations(qtbot: Any, window: MainWindow) -> None:
    import threading

    release = threading.Event()
    h = window.ops.run(lambda ctx: release.wait(10), label="Crunching numbers")
    qtbot.waitUntil(lambda: "Crunching numbers" in window._busy_label.text(), timeout=TIMEOUT)
    assert not window._busy_bar.isHidden()
    release.set()
    qtbot.waitUntil(lambda: h.done and window._busy_label.text() == "Ready", timeout=TIMEOUT)
    assert window._busy_bar.isHidden()


def test_history_opens_reports_and_export_uses_the_shown_one(
    qtbot: Any,
    window: MainWindow,
    app: Sourcebook,
    monkeypatch: pytest.MonkeyPatch,
    errors: list[BaseException],
) -> None:
    exports: list[tuple[str, str]] = []
    monkeypatch.setattr(
        desktop.main_window,
        "export_report_interactive",
        lambda _p, _s, _o, task, fmt: exports.append((task, fmt)),
    )
    window.export_actions["md"].trigger()
    assert exports == [] and "No report" in window.statusBar().currentMessage()

    report = Report(task="budget23", question="What changed?", status="answered", markdown="x")
    monkeypatch.setattr(app, "report", lambda name: report)
    window.history_panel.open_report.emit("budget23")
    qtbot.waitUntil(lambda: window.report_view.current_report() is report, timeout=TIMEOUT)
    assert window.centre.currentWidget() is window.report_view
    window.export_actions["pdf"].trigger()
    window.export_actions["json"].trigger()
    assert exports == [("budget23", "pdf"), ("budget23", "json")]
    assert not errors


def test_palette_helpers() -> None:
    assert is_dark(dark_palette())
    app = QApplication.instance()
    assert isinstance(app, QApplication)


# ---------------------------------------------------------------- first run


def test_first_run_explains_and_is_remembered(
    qtbot: Any, app: Sourcebook, ops: Operations, errors: list[BaseException]
) -> None:
    w = MainWindow(app, ops)
    qtbot.addWidget(w)
    assert w.showing_first_run and w.first_run is not None
    text = w.first_run.text()
    assert str(app.library_path) in text
    assert "web access is <b>off</b>" in text
    assert app.settings.models.default in text
    assert "Add files" in text
    w.first_run.start_button.click()
    assert not w.showing_first_run
    qtbot.waitUntil(
        lambda: load_settings(app.home).ui.first_run_done and not ops.running, timeout=TIMEOUT
    )
    w2 = MainWindow(app, ops)
    qtbot.addWidget(w2)
    assert not w2.showing_first_run
    assert not errors


def test_first_run_skipped_for_an_existing_library(
    qtbot: Any, app: Sourcebook, ops: Operations, tmp_path: Path
) -> None:
    pdf = tmp_path / "a.pdf"
    make_multipage_pdf(pdf, 1)
    app.add([pdf])
    w = MainWindow(app, ops)
    qtbot.addWidget(w)
    qtbot.waitUntil(lambda: not w.showing_first_run, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: load_settings(app.home).ui.first_run_done, timeout=TIMEOUT)


# ---------------------------------------------------------------- settings


def test_settings_round_trip(
    qtbot: Any, app: Sourcebook, ops: Operations, tmp_path: Path, errors: list[BaseException]
) -> None:
    dialog = SettingsDialog(app, ops)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: "models found" in dialog.models_status.text(), timeout=TIMEOUT)
    dialog.default_model.setCurrentText("qwen2.5-coder-0.5b-instruct-q4_k_m")
    dialog.role_models["writer"].setCurrentText("my-server")
    dialog.max_workers.setValue(2)
    dialog.max_tool_calls.setValue(12)
    dialog.max_rounds.setValue(3)
    assert dialog.short_answer.isChecked()  # the default
    dialog.short_answer.setChecked(False)
    assert not dialog.trail.isChecked()  # the default: only when asked for
    dialog.trail.setChecked(True)
    assert dialog.support_check.isChecked()  # the default
    dialog.support_check.setChecked(False)
    dialog.library_path.setText(str(tmp_path / "lib2"))
    dialog.web_enabled.setChecked(True)
    dialog.add_endpoint()
    dialog.ep_name.setText("my-server")
    dialog.ep_url.setText("http://localhost:8080/v1")
    dialog.ep_model.setText("qwen")
    dialog.ep_key_env.setText("MY_KEY")
    for field in (dialog.ep_name, dialog.ep_url, dialog.ep_model, dialog.ep_key_env):
        field.textEdited.emit(field.text())
    with qtbot.waitSignal(dialog.saved, timeout=TIMEOUT):
        dialog.save()
    saved = load_settings(app.home)
    assert saved.models.default == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert saved.models.roles.writer == "my-server" and saved.models.roles.planner is None
    assert (saved.research.max_workers, saved.research.max_tool_calls) == (2, 12)
    assert saved.research.max_rounds == 3 and saved.research.short_answer is False
    assert saved.research.trail is True and saved.research.support_check is False
    assert saved.library.path == tmp_path / "lib2"
    assert saved.web.enabled is True
    ep = saved.models.endpoints[0]
    assert (ep.name, ep.base_url, ep.model, ep.api_key_env) == (
        "my-server",
        "http://localhost:8080/v1",
        "qwen",
        "MY_KEY",
    )
    assert json.loads((app.home / "settings.json").read_text())["web"]["enabled"] is True
    assert app.settings == saved

    again = SettingsDialog(app, ops)
    qtbot.addWidget(again)
    # the test ends with no work running: a model scan still emitting its result while the
    # test's events were processed crashed the process (twice in five suite runs, session 56)
    qtbot.waitUntil(lambda: not ops.running, timeout=TIMEOUT)
    assert again.role_models["writer"].currentText() == "my-server"
    assert again.role_models["planner"].currentText() == SAME_AS_DEFAULT
    assert again.max_tool_calls.value() == 12 and again.web_enabled.isChecked()
    assert again.ep_url.text() == "http://localhost:8080/v1"
    assert not errors


def test_settings_refuses_an_incomplete_server(
    qtbot: Any, app: Sourcebook, ops: Operations, errors: list[BaseException]
) -> None:
    dialog = SettingsDialog(app, ops)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: not ops.running, timeout=TIMEOUT)  # its model scan done
    dialog.add_endpoint(name="half")
    dialog.save()
    assert isinstance(errors[0], ConfigError)
    assert not (app.home / "settings.json").exists()


def test_web_access_is_off_by_default(qtbot: Any, app: Sourcebook, ops: Operations) -> None:
    dialog = SettingsDialog(app, ops)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: not ops.running, timeout=TIMEOUT)  # its model scan done
    assert not dialog.web_enabled.isChecked()


# ---------------------------------------------------------------- self-test


def test_a_failed_self_test_stops_the_apps_work_and_closes_the_window(
    qtbot: Any, app: Sourcebook, ops: Operations, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work still running when a step fails is cancelled and awaited before the app ends:
    left running, it raced the interpreter's exit (a packaged app's test hung on it)."""
    from desktop.self_test import SelfTest

    exits: list[int] = []
    monkeypatch.setattr(QApplication, "exit", lambda *args: exits.append(args[-1]))
    w = MainWindow(app, ops)
    qtbot.addWidget(w)
    w.show()

    def slow(ctx: OpContext) -> None:
        ctx.cancel.wait(TIMEOUT / 1000)  # runs until cancelled

    ops.run(slow, label="start-up work")
    test = SelfTest(w, tmp_path / "missing.pdf", "levee")
    test.start()
    qtbot.waitUntil(lambda: test.passed is not None, timeout=TIMEOUT)
    assert test.passed is False and "no such file" in test.failure
    assert not w.isVisible()
    # cancelled and awaited by the window's close: every pool is idle (the handles leave
    # ``ops.running`` a moment later, by a signal queued to the UI thread)
    assert ops.wait(0)
    assert exits == [1]


@pytest.mark.slow
def test_the_app_ends_when_its_window_closes_even_if_work_ignores_its_cancel(
    tmp_path: Path,
) -> None:
    """Work that does not stop when cancelled (a model reading a long prompt) must not keep a
    closed app's process alive: it ends after the close's wait and a short one more."""
    code = (
        "import sys, time\n"
        "import core.service\n"
        "core.service.Sourcebook.list_models = lambda self: time.sleep(60) or []\n"
        "from desktop.app import main\n"
        f"sys.exit(main(['--self-test', {str(tmp_path / 'missing.pdf')!r}, '--query', 'x']))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCEBOOK_")}
    env |= {
        "SOURCEBOOK_HOME": str(tmp_path / "home"),
        "QT_QPA_PLATFORM": "offscreen",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO),
    }
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    seconds = time.monotonic() - started
    assert out.returncode == 1, out.stderr[-2000:]  # the self-test's failure, not a crash
    assert "ending the app with work still running" in out.stderr
    assert seconds < 45, seconds  # the close's 8 s and 2 s more, not the work's 60 s
