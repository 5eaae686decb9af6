"""Fixtures for the desktop research, report, history and export tests.

``desktop_library`` (module scope) builds a small real library once — the PDFs of
``research_fixtures`` (harbor, rail, secret; collection "ports") — and closes it. Each test then
opens its own ``Sourcebook`` on that home with scripted models (``make_service``), so the
desktop code calls the facade exactly as the app does (``models=None`` -> its own role models).
Tests share the home's task log, so each test asks its own question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from research_fixtures import HARBOR, RAIL, SECRET, _pdf

from core.service import Sourcebook
from core.settings import ResearchLimits, Settings
from models.llm import ScriptedLLM

MakeService = Callable[..., Sourcebook]


@pytest.fixture(scope="module")
def desktop_library(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    root = tmp_path_factory.mktemp("desktop-research")
    home = root / "home"
    app = Sourcebook(home, embedder=embedder)
    try:
        harbor = _pdf(root / "harbor.pdf", "Northport Harbor Report", HARBOR)
        rail = _pdf(root / "rail.pdf", "Eastline Railway Facts", RAIL)
        secret = _pdf(root / "secret.pdf", "Classified Memo", SECRET)
        changes = app.add([harbor, rail])
        assert not changes.failed
        app.library.store.create_collection("ports")
        app.library.store.add_to_collection("ports", [r.doc_id for r in changes.added if r.doc_id])
        assert not app.add([secret]).failed
    finally:
        app.close()
    return home


@pytest.fixture
def make_service(desktop_library: Path, embedder: Any) -> Iterator[MakeService]:
    """``make(planner=, researcher=, writer=, clarifier=)`` -> a Sourcebook with those models."""
    made: list[Sourcebook] = []

    def make(
        *,
        planner: ScriptedLLM | None = None,
        researcher: ScriptedLLM | None = None,
        writer: ScriptedLLM | None = None,
        clarifier: ScriptedLLM | None = None,
        web: bool = False,
    ) -> Sourcebook:
        planner = planner or ScriptedLLM(name="planner")
        llms: dict[str, Any] = {
            "planner": planner,
            "researcher": researcher or ScriptedLLM(name="researcher"),
            "writer": writer or ScriptedLLM(name="writer"),
            "clarifier": clarifier or ScriptedLLM(name="clarifier"),
            "default": planner,
        }
        settings = Settings(
            research=ResearchLimits(max_workers=1, max_rounds=1, short_answer=False)
        )
        settings.web.enabled = web
        sb = Sourcebook(desktop_library, embedder=embedder, llms=llms, settings=settings)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()
