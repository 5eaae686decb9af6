"""How long a research run will take on this machine, from the timings of earlier runs here.

Every run records a timed span per stage in the task log (``core.tasks``: routing, planning,
research, writing, citations) and, in its params, the limits it ran under and the model of each
role. :func:`recorded_runs` reads the finished research runs back (not Ask conversations or
their turns, not eval replays, not tasks whose stages ran in more than one run: a resumed run
reuses earlier steps, so its stages look faster than they are); :func:`estimate` takes the
per-stage median of those with the same models and similar limits, else of those with the same
models under any limits, and else says plainly that there is no estimate yet. A run's time is
set mostly by how much the model reads and writes, which the model and the limits decide; the
question matters too, so an estimate is a median, not a promise.

:class:`RunClock` follows a run's stage events and says, at any moment, the time elapsed overall
and in the current stage and the time likely left (the rest of this stage's median plus the
medians of the stages after it). The command line prints it at each stage, the desktop ticks it.

Pure Python: the task log is read by the caller's thread (a few small queries, bounded by
``MAX_RUNS``); nothing here starts a thread.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.tasks import TaskLog

#: A run's stages in order, named as their stage spans are (core.research.run).
RUN_STAGES: tuple[str, ...] = ("routing", "planning", "research", "writing", "citations")
#: The stage names a run's progress events carry -> the stage span they fall in.
EVENT_STAGES: dict[str, str] = {
    "routing": "routing",
    "planning": "planning",
    "research": "research",
    "follow-up": "research",
    "writing": "writing",
    "checking citations": "citations",
    "repairing citations": "citations",
}
#: The roles whose models a research run calls (a role without one uses ``default``).
RUN_ROLES: tuple[str, ...] = ("router", "planner", "researcher", "writer", "checker")
#: Statuses of a run that went to its end (cancelled and failed recordings did not).
FINISHED = frozenset(
    {"answered", "insufficient_evidence", "partial", "partial_retrieval", "budget_exhausted"}
)
#: Earlier runs read back at most (the latest): recent runs tell today's speed best.
MAX_RUNS = 30
#: Limits whose value does not change a run's time (no model call depends on them).
TIMELESS_LIMITS = frozenset({"trail"})
#: Two numeric limits within this fraction of each other count as similar.
LIMIT_TOLERANCE = 0.25

NO_ESTIMATE = "no estimate yet: no earlier run on this machine with this model"

Match = Literal["same_limits", "any_limits", "none"]


class RecordedRun(BaseModel):
    """One earlier research run: its models, limits and seconds per stage."""

    task: str
    models: dict[str, str]
    limits: dict[str, Any]
    stages: dict[str, float]


class StageEstimate(BaseModel):
    stage: str
    seconds: float = Field(..., description="Median seconds of the earlier runs' stage.")
    runs: int = Field(..., description="Earlier runs that went through this stage.")


class RunEstimate(BaseModel):
    """What a run is likely to take, and what that is drawn from (see the module docstring)."""

    match: Match
    runs: int = 0
    models: str = Field("", description="The models it is for, as a user names them.")
    stages: list[StageEstimate] = Field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.match != "none" and bool(self.stages)

    @property
    def total_s(self) -> float:
        return sum(s.seconds for s in self.stages)

    def stage_s(self, stage: str) -> float | None:
        return next((s.seconds for s in self.stages if s.stage == stage), None)

    def after(self, stage: str) -> float:
        """Median seconds of the stages that follow ``stage``."""
        order = RUN_STAGES.index(stage) if stage in RUN_STAGES else -1
        return sum(s.seconds for s in self.stages if RUN_STAGES.index(s.stage) > order)

    def headline(self) -> str:
        """``about 3 min, the median of 4 earlier runs here with M and these limits``, or the
        plain sentence saying why there is no estimate."""
        if not self.available:
            return NO_ESTIMATE
        which = "these limits" if self.match == "same_limits" else "other limits"
        runs = f"{self.runs} earlier run{'s' if self.runs != 1 else ''}"
        return (
            f"{about(self.total_s)}, the median of {runs} here with "
            f"{self.models or 'this model'} and {which}"
        )

    def stages_text(self) -> str:
        """``planning 20 s, research 2 min, writing 40 s, citations 15 s``."""
        return ", ".join(f"{s.stage} {about(s.seconds, bare=True)}" for s in self.stages)

    def summary(self) -> str:
        """One line: the estimate, what it is drawn from and its stages, or why there is none."""
        if not self.available:
            return NO_ESTIMATE
        return f"estimate: {self.headline()} ({self.stages_text()})"


def run_models(models: Mapping[str, str]) -> dict[str, str]:
    """The model name of each role a run calls, ``default`` filling the roles not named."""
    default = models.get("default", "")
    return {r: models.get(r) or default for r in RUN_ROLES if models.get(r) or default}


def similar_limits(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two runs' limits would take about the same time: every limit both recorded is
    equal, numbers within ``LIMIT_TOLERANCE`` (a limit one of them lacks is from another
    version of the settings and is not held against it)."""
    for key in (a.keys() & b.keys()) - TIMELESS_LIMITS:
        x, y = a[key], b[key]
        if isinstance(x, bool) or isinstance(y, bool):
            if x != y:
                return False
        elif isinstance(x, int | float) and isinstance(y, int | float):
            if abs(x - y) > LIMIT_TOLERANCE * max(abs(x), abs(y)):
                return False
        elif isinstance(x, list) and isinstance(y, list):
            if sorted(map(str, x)) != sorted(map(str, y)):
                return False
        elif x != y:
            return False
    return True


