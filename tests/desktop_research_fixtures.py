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
from research_fixtures import HARBOR, RAIL, SECRET, _pdf, act, notes, pid_with, plan

from core.service import Report, Sourcebook
from core.settings import ResearchLimits, Settings
from models.scripted import ScriptedLLM

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
            research=ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, short_answer=False)
        )
        settings.web.enabled = web
        sb = Sourcebook(desktop_library, embedder=embedder, llms=llms, settings=settings)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()


CHECKED_QUESTION = (
    "When was the Northport Harbor Authority founded and how many ships came in 2019?"
)


def run_checked(
    make_service: MakeService, task: str, **limits: object
) -> tuple[Sourcebook, Report, dict[str, str]]:
    """Task ``task``: a run whose draft has two passages of one document (both [1]), a claim
    naming what its passage lacks, and a citation of a passage never read; ``limits`` change
    the settings'."""
    planner, researcher, writer = ScriptedLLM(), ScriptedLLM(), ScriptedLLM()
    svc = make_service(planner=planner, researcher=researcher, writer=writer)
    ids = {"ships": pid_with(svc, "4,200 ships"), "park": pid_with(svc, "Ellen Park")}
    planner.enqueue([plan(("q1", CHECKED_QUESTION, []))])
    researcher.enqueue(
        [
            act("fetch_evidence", evidence_id=ids["ships"]),
            act("fetch_evidence", evidence_id=ids["park"]),
            act("finish"),
            notes(
                ("4,200 ships in 2019.", [ids["ships"]]),
                ("Founded in 1921 by Mayor Ellen Park.", [ids["park"]]),
            ),
        ]
    )
    body = (
        "The harbor handled 4,200 ships in 2019 [E1]. "
        "Mayor Ellen Park founded the Northport Harbor Authority in 1921 [E2]. "
        "Northport handled 9,900 ships in 2017 under Admiral Brooks [E1]."
    )
    writer.enqueue([body + " See also [E7].", body + " See also [E7]."])
    report = svc.research(CHECKED_QUESTION, task=task, limits=svc.research_limits(**limits))
    assert {c.evidence_id for c in report.citations} == set(ids.values())
    assert report.flagged_claims and report.removed_citations
    return svc, report, ids


@pytest.fixture
def checked_report(make_service: MakeService) -> tuple[Sourcebook, Report, dict[str, str]]:
    """:func:`run_checked` with unstated_claims off: the claim naming what its passage lacks
    stays in the report, flagged, for the views' flag markers (on, it is only listed)."""
    return run_checked(make_service, "checked", stages_off=["unstated_claims"])
