"""The task log: every step of a research run, appended in order to SQLite before the run moves on.

A task is a named run (``<home>/tasks.sqlite``, WAL). Each event has a ``key`` unique within its
task; writing a key that already exists returns the saved payload instead of writing again, which
is what makes a rerun of the same task name resume: :meth:`TaskLog.step` returns a completed
step's saved result without running it, and a step that was started but never finished (the
process died) is marked ``unknown`` and runs again. Timing spans (stages, model calls with token
counts, tool calls) go to their own table so ``sourcebook tasks show NAME`` can say where the time
went.

A task being run holds a lease (``leases``: process id, host, start and heartbeat times), taken
in one ``BEGIN IMMEDIATE`` transaction and kept fresh by a heartbeat thread, so a second process
asked to run the same task is refused (:class:`~core.errors.TaskBusyError` names the holder)
instead of running beside it and reusing its half-written steps. A lease whose holder is gone
(its process no longer exists on this host, or its heartbeat stopped) is taken over: that is
how a task resumes after a crash.

Events are data: nothing read back from the log is ever treated as an instruction.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from core.errors import StoreError, TaskBusyError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    name TEXT PRIMARY KEY,
    question TEXT NOT NULL,
    status TEXT NOT NULL,
    runs INTEGER NOT NULL DEFAULT 0,
    params TEXT NOT NULL DEFAULT '{}',
    report TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    task TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run INTEGER NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (task, seq),
    UNIQUE (task, key)
);
CREATE TABLE IF NOT EXISTS spans (
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    start REAL NOT NULL,
    seconds REAL NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    ok INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS leases (
    task TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started REAL NOT NULL,
    heartbeat REAL NOT NULL
);
"""

# The heartbeat runs on its own thread, so it stays fresh through model calls of any length; a
# lease silent for STALE_AFTER_S belongs to a frozen process, a reused pid or another host's
# crashed run, and may be taken over.
HEARTBEAT_S = 5.0
STALE_AFTER_S = 60.0


class RecordingFailed(StoreError):
    """The task log could not be written; the run stops with status ``recording_failed``."""

    default_hint = "Check free disk space and that the home folder is writable, then rerun."


class TaskEvent(BaseModel):
    seq: int
    run: int
    kind: str
    key: str
    payload: Any
    at: float


class TaskSpan(BaseModel):
    run: int
    kind: str
    name: str
    start: float
    seconds: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ok: bool = True


class TaskInfo(BaseModel):
    name: str
    question: str
    status: str
    runs: int
    params: dict[str, Any] = Field(default_factory=dict)
    report: dict[str, Any] | None = None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a task's lease: process id, host name, and when it started and last beat."""

    pid: int
    host: str
    started: float
    heartbeat: float

    def stale(self, now: float) -> bool:
        """True when the holder is gone and its lease may be taken over."""
        if now - self.heartbeat > STALE_AFTER_S:
            return True
        return self.host == socket.gethostname() and not _process_alive(self.pid)

    def busy_error(self, task: str, now: float) -> TaskBusyError:
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        fmt = "%H:%M" if now - self.started < 86_400 else "%Y-%m-%d %H:%M"
        started = time.strftime(fmt, time.localtime(self.started))
        ago = max(0, round(now - self.heartbeat))
        return TaskBusyError(
            f"Task {task!r} is being run by process {self.pid}{where} "
            f"(started {started}, last heartbeat {ago} s ago).",
            task=task,
            pid=self.pid,
            host=self.host,
            started=self.started,
            heartbeat=self.heartbeat,
        )


def _process_alive(pid: int) -> bool:
    if sys.platform == "win32":
        # os.kill(pid, 0) terminates the process on Windows: there, only the heartbeat tells.
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


