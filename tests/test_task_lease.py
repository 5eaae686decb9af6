"""A task being run holds a lease in the task log: a second runner is refused while the holder
lives, and takes over once it is gone. In-process units, then two real processes."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from research_fixtures import (
    models,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    worker_script,
)

import core.tasks
from core.errors import TaskBusyError
from core.research.schemas import ResearchLimits
from core.service import Sourcebook
from core.tasks import TaskLog
from models.scripted import ScriptedLLM

REPO = Path(__file__).resolve().parent.parent
LIM = ResearchLimits(max_workers=1, max_rounds=1, short_answer=False)
Q = "How many ships did Northport harbor handle in 2019?"
BUSY = re.compile(
    r"Task 't' is being run by process (\d+) \(started \d\d:\d\d, last heartbeat \d+ s ago\)\."
)


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    code = "import os; print(os.getpid())"
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(proc.stdout)


def _set_lease(path: Path, task: str, pid: int, host: str, beat_age: float) -> None:
    now = time.time()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT OR REPLACE INTO leases VALUES (?, 'x', ?, ?, ?, ?)",
            (task, pid, host, now - beat_age, now - beat_age),
        )


def test_a_second_runner_is_refused_until_the_lease_is_released(tmp_path: Path) -> None:
    first, second = TaskLog(tmp_path / "tasks.sqlite"), TaskLog(tmp_path / "tasks.sqlite")
    lease = first.acquire("t")
    with pytest.raises(TaskBusyError) as busy:
        second.acquire("t")
    exc = busy.value
    match = BUSY.fullmatch(exc.message)
    assert match and int(match.group(1)) == os.getpid() == exc.pid, exc.message
    assert exc.hint == (
        "Wait for it to finish or stop it; a run whose process is gone is taken over automatically."
    )
    second.acquire("other").release()  # leases are per task
    lease.release()
    lease.release()  # idempotent
    assert first.lease_holder("t") is None
    with second.acquire("t"):
        assert second.lease_holder("t") is not None
    assert second.lease_holder("t") is None
    first.close()
    second.close()


def test_a_stale_lease_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite"
    log = TaskLog(path)
    here = core.tasks.socket.gethostname()
    # this host, process gone (a crash): taken over at once
    _set_lease(path, "t", _dead_pid(), here, beat_age=1)
    log.acquire("t").release()
    # another host, heartbeat fresh: refused, naming the host
    _set_lease(path, "t", 4242, "elsewhere", beat_age=1)
    with pytest.raises(TaskBusyError, match="process 4242 on elsewhere"):
        log.acquire("t")
    # another host, heartbeat silent for longer than the timeout: taken over
    _set_lease(path, "t", 4242, "elsewhere", beat_age=core.tasks.STALE_AFTER_S + 5)
    log.acquire("t").release()
    # this host, process alive but silent that long (frozen, or a reused pid): taken over
    _set_lease(path, "t", os.getppid(), here, beat_age=core.tasks.STALE_AFTER_S + 5)
    log.acquire("t").release()
    log.close()


def test_the_heartbeat_keeps_the_lease_fresh_and_notices_a_takeover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core.tasks, "HEARTBEAT_S", 0.05)
    path = tmp_path / "tasks.sqlite"
    log = TaskLog(path)
    lost: list[bool] = []
    lease = log.acquire("t", on_lost=lambda: lost.append(True))
    start = log.lease_holder("t")
    assert start is not None
    time.sleep(0.3)
    beat = log.lease_holder("t")
    assert beat is not None and beat.heartbeat > start.heartbeat
    _set_lease(path, "t", 4242, "elsewhere", beat_age=0)  # another process took it over
    assert lease.lost.wait(5) and lost == [True]
    lease.release()  # leaves the new holder's lease alone
    holder = log.lease_holder("t")
    assert holder is not None and holder.pid == 4242
    log.close()


class Crash(Exception):
    """Stands in for the process dying: nothing in the run catches it."""


class _LeaseProbe(ScriptedLLM):
    """A writer that records who holds the task's lease while it writes."""

    def __init__(self, log_path: Path, answers: list[Any]) -> None:
        super().__init__(answers)
        self.log_path = log_path
        self.holders: list[int | None] = []

    def stream(self, messages: Any, **kw: Any) -> Any:
        log = TaskLog(self.log_path)
        holder = log.lease_holder("leased")
        log.close()
        self.holders.append(holder.pid if holder else None)
        return super().stream(messages, **kw)


