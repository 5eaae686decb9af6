"""Task log, resume after a crash (in-process and a real kill -9), CLI commands, export."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from research_fixtures import (
    models,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    worker_script,
)

from core.cli_research import add_parsers
from core.export import export_report, provenance
from core.research.schemas import CitationRecord, Report, ResearchLimits
from core.research.trail import TRAIL_HEADING
from core.service import Sourcebook
from core.tasks import TaskLog
from models.scripted import ScriptedLLM

LIM = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, short_answer=False)
Q = "How many ships did Northport harbor handle in 2019?"


class Crash(Exception):
    """Stands in for the process dying: nothing in the run catches it."""


def test_task_log_repeated_write_returns_saved(tmp_path: Path) -> None:
    log = TaskLog(tmp_path / "tasks.sqlite")
    run = log.begin("t", "q?", {})
    assert log.append("t", run, "decision", "k1", {"v": 1}) == {"v": 1}
    assert log.append("t", run, "decision", "k1", {"v": 2}) == {"v": 1}
    calls: list[int] = []
    v, reused = log.step("t", run, "s", lambda: calls.append(1) or 42)
    assert (v, reused) == (42, False)
    v, reused = log.step("t", run, "s", lambda: calls.append(1) or 43)
    assert (v, reused) == (42, True) and calls == [1]
    # a step that started but never finished becomes unknown on the next run, then runs again
    log.append("t", run, "start", "w#start@1", {"key": "w"})
    assert log.in_flight("t") == ["w"]
    run2 = log.begin("t", "q?", {})
    assert run2 == 2 and log.in_flight("t") == []
    assert any(e.kind == "unknown" and e.payload["key"] == "w" for e in log.events("t"))
    seqs = [e.seq for e in log.events("t")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    log.close()


def test_resume_after_crash_reuses_steps_and_refetches(research_app: Sourcebook) -> None:
    ships = pid_with(research_app, "4,200 ships")
    planner = ScriptedLLM([plan(("q1", Q, []))])
    researcher = ScriptedLLM(worker_script(Q, ships, "4,200 ships in 2019."))
    writer = ScriptedLLM([Crash("power cut")])
    with pytest.raises(Crash):
        research_app.research(
            Q, models=models(planner, researcher, writer), task="crash", limits=LIM
        )
    assert research_app.task("crash")[0].status == "running"
    # second run: the planner and the researcher must not be asked again
    planner2, researcher2 = ScriptedLLM([]), ScriptedLLM([])
    writer2 = ScriptedLLM(["Northport handled 4,200 ships in 2019 [E1]."])
    report = research_app.research(
        Q, models=models(planner2, researcher2, writer2), task="crash", limits=LIM
    )
    assert report.status == "answered", report.status_reasons
    assert planner2.history == [] and researcher2.history == []
    assert {c.evidence_id for c in report.citations} == {ships}
    events = research_app.task_log().events("crash")
    assert any(e.kind == "unknown" and e.payload["key"] == "write" for e in events)
    refetch = [e for e in events if e.kind == "tool_call" and e.run == 2]
    assert refetch, "citations must be fetched again in the resumed run"
    # a finished task returns its saved report
    again = research_app.research(
        Q, models=models(ScriptedLLM(), ScriptedLLM(), ScriptedLLM()), task="crash"
    )
    assert again.markdown == report.markdown


KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from research_fixtures import models, plan, worker_script
    from core.research.schemas import ResearchLimits
    from core.service import Sourcebook
    from core.settings import models_cache_dir
    from models.embedder import OnnxEmbedder
    from models.scripted import ScriptedLLM

    class Dying(ScriptedLLM):
        def stream(self, messages, **kw):
            os.kill(os.getpid(), signal.SIGKILL)

    from pathlib import Path
    app = Sourcebook(Path({home!r}), embedder=OnnxEmbedder(models_cache_dir(), threads=1))
    ships = {ships!r}
    m = models(ScriptedLLM([plan(("q1", {q!r}, []))]),
               ScriptedLLM(worker_script("ships", ships, "4,200 ships in 2019.")), Dying([]))
    lim = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, short_answer=False)
    app.research({q!r}, models=m, task="killed", limits=lim)
    """
)