class TaskLease:
    """This process's hold on one task, from :meth:`TaskLog.acquire` until :meth:`release`.

    Threading contract: the heartbeat runs on a daemon thread of its own and writes through the
    log's locked connection; :meth:`release` may be called from any thread, more than once. If
    another process took the lease over meanwhile (this one looked gone: frozen, or a heartbeat
    that could not be written for a long time), ``lost`` is set and ``on_lost`` called once, so
    the run stops instead of writing beside the new holder.
    """

    def __init__(
        self, log: TaskLog, task: str, token: str, on_lost: Callable[[], None] | None
    ) -> None:
        self.task = task
        self.token = token
        self.lost = threading.Event()
        self._log = log
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._released = False
        self._thread = threading.Thread(target=self._beat, name=f"lease:{task}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if not self._log._refresh_lease(self.task, self.token):
                logger.warning(
                    "task %s was taken over by another process; this run stops", self.task
                )
                self.lost.set()
                if self._on_lost is not None:
                    self._on_lost()
                return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if not self._released:
            self._released = True
            self._log._drop_lease(self.task, self.token)

    def __enter__(self) -> TaskLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _use_wal(db: sqlite3.Connection, tries: int = 50) -> None:
    """Switch ``db`` to write-ahead logging. Two first opens of a new log at once (the desktop's
    window and an operation's thread) race here, and the loser's switch fails at once with
    "database is locked" (sqlite's busy wait does not cover it), so it is tried again."""
    for attempt in range(tries):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.02)