def recorded_runs(log: TaskLog, models: Mapping[str, str] | None = None) -> list[RecordedRun]:
    """The latest finished research runs of ``log`` (at most ``MAX_RUNS``), with ``models``
    (role -> name, as :func:`run_models` resolves them) if given. See the module docstring
    for which runs count."""
    wanted = run_models(models) if models is not None else None
    out: list[RecordedRun] = []
    for info in log.list_tasks():  # latest first
        params = info.params
        if len(out) >= MAX_RUNS:
            break
        if info.status not in FINISHED or "kind" in params:
            continue  # unfinished, or an Ask conversation or turn
        limits, named = params.get("limits"), params.get("models")
        if not isinstance(limits, dict) or not isinstance(named, dict):
            continue  # recorded before runs named their models
        used = run_models({str(k): str(v) for k, v in named.items()})
        if wanted is not None and used != wanted:
            continue
        spans = [s for s in log.spans(info.name) if s.kind == "stage"]
        if any(s.start < info.created_at - 1 for s in spans):
            continue  # spans copied from another task (an eval replay)
        if len({s.run for s in spans}) != 1:
            continue  # resumed: the last run reused the steps of an earlier one
        stages: dict[str, float] = {}
        for s in spans:
            if s.ok and s.name in RUN_STAGES:
                stages[s.name] = stages.get(s.name, 0.0) + s.seconds
        if stages:
            out.append(RecordedRun(task=info.name, models=used, limits=limits, stages=stages))
    return out


def estimate(
    history: Sequence[RecordedRun],
    models: Mapping[str, str],
    limits: Mapping[str, Any],
    *,
    route: bool = False,
) -> RunEstimate:
    """The per-stage medians of the runs in ``history`` with these ``models`` (role -> name)
    and similar ``limits``, else with these models and any limits; routing counts only when
    this run routes (``route``)."""
    wanted = run_models(models)
    shown = ", ".join(dict.fromkeys(wanted.values()))
    same_model = [r for r in history if r.models == wanted]
    similar = [r for r in same_model if similar_limits(r.limits, limits)]
    runs, match = (similar, "same_limits") if similar else (same_model, "any_limits")
    if not runs:
        return RunEstimate(match="none", models=shown)
    stages = []
    for stage in RUN_STAGES:
        if stage == "routing" and not route:
            continue
        seconds = [r.stages[stage] for r in runs if stage in r.stages]
        if seconds:
            stages.append(
                StageEstimate(stage=stage, seconds=statistics.median(seconds), runs=len(seconds))
            )
    return RunEstimate(match=match, runs=len(runs), models=shown, stages=stages)


