"""The run-time estimate (core.research.estimate): per-stage medians of earlier runs recorded in
a real SQLite task log, the fallback to other limits, no history, the run's clock, and the
command line printing the estimate and the time left (issue #26, part 3)."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from research_fixtures import (
    models,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    run_cli,
    worker_script,
)

from core.cli_progress import ResearchProgress
from core.research.estimate import (
    NO_ESTIMATE,
    RunClock,
    RunEstimate,
    StageEstimate,
    about,
    clock,
    estimate,
    recorded_runs,
    similar_limits,
)
from core.research.schemas import ResearchLimits, RunEvent
from core.service import Sourcebook
from core.tasks import TaskLog
from models.scripted import ScriptedLLM

M15 = {"planner": "qwen-1.5b", "researcher": "qwen-1.5b", "writer": "qwen-1.5b"}
M05 = {"default": "qwen-0.5b"}
LIMITS = ResearchLimits().model_dump()
STAGES = ("planning", "research", "writing", "citations")


def _record(
    log: TaskLog,
    name: str,
    seconds: dict[str, float],
    *,
    models_: dict[str, str] | None = None,
    limits: dict[str, Any] | None = None,
    status: str = "answered",
    extra: dict[str, Any] | None = None,
) -> None:
    """A finished run as ``core.research.run`` records one: params, then one stage span each."""
    params: dict[str, Any] = {"boundary": {}, "limits": limits or LIMITS, **(extra or {})}
    if models_ is not None or "models" not in params:
        params["models"] = models_ if models_ is not None else M15
    run = log.begin(name, f"question {name}", params)
    db = sqlite3.connect(log.path)
    start = time.time()
    for stage, secs in seconds.items():
        db.execute(
            "INSERT INTO spans VALUES (?, ?, 'stage', ?, ?, ?, NULL, NULL, 1)",
            (name, run, stage, start, secs),
        )
        start += secs
    db.commit()
    db.close()
    log.finish(name, status, None)


def _stages(planning: float, research: float, writing: float, citations: float) -> dict[str, float]:
    return dict(zip(STAGES, (planning, research, writing, citations), strict=True))


@pytest.fixture
def log(tmp_path: Path) -> Any:
    log = TaskLog(tmp_path / "tasks.sqlite")
    yield log
    log.close()


def test_medians_per_stage_of_runs_with_the_same_model_and_limits(log: TaskLog) -> None:
    _record(log, "a", _stages(10, 100, 40, 10))
    _record(log, "b", _stages(20, 140, 50, 30))
    _record(log, "c", _stages(30, 300, 60, 20))
    _record(log, "other-model", _stages(1, 1, 1, 1), models_=M05)
    _record(log, "cancelled", _stages(1, 1, 1, 1), status="cancelled")
    _record(log, "asked", _stages(1, 1, 1, 1), extra={"kind": "conversation"})
    _record(log, "old", _stages(1, 1, 1, 1), extra={"models": "unrecorded"})  # not a mapping
    _record(log, "resumed", _stages(1, 1, 1, 1), status="cancelled")
    _record(log, "resumed", _stages(1, 1, 1, 1))  # its second run reused the first's steps
    # an eval replay: forked from "a" before its writing, so it holds a's spans
    log.fork("a", "replay", before_stage="writing")
    _record(log, "replay", {"writing": 1, "citations": 1})

    history = recorded_runs(log, M15)
    assert sorted(r.task for r in history) == ["a", "b", "c"]
    est = estimate(history, M15, LIMITS)
    assert est.match == "same_limits" and est.runs == 3 and est.available
    assert {s.stage: s.seconds for s in est.stages} == {
        "planning": 20,
        "research": 140,
        "writing": 50,
        "citations": 20,
    }
    assert est.total_s == 230
    assert est.headline() == (
        "about 4 min, the median of 3 earlier runs here with qwen-1.5b and these limits"
    )
    assert (
        est.summary().startswith("estimate: about 4 min") and "research 2 min 30 s" in est.summary()
    )
    # an even number of runs: the mean of the middle two
    _record(log, "d", _stages(40, 160, 70, 40))
    est = estimate(recorded_runs(log, M15), M15, LIMITS)
    assert est.stage_s("research") == 150 and est.stage_s("planning") == 25


def test_other_limits_are_the_fallback_and_similar_ones_count_as_the_same(log: TaskLog) -> None:
    _record(log, "wide", _stages(10, 400, 40, 10), limits={**LIMITS, "max_workers": 1})
    _record(log, "near", _stages(10, 200, 40, 10), limits={**LIMITS, "max_tool_calls": 22})
    chosen = {**LIMITS, "max_tool_calls": 20}
    assert similar_limits(chosen, {**LIMITS, "max_tool_calls": 22})
    assert not similar_limits(chosen, {**LIMITS, "max_workers": 1})
    assert similar_limits(chosen, {**LIMITS, "trail": not LIMITS["trail"]})  # no time in it
    assert similar_limits(chosen, {"newer_limit": 3, "max_tool_calls": 20})  # unknown: not held
    est = estimate(recorded_runs(log, M15), M15, chosen)
    assert est.match == "same_limits" and est.runs == 1 and est.stage_s("research") == 200
    # a run with limits unlike any recorded: the same model's runs under any limits
    fast = {**LIMITS, "max_workers": 6, "max_rounds": 5}
    est = estimate(recorded_runs(log, M15), M15, fast)
    assert est.match == "any_limits" and est.runs == 2 and est.stage_s("research") == 300
    assert "other limits" in est.headline()


def test_no_run_with_this_model_means_no_estimate_said_plainly(log: TaskLog) -> None:
    assert not estimate(recorded_runs(log, M15), M15, LIMITS).available  # no history at all
    _record(log, "small", _stages(1, 2, 3, 4), models_=M05)
    est = estimate(recorded_runs(log, M15), M15, LIMITS)
    assert est.match == "none" and not est.available and est.total_s == 0
    assert est.summary() == NO_ESTIMATE
    assert NO_ESTIMATE == "no estimate yet: no earlier run on this machine with this model"
    # "default" fills the roles a mapping does not name: the same models written another way
    named = {r: "qwen-0.5b" for r in ("router", "planner", "researcher", "writer", "checker")}
    assert estimate(recorded_runs(log, named), named, LIMITS).available


def test_a_run_after_clarifying_questions_counts(log: TaskLog) -> None:
    log.begin("clarified", "question clarified", {"stage": "clarify"})  # run 1: no stages
    log.finish("clarified", "clarifying", None)
    _record(log, "clarified", _stages(10, 100, 40, 10))  # run 2: the research
    assert [r.task for r in recorded_runs(log, M15)] == ["clarified"]


def test_routing_counts_only_for_a_run_that_routes(log: TaskLog) -> None:
    _record(log, "routed", {"routing": 8.0, **_stages(10, 100, 40, 10)})
    history = recorded_runs(log, M15)
    assert estimate(history, M15, LIMITS).stage_s("routing") is None
    assert estimate(history, M15, LIMITS, route=True).stage_s("routing") == 8.0


def _est(**stages: float) -> RunEstimate:
    return RunEstimate(
        match="same_limits",
        runs=3,
        models="m",
        stages=[StageEstimate(stage=k, seconds=v, runs=3) for k, v in stages.items()],
    )


def test_the_clock_tells_elapsed_and_remaining_per_stage() -> None:
    now = [100.0]
    c = RunClock(_est(planning=20, research=120, writing=40, citations=20), now=lambda: now[0])
    assert c.read().remaining_s is None and c.read().line() == "0:00 elapsed"
    assert c.on_stage("planning")
    now[0] = 110
    r = c.read()
    assert (r.stage, r.stage_elapsed_s, r.remaining_s) == ("planning", 10, 190)
    assert r.line() == "planning 0:10 of about 20 s · 0:10 elapsed · about 3 min left"
    now[0] = 125
    assert c.on_stage("research")
    now[0] = 185
    assert not c.on_stage("follow-up")  # a follow-up round is still the research stage
    r = c.read()
    assert (r.stage_elapsed_s, r.remaining_s, r.over) == (60, 120, False)
    now[0] = 300  # past research's median: the rest after it still counts down
    r = c.read()
    assert r.over and r.remaining_s == 60
    assert "taking longer than usual; about 1 min after it" in r.line()
    c.on_stage("checking citations")
    now[0] = 305
    assert c.read().remaining_s == 15
    c.on_stage("done")
    now[0] = 999
    done = c.read()
    assert done.done and done.elapsed_s == 205 and done.line() == "3:25 in all"


def test_the_clock_without_an_estimate_shows_elapsed_only() -> None:
    now = [0.0]
    c = RunClock(RunEstimate(match="none"), now=lambda: now[0])
    c.on_stage("research")
    now[0] = 75
    assert c.read().remaining_s is None and c.read().line() == "research 1:15 · 1:15 elapsed"


def test_durations_read_plainly() -> None:
    assert [about(s) for s in (0.3, 7, 42, 75, 200, 3600, 4300)] == [
        "about 1 s",
        "about 7 s",
        "about 40 s",
        "about 1 min 30 s",
        "about 3 min 30 s",
        "about 1 h",
        "about 1 h 12 min",
    ]
    assert [clock(s) for s in (0, 65, 3723)] == ["0:00", "1:05", "1:02:03"]


def test_progress_lines_carry_the_clock(capsys: pytest.CaptureFixture[str]) -> None:
    now = [0.0]
    p = ResearchProgress(_est(planning=10, research=50), now=lambda: now[0])
    p.start()
    p.event(RunEvent(kind="stage", stage="planning"))
    now[0] = 12
    p.event(RunEvent(kind="worker", worker="q1", text="researching: ships"))
    p.event(RunEvent(kind="stage", stage="research", text="1 queries"))
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("… estimate: about 1 min, the median of 3 earlier runs")
    assert err[1] == "… planning  [planning 0:00 of about 10 s · 0:00 elapsed · about 1 min left]"
    assert err[2] == "… worker: [q1] researching: ships"
    assert err[3].endswith("[research 0:00 of about 50 s · 0:12 elapsed · about 50 s left]")


# ------------------------------------------------------------------ through the facade and CLI

Q = "How many ships did the Northport harbor handle in 2019?"


def test_cli_prints_the_estimate_from_the_earlier_run_and_the_time_left(
    research_app: Sourcebook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    research_app.settings.research.short_answer = False
    ships = pid_with(research_app, "4,200 ships")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan(("q1", Q, []))))

    def run(task: str) -> tuple[int, str]:
        llms = models(
            ScriptedLLM([], name="estimate-planner"),
            ScriptedLLM(worker_script(Q, ships, "4,200 ships in 2019."), name="estimate-worker"),
            ScriptedLLM(["Northport handled 4,200 ships in 2019 [E1]."], name="estimate-writer"),
        )
        argv = ["research", Q, "--task", task, "--plan-file", str(plan_file)]
        code = run_cli(research_app, argv, llms)
        return code, capsys.readouterr().err

    code, first = run("estimate-first")
    assert code == 0, first
    assert f"… {NO_ESTIMATE}" in first.splitlines()
    assert "elapsed" in first and " left]" not in first  # no estimate: elapsed time only
    # the first run is recorded with its models; the next one is estimated from it
    est = research_app.research_estimate(
        models=models(
            ScriptedLLM(name="estimate-planner"),
            ScriptedLLM(name="estimate-worker"),
            ScriptedLLM(name="estimate-writer"),
        )
    )
    assert est.match == "same_limits" and est.runs == 1
    assert [s.stage for s in est.stages] == list(STAGES)
    assert "estimate-planner, estimate-worker, estimate-writer" in est.headline()
    code, second = run("estimate-second")
    assert code == 0, second
    lines = second.splitlines()
    assert lines[0].startswith("… estimate: about ") and "the median of 1 earlier run " in lines[0]
    planning = next(x for x in lines if x.startswith("… planning"))
    assert "elapsed · about " in planning and planning.endswith(" left]")
    assert any(x.startswith("… done: answered  [") and "in all]" in x for x in lines)
