"""The settings dialog: models per role, research limits, library location, web access.

It edits a copy of ``Sourcebook.settings`` and saves through ``Sourcebook.save_settings`` (which
validates, writes ``<home>/settings.json`` and makes the models rebuild on next use). Only the
fields shown here change; everything else in the settings file is kept as it was.

Threading: the model scan (``list_models``) and the save run through Operations; the save is
exclusive so it never swaps models under a running research call.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core.errors import ConfigError
from core.service import ModelEntry, Settings, Sourcebook
from desktop.errors import guarded, show_error
from desktop.operations import Operations

logger = logging.getLogger(__name__)

ROLES = ("router", "planner", "researcher", "writer")
SAME_AS_DEFAULT = "(same as the default model)"


class SettingsDialog(QDialog):
    """Edit and save the settings; ``saved(Settings)`` fires after a successful save.

    For tests: :meth:`values` builds the new ``Settings`` from the widgets (``ConfigError`` when
    they are invalid); :meth:`save` validates and saves in the background.
    """

    saved = Signal(object)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setMinimumWidth(560)
        self._service = service
        self._ops = ops
        s = service.settings
        self._endpoints: list[dict[str, Any]] = [e.model_dump() for e in s.models.endpoints]

        tabs = QTabWidget()
        tabs.addTab(self._models_tab(s), "&Models")
        tabs.addTab(self._limits_tab(s), "&Research limits")
        tabs.addTab(self._library_tab(s), "&Library and web")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(tabs)
        layout.addWidget(self.buttons)
        self.load_models()

    # ---------------------------------------------------------------- tabs

    def _models_tab(self, s: Settings) -> QWidget:
        w = QWidget()
        form = QFormLayout()
        self.default_model = QComboBox()
        self.default_model.setEditable(True)
        self.default_model.setCurrentText(s.models.default)
        form.addRow("&Default model:", self.default_model)
        self.role_models: dict[str, QComboBox] = {}
        for role in ROLES:
            box = QComboBox()
            box.setEditable(True)
            box.addItem(SAME_AS_DEFAULT)
            value = getattr(s.models.roles, role)
            box.setCurrentText(value or SAME_AS_DEFAULT)
            self.role_models[role] = box
            form.addRow(f"{role.capitalize()}:", box)
        self.search_paths = QLineEdit(os.pathsep.join(str(p) for p in s.models.search_paths))
        self.search_paths.setPlaceholderText("Folders with .gguf files, separated by " + os.pathsep)
        browse = QPushButton("Add folder…")
        browse.clicked.connect(self._add_model_folder)
        row = QHBoxLayout()
        row.addWidget(self.search_paths, 1)
        row.addWidget(browse)
        form.addRow("GGUF folders:", row)
        self.models_status = QLabel("Looking for models…")
        form.addRow("", self.models_status)

        group = QGroupBox("OpenAI-compatible servers (Ollama, llama-server, vLLM, hosted APIs)")
        self.endpoint_list = QListWidget()
        self.endpoint_list.setMaximumHeight(90)
        self.endpoint_list.currentRowChanged.connect(self._endpoint_selected)
        self.ep_name = QLineEdit()
        self.ep_url = QLineEdit()
        self.ep_url.setPlaceholderText("http://localhost:11434/v1")
        self.ep_model = QLineEdit()
        self.ep_key_env = QLineEdit()
        self.ep_key_env.setPlaceholderText("e.g. OPENAI_API_KEY (preferred: not saved in a file)")
        self.ep_key = QLineEdit()
        self.ep_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.ep_key.setPlaceholderText("saved in settings.json; prefer the variable above")
        for field in (self.ep_name, self.ep_url, self.ep_model, self.ep_key_env, self.ep_key):
            field.textEdited.connect(self._endpoint_edited)
        add = QPushButton("Add server")
        add.clicked.connect(self.add_endpoint)
        remove = QPushButton("Remove server")
        remove.clicked.connect(self._remove_endpoint)
        ep_form = QFormLayout()
        ep_form.addRow("Name:", self.ep_name)
        ep_form.addRow("Base URL:", self.ep_url)
        ep_form.addRow("Model:", self.ep_model)
        ep_form.addRow("API key variable:", self.ep_key_env)
        ep_form.addRow("API key:", self.ep_key)
        ep_buttons = QHBoxLayout()
        ep_buttons.addWidget(add)
        ep_buttons.addWidget(remove)
        ep_buttons.addStretch(1)
        g = QVBoxLayout(group)
        g.addWidget(self.endpoint_list)
        g.addLayout(ep_form)
        g.addLayout(ep_buttons)
        self._fill_endpoints()

        layout = QVBoxLayout(w)
        layout.addLayout(form)
        layout.addWidget(group)
        layout.addStretch(1)
        return w

    def _spin(self, value: int, low: int, high: int, tip: str) -> QSpinBox:
        box = QSpinBox()
        box.setRange(low, high)
        box.setValue(value)
        box.setToolTip(tip)
        return box

    def _limits_tab(self, s: Settings) -> QWidget:
        r = s.research
        self.max_workers = self._spin(r.max_workers, 1, 16, "Researcher workers run at once.")
        self.max_tool_calls = self._spin(r.max_tool_calls, 1, 500, "Tool calls per worker.")
        self.max_steps = self._spin(r.max_steps, 1, 1000, "Model turns per worker.")
        self.max_rounds = self._spin(r.max_rounds, 1, 10, "Research rounds (first + follow-ups).")
        self.short_answer = QCheckBox("Open each report with a short cited &answer")
        self.short_answer.setChecked(r.short_answer)
        self.short_answer.setToolTip(
            "One more model call: the question answered step by step, in one cited line."
        )
        self.support_check = QCheckBox("&Check that each claim's passages state it")
        self.support_check.setChecked(r.support_check)
        self.support_check.setToolTip(
            "About a second per claim: the model reads each cited claim with its passages; a "
            "claim they do not state is flagged, and an unsupported answer is not stated."
        )
        self.trail = QCheckBox("End each report with its research t&rail")
        self.trail.setChecked(r.trail)
        self.trail.setToolTip(
            "No model call: the finding each research step made, cited, when its passages "
            "bear it out."
        )
        w = QWidget()
        form = QFormLayout(w)
        form.addRow("Concurrent &workers:", self.max_workers)
        form.addRow("&Tool calls per worker:", self.max_tool_calls)
        form.addRow("&Steps per worker:", self.max_steps)
        form.addRow("&Rounds:", self.max_rounds)
        form.addRow(self.short_answer)
        form.addRow(self.support_check)
        form.addRow(self.trail)
        note = QLabel(
            "Higher limits find more but take longer; on a laptop CPU, 2–3 workers is a good "
            "balance."
        )
        note.setWordWrap(True)
        form.addRow(note)
        return w

    def _library_tab(self, s: Settings) -> QWidget:
        self.library_path = QLineEdit(str(s.library.path) if s.library.path else "")
        self.library_path.setPlaceholderText(str(self._service.home / "library") + " (default)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_library)
        row = QHBoxLayout()
        row.addWidget(self.library_path, 1)
        row.addWidget(browse)
        self.web_enabled = QCheckBox("Allow fetching web pages")
        self.web_enabled.setChecked(s.web.enabled)
        web_note = QLabel(
            "Off by default: with it off, nothing leaves this computer. When on, pages you add "
            "by URL are downloaded (local and private addresses stay refused)."
        )
        web_note.setWordWrap(True)
        w = QWidget()
        form = QFormLayout(w)
        form.addRow("Library &folder:", row)
        lib_note = QLabel("Changing it opens (or creates) the library in the new folder.")
        lib_note.setWordWrap(True)
        form.addRow("", lib_note)
        form.addRow("&Web access:", self.web_enabled)
        form.addRow("", web_note)
        return w

    def _browse_library(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Library folder", self.library_path.text())
        if folder:
            self.library_path.setText(folder)

    def _add_model_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder with GGUF model files")
        if folder:
            parts = [p for p in self.search_paths.text().split(os.pathsep) if p.strip()]
            self.search_paths.setText(os.pathsep.join([*parts, folder]))
            self.load_models()

    # ---------------------------------------------------------------- endpoints

    def _fill_endpoints(self) -> None:
        self.endpoint_list.clear()
        for e in self._endpoints:
            self.endpoint_list.addItem(e.get("name") or "(unnamed)")
        if self._endpoints:
            self.endpoint_list.setCurrentRow(0)
        self._endpoint_selected(self.endpoint_list.currentRow())

    def _endpoint_selected(self, row: int) -> None:
        e = self._endpoints[row] if 0 <= row < len(self._endpoints) else None
        fields = (
            (self.ep_name, "name"),
            (self.ep_url, "base_url"),
            (self.ep_model, "model"),
            (self.ep_key_env, "api_key_env"),
            (self.ep_key, "api_key"),
        )
        for field, key in fields:
            field.setEnabled(e is not None)
            field.setText(str(e.get(key) or "") if e else "")

    def _endpoint_edited(self, _text: str = "") -> None:
        row = self.endpoint_list.currentRow()
        if not 0 <= row < len(self._endpoints):
            return
        e = self._endpoints[row]
        e["name"] = self.ep_name.text().strip()
        e["base_url"] = self.ep_url.text().strip()
        e["model"] = self.ep_model.text().strip()
        e["api_key_env"] = self.ep_key_env.text().strip() or None
        e["api_key"] = self.ep_key.text() or None
        item = self.endpoint_list.item(row)
        if item is not None:
            item.setText(e["name"] or "(unnamed)")

    def add_endpoint(
        self, name: str = "", base_url: str = "", model: str = "", api_key: str | None = None
    ) -> None:
        """Add a server entry (the form edits it) and select it."""
        self._endpoints.append(
            {"name": name, "base_url": base_url, "model": model, "api_key": api_key}
        )
        self.endpoint_list.addItem(name or "(unnamed)")
        self.endpoint_list.setCurrentRow(len(self._endpoints) - 1)
        self.ep_name.setFocus()

    def _remove_endpoint(self) -> None:
        row = self.endpoint_list.currentRow()
        if 0 <= row < len(self._endpoints):
            del self._endpoints[row]
            self._fill_endpoints()

    # ---------------------------------------------------------------- models list

    def load_models(self) -> None:
        """Fill the model pickers from ``list_models`` (in the background)."""
        service = self._service
        settings = self._service.settings
        folders = [Path(p) for p in self.search_paths.text().split(os.pathsep) if p.strip()]
        self.models_status.setText("Looking for models…")

        def scan(ctx: object) -> list[ModelEntry]:
            extra = [f for f in folders if f not in settings.models.search_paths]
            return _list_with_folders(service, extra) if extra else service.list_models()

        self._ops.run(
            scan,
            label="Looking for models",
            on_success=guarded(self, self._models_loaded),
            on_error=guarded(
                self, lambda exc: self.models_status.setText(f"Could not list models: {exc}")
            ),
        )

    def _models_loaded(self, entries: list[ModelEntry]) -> None:
        names = [e.name for e in entries]
        for box in (self.default_model, *self.role_models.values()):
            current = box.currentText()
            keep_first = box is not self.default_model
            while box.count() > (1 if keep_first else 0):
                box.removeItem(box.count() - 1)
            for e in entries:
                box.addItem(e.name)
                tip = f"{e.source}: {e.location}" + ("" if e.available else " (not available)")
                box.setItemData(box.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
            box.setCurrentText(current)
        ready = sum(1 for e in entries if e.available)
        self.models_status.setText(f"{len(names)} models found, {ready} ready to use.")

    # ---------------------------------------------------------------- saving

    def values(self) -> Settings:
        """The settings the widgets describe (``ConfigError`` if they are not valid)."""
        data = self._service.settings.model_dump()
        m = data["models"]
        m["default"] = self.default_model.currentText().strip()
        if not m["default"]:
            raise ConfigError("Choose a default model.", hint="Pick one from the list.")
        for role, box in self.role_models.items():
            text = box.currentText().strip()
            m["roles"][role] = None if text in ("", SAME_AS_DEFAULT) else text
        m["search_paths"] = [
            p.strip() for p in self.search_paths.text().split(os.pathsep) if p.strip()
        ]
        for e in self._endpoints:
            if not (e.get("name") and e.get("base_url") and e.get("model")):
                raise ConfigError(
                    "Each OpenAI-compatible server needs a name, a base URL and a model.",
                    hint="Fill in the empty fields or remove the server.",
                )
        m["endpoints"] = [dict(e) for e in self._endpoints]  # unshown fields kept as loaded
        data["research"].update(
            max_workers=self.max_workers.value(),
            max_tool_calls=self.max_tool_calls.value(),
            max_steps=self.max_steps.value(),
            max_rounds=self.max_rounds.value(),
            short_answer=self.short_answer.isChecked(),
            support_check=self.support_check.isChecked(),
            trail=self.trail.isChecked(),
        )
        lib = self.library_path.text().strip()
        data["library"]["path"] = str(Path(lib).expanduser()) if lib else None
        data["web"]["enabled"] = self.web_enabled.isChecked()
        try:
            return Settings.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                f"These settings are not valid: {exc}", hint="Correct the field named above."
            ) from exc

    def save(self) -> None:
        """Validate, then save in the background; the dialog closes when it is saved."""
        try:
            new = self.values()
        except ConfigError as exc:
            show_error(self, exc)
            return
        service = self._service
        self.buttons.setEnabled(False)

        def done(_result: object) -> None:
            self.buttons.setEnabled(True)
            self.saved.emit(new)
            self.accept()

        def failed(exc: BaseException) -> None:
            self.buttons.setEnabled(True)
            show_error(self, exc)

        self._ops.run(
            lambda ctx: service.save_settings(new),
            label="Saving settings",
            exclusive=True,
            on_success=guarded(self, done),
            on_error=guarded(self, failed),
        )


def _list_with_folders(service: Sourcebook, folders: list[Path]) -> list[ModelEntry]:
    """``list_models`` as if ``folders`` were already in the settings (before saving)."""
    current = service.settings
    trial = current.model_copy(
        update={
            "models": current.models.model_copy(
                update={"search_paths": [*current.models.search_paths, *folders]}
            )
        }
    )
    probe = Sourcebook(service.home, settings=trial, embedder=None)
    try:
        return probe.list_models()
    finally:
        probe.reset_models()