def test_a_run_releases_its_lease_and_a_resume_takes_it_again(research_app: Sourcebook) -> None:
    ships = pid_with(research_app, "4,200 ships")
    log_path = research_app.home / "tasks.sqlite"
    crash = _LeaseProbe(log_path, [Crash("power cut")])
    with pytest.raises(Crash):
        research_app.research(
            Q,
            models=models(
                ScriptedLLM([plan(("q1", Q, []))]),
                ScriptedLLM(worker_script(Q, ships, "4,200 ships in 2019.")),
                crash,
            ),
            task="leased",
            limits=LIM,
        )
    log = research_app.task_log()
    try:
        assert crash.holders == [os.getpid()]  # held while the run ran
        assert log.lease_holder("leased") is None  # released though the run died
        writer = _LeaseProbe(log_path, ["Northport handled 4,200 ships in 2019 [E1]."])
        report = research_app.research(
            Q, models=models(ScriptedLLM(), ScriptedLLM(), writer), task="leased", limits=LIM
        )
        assert report.status == "answered", report.status_reasons
        assert writer.holders == [os.getpid()]  # the resume took the lease again
        assert log.lease_holder("leased") is None  # and released it at the end
    finally:
        log.close()


def test_a_task_being_run_is_refused_by_research(research_app: Sourcebook) -> None:
    log = research_app.task_log()
    try:
        with log.acquire("held"), pytest.raises(TaskBusyError, match="Task 'held' is being run"):
            idle = models(ScriptedLLM(), ScriptedLLM(), ScriptedLLM())
            research_app.research(Q, models=idle, task="held", limits=LIM)
        assert log.get("held") is None  # refused before it wrote anything
    finally:
        log.close()


# ----------------------------------------------------------------------------- two processes

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from core.tasks import TaskLog
    lease = TaskLog(Path(sys.argv[1])).acquire(sys.argv[2])
    print("held", flush=True)
    sys.stdin.read()  # hold until killed
    """
)

# The real command line in a real process; only the models are the scripted fakes.
RUNNER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from research_fixtures import models, worker_script
    from models.scripted import ScriptedLLM
    import core.cli_research
    from core.cli import main

    answer = {{"steps": [], "calculation": "", "answer": "4,200 ships", "labels": ["E1"],
              "answered": True}}
    llms = models(
        ScriptedLLM([]),
        ScriptedLLM(worker_script({q!r}, {ships!r}, "4,200 ships in 2019.")),
        ScriptedLLM([answer, "Northport handled 4,200 ships in 2019 [E1]."]),
    )
    core.cli_research.build_models = lambda app, args: llms
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.slow
def test_a_second_process_is_refused_then_takes_over_when_the_holder_dies(
    research_app: Sourcebook, tmp_path: Path
) -> None:
    ships = pid_with(research_app, "4,200 ships")
    home = research_app.home
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan(("q1", Q, []))))
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER.format(tests=str(Path(__file__).parent), q=Q, ships=ships))
    # the children search the library with the embedder it was built with
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "SOURCEBOOK_MODELS__EMBEDDER_RUNTIME": "onnx",
    }
    research = [sys.executable, str(runner), "--home", str(home), "research", Q]
    research += [
        "--task",
        "shared",
        "--collection",
        "ports",
        "--plan-file",
        str(plan_file),
        "--quiet",
    ]

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "tasks.sqlite"), "shared"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        refused = subprocess.run(research, env=env, capture_output=True, text=True, timeout=300)
        assert refused.returncode == 75, refused.stderr
        assert (
            f"error: Task 'shared' is being run by process {holder.pid} (started " in refused.stderr
        ), refused.stderr
        assert "Wait for it to finish or stop it" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert "shared" not in {t.name for t in research_app.tasks()}  # refused before writing
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    assert holder.returncode == -signal.SIGKILL

    took_over = subprocess.run(research, env=env, capture_output=True, text=True, timeout=300)
    assert took_over.returncode == 0, took_over.stderr
    assert "status: answered (task shared)" in took_over.stdout, took_over.stdout
    log = research_app.task_log()
    try:
        assert log.lease_holder("shared") is None
        info = log.get("shared")
        assert info is not None and info.status == "answered" and info.runs == 1
    finally:
        log.close()


def test_tasks_lists_a_run_whose_process_is_gone_as_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.cli import main

    home = tmp_path / "home"
    app = Sourcebook(home)
    log = app.task_log()
    try:
        for name in ("gone", "live"):
            log.begin(name, "A question about the harbor?", {})  # status "running"
        _set_lease(home / "tasks.sqlite", "gone", _dead_pid(), socket.gethostname(), 1.0)
        lease = log.acquire("live")
        try:
            assert main(["--home", str(home), "tasks"]) == 0
        finally:
            lease.release()
    finally:
        log.close()
        app.close()
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert " interrupted " in rows["gone"]
    assert f"running (pid {os.getpid()})" in rows["live"]


def test_first_opens_of_a_new_task_log_at_once_all_succeed(tmp_path: Path) -> None:
    """The desktop's window and an operation's thread may open a new home's task log at the
    same moment; switching it to write-ahead logging then raced ("database is locked")."""
    for i in range(40):
        path = tmp_path / f"home{i}" / "tasks.sqlite"
        start, errors = threading.Barrier(4), []

        def open_log(
            path: Path = path, start: threading.Barrier = start, errors: list[Exception] = errors
        ) -> None:
            start.wait()
            try:
                TaskLog(path).close()
            except Exception as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=open_log) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
