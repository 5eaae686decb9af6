"""The export menu's new formats (Word, BibTeX, CSL-JSON) write files a reader opens, with the
right suffix added, through the same background path as the others."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from desktop_research_fixtures import (
    MakeService,
    desktop_library,  # noqa: F401 - fixture
    make_service,  # noqa: F401 - fixture
)
from docx import Document
from export_fixtures import CITED, make_report
from PySide6.QtWidgets import QMainWindow

from desktop import export_actions
from desktop.export_actions import export_report_interactive
from desktop.operations import Operations


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("docx", ".docx"), ("bib", ".bib"), ("csl", ".csl.json")]
)
def test_export_menu_new_formats(
    qtbot: Any,
    tmp_path: Path,
    fmt: str,
    suffix: str,
    make_service: MakeService,
    ops: Operations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = make_service()
    report = make_report(svc, cited_words=CITED[:3]).model_copy(update={"task": f"menu-{fmt}"})
    log = svc.task_log()
    try:
        log.begin(report.task, report.question, {})
        log.finish(report.task, report.status, report.model_dump(mode="json"))
    finally:
        log.close()
    window = QMainWindow()
    qtbot.addWidget(window)
    asked: list[Path] = []

    def choose(_parent: Any, suggested: Path, _filter: str) -> Path:
        asked.append(suggested)
        return tmp_path / "exported"  # no suffix: the right one is added

    monkeypatch.setattr(export_actions, "save_path_hook", choose)
    export_report_interactive(window, svc, ops, report.task, fmt)
    out = tmp_path / f"exported{suffix}"
    qtbot.waitUntil(lambda: out.exists() and not ops.running, timeout=60_000)
    assert asked[0].name == f"{report.task}{suffix}"
    assert "Exported the report" in window.statusBar().currentMessage()
    data = out.read_bytes()
    if fmt == "docx":
        texts = [p.text for p in Document(io.BytesIO(data)).paragraphs]
        assert texts[0] == report.question and any(t.startswith("1. ") for t in texts)
    elif fmt == "bib":
        assert data.decode().count("@misc{") == 2  # harbor (two passages) and rail
    else:
        assert [i["title"] for i in json.loads(data)] == [
            "Northport Harbor Report",
            "Eastline Railway Facts",
        ]