@pytest.mark.slow
def test_kill_9_then_rerun_completes(research_app: Sourcebook, tmp_path: Path) -> None:
    ships = pid_with(research_app, "4,200 ships")
    script = tmp_path / "kill_run.py"
    tests_dir = str(Path(__file__).parent)
    script.write_text(
        KILL_SCRIPT.format(tests=tests_dir, home=str(research_app.home), ships=ships, q=Q)
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=180)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert research_app.task("killed")[0].status == "running"
    writer = ScriptedLLM(["Northport handled 4,200 ships in 2019 [E1]."])
    planner, researcher = ScriptedLLM([]), ScriptedLLM([])
    report = research_app.research(
        Q, models=models(planner, researcher, writer), task="killed", limits=LIM
    )
    assert report.status == "answered", report.status_reasons
    assert [c.evidence_id for c in report.citations] == [ships]
    assert planner.history == [] and researcher.history == []


def _cli(app: Sourcebook, argv: list[str], llms: dict[str, Any] | None = None) -> int:
    p = argparse.ArgumentParser()
    handlers = add_parsers(p.add_subparsers(dest="command"))
    args = p.parse_args(argv)
    if llms is not None:
        args.models = llms
    return handlers[args.command](app, args)


def test_cli_research_tasks_export(
    research_app: Sourcebook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ships = pid_with(research_app, "4,200 ships")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan(("q1", Q, []))))
    llms = models(
        ScriptedLLM([]),
        ScriptedLLM(worker_script(Q, ships, "4,200 ships in 2019.")),
        ScriptedLLM(  # the settings' default: a short cited answer, then the report body
            [
                {
                    "steps": [],
                    "calculation": "",
                    "answer": "4,200 ships",
                    "labels": ["E1"],
                    "answered": True,
                },
                "Northport handled 4,200 ships in 2019 [E1].",
            ]
        ),
    )
    out = tmp_path / "r.html"
    code = _cli(
        research_app,
        [
            "research",
            Q,
            "--task",
            "cli",
            "--collection",
            "ports",
            "--plan-file",
            str(plan_file),
            "--out",
            str(out),
        ],
        llms,
    )
    text = capsys.readouterr()
    assert code == 0, text
    assert "[1]" in text.out and "status: answered" in text.out
    assert text.out.startswith("**Answer:** 4,200 ships [1].\n\nNorthport handled")
    assert "planning" in text.err and "Northport handled" in text.err  # progress + streamed tokens
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert _cli(research_app, ["tasks"]) == 0
    assert "cli" in capsys.readouterr().out
    assert _cli(research_app, ["tasks", "show", "cli"]) == 0
    shown = capsys.readouterr().out
    assert (
        "where the time went" in shown and "model:researcher" in shown and "stage:research" in shown
    )
    for fmt in ("md", "html", "json"):
        assert _cli(research_app, ["export", "cli", "--format", fmt]) == 0
    pdf = tmp_path / "r.pdf"
    assert _cli(research_app, ["export", "cli", "--format", "pdf", "--out", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")


def test_cli_research_ends_with_the_trail_only_when_asked(
    research_app: Sourcebook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ships = pid_with(research_app, "4,200 ships")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan(("q1", Q, []))))

    def run(task: str, *flags: str) -> str:
        llms = models(
            ScriptedLLM([]),
            ScriptedLLM(worker_script(Q, ships, "Northport handled 4,200 ships in 2019.")),
            ScriptedLLM(["The port had a record year [E1]."]),
        )
        argv = ["research", Q, "--task", task, "--plan-file", str(plan_file), "--quiet", *flags]
        assert _cli(research_app, argv, llms) in (0, 1)
        return capsys.readouterr().out

    research_app.settings.research.short_answer = False
    research_app.settings.research.tool_loop = True  # worker_script scripts the loop's steps
    assert TRAIL_HEADING not in run("no-trail")
    asked = run("with-trail", "--trail")
    assert f"{TRAIL_HEADING}\n\n- Northport handled 4,200 ships in 2019. [1]" in asked


def _hostile_report() -> Report:
    md = (
        "# Findings\n\nThe harbor handled **4,200** ships [1]. <script>alert(1)</script>\n"
        "<img src=x onerror=alert(1)> [click](javascript:alert(1)) [ok](https://www.nara.gov/x)\n\n"
        "## Sources\n\n1. Northport Harbor Report — p. 1 — source: /tmp/harbor.pdf"
        " — credibility 0.70\n"
    )
    cite = CitationRecord(
        number=1,
        evidence_id="ev1:" + "a" * 16,
        doc_id="doc_x",
        title="Northport Harbor Report",
        source_uri="/tmp/harbor.pdf",
        pages=[1],
        quote="4,200 ships",
        content_sha256="0" * 64,
    )
    return Report(
        task="t",
        question="Ships? <script>x</script>",
        status="answered",
        markdown=md,
        citations=[cite],
    )


def test_export_formats_safe(tmp_path: Path) -> None:
    report = _hostile_report()
    html = export_report(report, "html").decode()
    low = html.lower()
    assert "<script" not in low and "onerror=alert" not in low.replace("onerror=alert(1)&gt;", "")
    assert "<img" not in low and "javascript:" not in low
    assert '<a href="https://www.nara.gov/x">ok</a>' in html
    assert 'href="#src-1"' in html and 'id="src-1"' in html
    assert export_report(report, "md").decode() == report.markdown
    data = json.loads(export_report(report, "json"))
    assert set(data) == {
        "status",
        "question",
        "report_markdown",
        "citations",
        "removed_citations",
        "flagged_claims",
    }
    assert set(data["citations"][0]) == {
        "number",
        "evidence_id",
        "title",
        "source_uri",
        "pages",
        "boxes",
        "quote",
        "content_sha256",
    }
    assert data == provenance(report)
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(export_report(report, "pdf"))
    with pymupdf.open(pdf) as doc:
        text = " ".join(page.get_text() for page in doc)
    assert (
        "[1]" in text
        and "Sources" in text
        and "Northport Harbor Report" in text
        and "4,200" in text
    )


def test_recording_failed_status(research_app: Sourcebook, monkeypatch: pytest.MonkeyPatch) -> None:
    from core import tasks as tasks_mod

    real_append = tasks_mod.TaskLog.append

    def failing(self: TaskLog, task: str, run: int, kind: str, key: str, payload: Any) -> Any:
        if kind == "result" and key.endswith("/worker"):
            raise tasks_mod.RecordingFailed("disk full")
        return real_append(self, task, run, kind, key, payload)

    monkeypatch.setattr(tasks_mod.TaskLog, "append", failing)
    ships = pid_with(research_app, "4,200 ships")
    report = research_app.research(
        Q,
        task="recfail",
        limits=LIM,
        models=models(
            ScriptedLLM([plan(("q1", Q, []))]),
            ScriptedLLM(worker_script(Q, ships, "4,200 ships.")),
            ScriptedLLM([]),
        ),
    )
    assert report.status == "recording_failed"
    assert threading.active_count() < 50


def test_fork_copies_what_a_task_recorded_before_a_stage(tmp_path: Path) -> None:
    log = TaskLog(tmp_path / "tasks.sqlite")
    run = log.begin("src", "q?", {"boundary": {}, "limits": {}})
    with log.span("src", run, "stage", "research"):
        log.step("src", run, "search", lambda: [1, 2])
    with log.span("src", run, "stage", "writing"):
        log.step("src", run, "draft", lambda: "text")
    log.finish("src", "answered", {"markdown": "text"})
    assert log.fork("src", "dst", before_stage="writing") == 2  # the search's start and result
    assert log.lookup("dst", "search") == ("result", [1, 2]) and log.lookup("dst", "draft") is None
    info = log.get("dst")
    assert info is not None and info.status == "running" and info.report is None
    assert [s.name for s in log.spans("dst")] == ["research"]
    assert log.begin("dst", "q?", {}) == 2  # its next run continues after the copied one
    with pytest.raises(ValueError, match="exists already"):
        log.fork("src", "dst", before_stage="writing")
    with pytest.raises(ValueError, match="no task"):
        log.fork("nope", "dst2", before_stage="writing")
    with pytest.raises(ValueError, match="never reached"):
        log.fork("src", "dst3", before_stage="checking")
    assert log.get("dst3") is None
    log.close()