class TaskLog:
    """SQLite-backed, append-only log of research tasks.

    Threading contract: one connection shared by all threads, guarded by a lock; every write
    commits before it returns, so a step is on disk before the run moves on.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            _use_wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise RecordingFailed(f"Cannot open the task log {path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._db.execute(sql, args)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise RecordingFailed(f"Cannot write to the task log: {exc}") from exc

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    # ------------------------------------------------------------------ leases

    def acquire(self, task: str, *, on_lost: Callable[[], None] | None = None) -> TaskLease:
        """Take the task's lease for this process, or raise ``TaskBusyError`` naming its holder.

        Checking the holder and writing the new lease happen in one ``BEGIN IMMEDIATE``
        transaction, so of two processes starting the same task at once exactly one gets it.
        A stale lease (see :meth:`LeaseHolder.stale`) is taken over.
        """
        token = uuid.uuid4().hex
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    now = time.time()
                    holder = self._holder(task)
                    if holder is not None:
                        if not holder.stale(now):
                            raise holder.busy_error(task, now)
                        logger.info(
                            "task %s: taking over the lease of process %s on %s, which is gone",
                            task,
                            holder.pid,
                            holder.host,
                        )
                    self._db.execute(
                        "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?)",
                        (task, token, os.getpid(), socket.gethostname(), now, now),
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise RecordingFailed(f"Cannot take the lease on task {task!r}: {exc}") from exc
        return TaskLease(self, task, token, on_lost)

    def lease_holder(self, task: str) -> LeaseHolder | None:
        """Who holds the task's lease now (stale or not), or None."""
        with self._lock:
            return self._holder(task)

    def _holder(self, task: str) -> LeaseHolder | None:
        row = self._db.execute(
            "SELECT pid, host, started, heartbeat FROM leases WHERE task = ?", (task,)
        ).fetchone()
        return LeaseHolder(int(row[0]), str(row[1]), float(row[2]), float(row[3])) if row else None

    def _refresh_lease(self, task: str, token: str) -> bool:
        """Beat; False when the lease is no longer this holder's (another process took it)."""
        try:
            cur = self._write(
                "UPDATE leases SET heartbeat = ? WHERE task = ? AND token = ?",
                (time.time(), task, token),
            )
        except (RecordingFailed, sqlite3.Error) as exc:
            # A missed beat is not a lost lease: the next one may get through.
            logger.warning("could not refresh the lease of task %s: %s", task, exc)
            return True
        return cur.rowcount == 1

    def _drop_lease(self, task: str, token: str) -> None:
        try:
            self._write("DELETE FROM leases WHERE task = ? AND token = ?", (task, token))
        except (RecordingFailed, sqlite3.Error) as exc:
            # Left behind, the lease goes stale when this process exits or stops beating.
            logger.warning("could not release the lease of task %s: %s", task, exc)

    # ------------------------------------------------------------------ tasks

    def begin(self, name: str, question: str, params: dict[str, Any]) -> int:
        """Start (or resume) a task; returns this run's number (1 for a new task)."""
        now = time.time()
        self._write(
            "INSERT OR IGNORE INTO tasks (name, question, status, runs, params, created_at, "
            "updated_at) VALUES (?, ?, 'running', 0, ?, ?, ?)",
            (name, question, json.dumps(params), now, now),
        )
        self._write(
            "UPDATE tasks SET runs = runs + 1, status = 'running', updated_at = ? WHERE name = ?",
            (now, name),
        )
        if "boundary" in params:  # a research run (not clarification): its sources and limits
            self._write("UPDATE tasks SET params = ? WHERE name = ?", (json.dumps(params), name))
        run = int(self._read("SELECT runs FROM tasks WHERE name = ?", (name,))[0][0])
        if run > 1:
            for key in self.in_flight(name):
                self.append(name, run, "unknown", f"{key}#unknown@{run}", {"key": key})
        return run

    def finish(self, name: str, status: str, report: dict[str, Any] | None) -> None:
        self._write(
            "UPDATE tasks SET status = ?, report = ?, updated_at = ? WHERE name = ?",
            (status, json.dumps(report, default=str) if report else None, time.time(), name),
        )

    def fork(self, src: str, dst: str, *, before_stage: str) -> int:
        """Start task ``dst`` as ``src`` stood when its first ``before_stage`` stage began: its
        events and spans up to then are copied (one transaction), so running ``dst`` reuses
        every step before that stage and runs the rest anew (an ablation of a later stage costs
        that stage, not the research before it). Returns the events copied. ``dst`` must not
        exist; ``src`` must have reached the stage."""
        info = self.get(src)
        if info is None:
            raise ValueError(f"no task {src!r} to fork")
        if self.get(dst) is not None:
            raise ValueError(f"task {dst!r} exists already")
        starts = [s.start for s in self.spans(src) if s.kind == "stage" and s.name == before_stage]
        if not starts:
            raise ValueError(f"task {src!r} never reached its {before_stage} stage")
        cut = min(starts)
        now = time.time()
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(
                    "INSERT INTO tasks (name, question, status, runs, params, created_at, "
                    "updated_at) SELECT ?, question, 'running', runs, params, ?, ? FROM tasks "
                    "WHERE name = ?",
                    (dst, now, now, src),
                )
                copied = self._db.execute(
                    "INSERT INTO events (task, seq, run, kind, key, payload, at) SELECT ?, seq, "
                    "run, kind, key, payload, at FROM events WHERE task = ? AND at < ?",
                    (dst, src, cut),
                ).rowcount
                self._db.execute(
                    "INSERT INTO spans SELECT ?, run, kind, name, start, seconds, prompt_tokens, "
                    "completion_tokens, ok FROM spans WHERE task = ? AND start < ?",
                    (dst, src, cut),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise RecordingFailed(f"Cannot fork task {src!r}: {exc}") from exc
        return int(copied)

    def get(self, name: str) -> TaskInfo | None:
        rows = self._read(
            "SELECT name, question, status, runs, params, report, created_at, updated_at "
            "FROM tasks WHERE name = ?",
            (name,),
        )
        return _info(rows[0]) if rows else None

    def list_tasks(self) -> list[TaskInfo]:
        rows = self._read(
            "SELECT name, question, status, runs, params, NULL, created_at, updated_at "
            "FROM tasks ORDER BY updated_at DESC"
        )
        return [_info(r) for r in rows]

    # ------------------------------------------------------------------ events

    def append(self, task: str, run: int, kind: str, key: str, payload: Any) -> Any:
        """Append one event; if ``key`` was written before, return the saved payload instead."""
        saved = self.lookup(task, key)
        if saved is not None:
            return saved[1]
        data = json.dumps(payload, default=str)
        for _attempt in range(5):
            try:
                self._write(
                    "INSERT INTO events (task, seq, run, kind, key, payload, at) VALUES "
                    "(?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE task = ?), "
                    "?, ?, ?, ?, ?)",
                    (task, task, run, kind, key, data, time.time()),
                )
                return payload
            except sqlite3.IntegrityError:
                saved = self.lookup(task, key)
                if saved is not None:
                    return saved[1]
        raise RecordingFailed(f"Cannot append event {key!r} to task {task!r}.")

    def lookup(self, task: str, key: str) -> tuple[str, Any] | None:
        rows = self._read(
            "SELECT kind, payload FROM events WHERE task = ? AND key = ?", (task, key)
        )
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    def events(self, task: str) -> list[TaskEvent]:
        rows = self._read(
            "SELECT seq, run, kind, key, payload, at FROM events WHERE task = ? ORDER BY seq",
            (task,),
        )
        return [
            TaskEvent(seq=r[0], run=r[1], kind=r[2], key=r[3], payload=json.loads(r[4]), at=r[5])
            for r in rows
        ]

    def in_flight(self, task: str) -> list[str]:
        """Keys of steps that started but have neither a result nor an unknown mark."""
        rows = self._read(
            "SELECT payload FROM events e WHERE task = ? AND kind = 'start' AND NOT EXISTS "
            "(SELECT 1 FROM events r WHERE r.task = e.task AND r.key = json_extract(e.payload, "
            "'$.key')) ORDER BY seq",
            (task,),
        )
        keys = [json.loads(r[0])["key"] for r in rows]
        marked = {
            json.loads(r[0])["key"]
            for r in self._read(
                "SELECT payload FROM events WHERE task = ? AND kind = 'unknown'", (task,)
            )
        }
        return [k for k in keys if k not in marked]

    def step(
        self,
        task: str,
        run: int,
        key: str,
        fn: Callable[[], T],
        *,
        dump: Callable[[T], Any] = lambda x: x,
        load: Callable[[Any], T] = lambda x: x,
    ) -> tuple[T, bool]:
        """Run ``fn`` once per task: a saved result for ``key`` is returned as ``(value, True)``.

        The start is recorded before ``fn`` runs and the result after, each committed.
        """
        saved = self.lookup(task, key)
        if saved is not None and saved[0] == "result":
            return load(saved[1]), True
        self.append(task, run, "start", f"{key}#start@{run}", {"key": key})
        value = fn()
        self.append(task, run, "result", key, dump(value))
        return value, False

    def record_error(self, task: str, run: int, key: str, error: str) -> None:
        self.append(task, run, "error", f"{key}#error@{run}", {"key": key, "error": error})

    # ------------------------------------------------------------------ timing spans

    @contextmanager
    def span(self, task: str, run: int, kind: str, name: str) -> Iterator[dict[str, int]]:
        """Time a block; the block may set ``prompt_tokens`` / ``completion_tokens``."""
        counts: dict[str, int] = {}
        start = time.time()
        t0 = time.perf_counter()
        ok = True
        try:
            yield counts
        except BaseException:
            ok = False
            raise
        finally:
            try:
                self._write(
                    "INSERT INTO spans VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        task,
                        run,
                        kind,
                        name,
                        start,
                        time.perf_counter() - t0,
                        counts.get("prompt_tokens"),
                        counts.get("completion_tokens"),
                        int(ok),
                    ),
                )
            except RecordingFailed:
                logger.warning("could not record span %s/%s", kind, name)

    def spans(self, task: str) -> list[TaskSpan]:
        rows = self._read(
            "SELECT run, kind, name, start, seconds, prompt_tokens, completion_tokens, ok "
            "FROM spans WHERE task = ? ORDER BY start",
            (task,),
        )
        return [
            TaskSpan(
                run=r[0],
                kind=r[1],
                name=r[2],
                start=r[3],
                seconds=r[4],
                prompt_tokens=r[5],
                completion_tokens=r[6],
                ok=bool(r[7]),
            )
            for r in rows
        ]


def _info(r: tuple[Any, ...]) -> TaskInfo:
    return TaskInfo(
        name=r[0],
        question=r[1],
        status=r[2],
        runs=r[3],
        params=json.loads(r[4] or "{}"),
        report=json.loads(r[5]) if r[5] else None,
        created_at=r[6],
        updated_at=r[7],
    )


def timing_summary(spans: list[TaskSpan]) -> list[tuple[str, int, float, int, int]]:
    """(kind:name, count, seconds, prompt tokens, completion tokens), slowest first."""
    agg: dict[str, list[float]] = {}
    for s in spans:
        name = s.name.split("/")[0] if s.kind != "stage" else s.name
        row = agg.setdefault(f"{s.kind}:{name}", [0, 0.0, 0, 0])
        row[0] += 1
        row[1] += s.seconds
        row[2] += s.prompt_tokens or 0
        row[3] += s.completion_tokens or 0
    out = [(k, int(v[0]), v[1], int(v[2]), int(v[3])) for k, v in agg.items()]
    return sorted(out, key=lambda r: -r[2])