# ----------------------------------------------------------------------------- the run's clock


class ClockReading(BaseModel):
    """The clock of a run at one moment."""

    elapsed_s: float
    stage: str = ""
    stage_elapsed_s: float = 0.0
    stage_estimate_s: float | None = None
    remaining_s: float | None = Field(None, description="None: no estimate for this stage.")
    over: bool = Field(False, description="The stage is taking longer than its median.")
    done: bool = False

    def line(self) -> str:
        """``research 0:40 of about 2 min · 3:12 elapsed · about 2 min left``."""
        parts = []
        if self.stage and not self.done:
            of = ""
            if self.stage_estimate_s is not None:
                of = f" of {about(self.stage_estimate_s)}"
            parts.append(f"{self.stage} {clock(self.stage_elapsed_s)}{of}")
        parts.append(f"{clock(self.elapsed_s)} {'in all' if self.done else 'elapsed'}")
        if not self.done and self.remaining_s is not None:
            if self.over:
                rest = f"; {about(self.remaining_s)} after it" if self.remaining_s >= 1 else ""
                parts.append(f"this stage is taking longer than usual{rest}")
            else:
                parts.append(f"{about(self.remaining_s)} left")
        return " · ".join(parts)


class RunClock:
    """Elapsed and remaining time of one run, from its stage events (module docstring).

    Threading: not thread-safe; feed it and read it from one thread (the CLI's event callback,
    the desktop's UI thread). ``now`` is injectable for tests.
    """

    def __init__(
        self, estimate: RunEstimate | None = None, *, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.estimate = estimate
        self._now = now
        self.started = now()
        self.stage = ""
        self._stage_started = self.started
        self._done_at: float | None = None

    def on_stage(self, event_stage: str) -> bool:
        """Note a stage event; True when it begins a new stage (a follow-up round does not)."""
        if event_stage == "done":
            if self._done_at is None:
                self._done_at = self._now()
            return True
        stage = EVENT_STAGES.get(event_stage)
        if stage is None or stage == self.stage:
            return False
        self.stage, self._stage_started = stage, self._now()
        return True

    def read(self) -> ClockReading:
        now = self._done_at if self._done_at is not None else self._now()
        reading = ClockReading(elapsed_s=now - self.started, done=self._done_at is not None)
        if not self.stage or reading.done:
            return reading
        reading.stage = self.stage
        reading.stage_elapsed_s = now - self._stage_started
        est = self.estimate
        median = est.stage_s(self.stage) if est is not None and est.available else None
        if est is not None and median is not None:
            reading.stage_estimate_s = median
            reading.over = reading.stage_elapsed_s > median
            reading.remaining_s = max(0.0, median - reading.stage_elapsed_s) + est.after(self.stage)
        return reading


def clock(seconds: float) -> str:
    """``0:07``, ``3:12``, ``1:02:03``."""
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def about(seconds: float, *, bare: bool = False) -> str:
    """``about 40 s``, ``about 1 min 30 s``, ``about 12 min``, ``about 1 h 10 min`` (``bare``:
    without "about"): to 5 s under a minute, 30 s under ten, whole minutes above."""
    s = max(0.0, seconds)
    if s < 57.5:
        step = 5 if s >= 10 else 1
        text = f"{max(1, _nearest(s, step))} s"
    elif s < 585:
        half = _nearest(s, 30)
        text = f"{half // 60} min" + (" 30 s" if half % 60 else "")
    else:
        h, m = divmod(_nearest(s, 60) // 60, 60)
        text = (f"{h} h {m} min" if m else f"{h} h") if h else f"{m} min"
    return text if bare else f"about {text}"


def _nearest(value: float, step: int) -> int:
    """``value`` rounded half up to a multiple of ``step``."""
    return int(value / step + 0.5) * step
