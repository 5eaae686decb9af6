"""The first-run screen: what is local, which models are in use, how to add documents.

Shown once, when the library is empty and ``ui.first_run_done`` is not yet set in the home's
settings; leaving it (by any button) sets the flag. Model availability comes from
``Sourcebook.list_models`` (which scans folders) through Operations; the rest is read from the
settings already in memory.

Threading: UI thread only; the model scan runs as an operation.
"""

from __future__ import annotations

import html
import logging
from urllib.parse import urlparse

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from core.service import ModelEntry, Sourcebook
from desktop.errors import guarded
from desktop.operations import Operations

logger = logging.getLogger(__name__)

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class FirstRunScreen(QWidget):
    """Welcome page. Signals: ``add_files_requested``, ``add_samples_requested``,
    ``add_folder_requested`` and ``dismissed`` (each means "leave this screen")."""

    add_files_requested = Signal()
    add_folder_requested = Signal()
    add_samples_requested = Signal()
    dismissed = Signal()

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self._ops = ops
        title = QLabel("Welcome to Sourcebook")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        title.setFont(font)
        self.local_label = self._para(self._local_html())
        self.models_label = self._para(self._models_html(None))
        self.add_label = self._para(
            "<h3>Add documents</h3><p>Drop PDF, text, Markdown or HTML files or folders on the "
            "library list, or use <b>File › Add files…</b> (Ctrl+O) and <b>Add folder…</b>. "
            "Each document is split into passages with page numbers and word positions, so "
            "every answer can show you the exact words it rests on. Then ask a question with "
            "<b>Research › New research</b> (Ctrl+N).</p>"
        )
        self.add_files_button = QPushButton("Add files…")
        self.add_folder_button = QPushButton("Add folder…")
        self.samples_button = QPushButton("Add the sample documents")
        self.samples_button.setToolTip("Four public-domain US federal reports, to try things out")
        self.start_button = QPushButton("Start with an empty library")
        self.start_button.setDefault(True)
        self.add_files_button.clicked.connect(self.add_files_requested)
        self.add_folder_button.clicked.connect(self.add_folder_requested)
        self.samples_button.clicked.connect(self.add_samples_requested)
        self.start_button.clicked.connect(self.dismissed)
        buttons = QHBoxLayout()
        for b in (self.add_files_button, self.add_folder_button, self.samples_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.start_button)

        body = QWidget()
        body.setMaximumWidth(760)
        col = QVBoxLayout(body)
        col.addWidget(title)
        for w in (self.local_label, self.models_label, self.add_label):
            col.addWidget(w)
        col.addLayout(buttons)
        col.addStretch(1)
        wrapper = QWidget()
        centre = QHBoxLayout(wrapper)
        centre.addStretch(1)
        centre.addWidget(body, 4)
        centre.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(wrapper)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        self.load_models()

    def _para(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    def text(self) -> str:
        """The screen's text (for tests and accessibility checks)."""
        return "\n".join(w.text() for w in (self.local_label, self.models_label, self.add_label))

    def _local_html(self) -> str:
        s = self._service.settings
        esc = html.escape
        web = (
            "Web access is <b>on</b>: pages you add by URL (and research runs you allow to) "
            "fetch from the internet."
            if s.web.enabled
            else "Nothing leaves this computer: web access is <b>off</b> (turn it on in "
            "<b>Settings</b> if you want to add web pages)."
        )
        remote = [
            e.base_url
            for e in s.models.endpoints
            if (urlparse(e.base_url).hostname or "") not in _LOCAL_HOSTS
        ]
        remote_note = (
            "<p>Note: your settings name a model server outside this computer ("
            + esc(", ".join(remote))
            + "); questions and passages sent to that model leave the machine.</p>"
            if remote
            else ""
        )
        return (
            "<h3>Everything stays on your computer</h3>"
            f"<p>Your library (documents' text, passages and search index) lives in "
            f"<code>{esc(str(self._service.library_path))}</code>; settings, research history "
            f"and logs in <code>{esc(str(self._service.home))}</code>. Your files are read, "
            f"never changed. {web}</p>{remote_note}"
        )

    def _models_html(self, entries: list[ModelEntry] | None) -> str:
        m = self._service.settings.models
        roles = {r: getattr(m.roles, r) for r in ("router", "planner", "researcher", "writer")}
        names = [m.default, *[v for v in roles.values() if v]]
        by_name = {e.name: e for e in entries or []}
        items = []
        for name in dict.fromkeys(names):
            used_by = [r for r, v in roles.items() if v == name] or (
                ["every role"] if name == m.default else []
            )
            state = ""
            entry = by_name.get(name) or next(
                (e for e in entries or [] if e.name.startswith(name)), None
            )
            if entries is not None:
                if entry is None:
                    state = " — <i>not found</i>"
                elif entry.available:
                    state = f" — {html.escape(entry.source)}, ready"
                else:
                    how = entry.install_command or entry.error or "not installed"
                    state = f" — <i>not ready: {html.escape(how)}</i>"
            items.append(
                f"<li><b>{html.escape(name)}</b> ({html.escape(', '.join(used_by))}){state}</li>"
            )
        checking = "<p><i>Checking which models are installed…</i></p>" if entries is None else ""
        return (
            "<h3>Models</h3><p>Research runs on local language models (llama.cpp) on this "
            "computer; the embedder that makes search work (MiniLM) runs locally too.</p>"
            f"<ul>{''.join(items)}</ul>{checking}"
            "<p>Choose other models (any GGUF file, or an OpenAI-compatible server) in "
            "<b>Settings</b> (Ctrl+,).</p>"
        )

    def load_models(self) -> None:
        service = self._service
        self._ops.run(
            lambda ctx: service.list_models(),
            label="Looking for models",
            on_success=guarded(
                self, lambda entries: self.models_label.setText(self._models_html(entries))
            ),
            on_error=lambda exc: logger.warning("listing models failed: %s", exc),
        )
