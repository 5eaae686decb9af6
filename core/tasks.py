"""The task log: every step of a research run, appended in order to SQLite before the run moves on.

A task is a named run (``<home>/tasks.sqlite``, WAL). Each event has a ``key`` unique within its
task; writing a key that already exists returns the saved payload instead of writing again, which
is what makes a rerun of the same task name resume: :meth:`TaskLog.step` returns a completed
step's saved result without running it, and a step that was started but never finished (the
process died) is marked ``unknown`` and runs again. Timing spans (stages, model calls with token
counts, tool calls) go to their own table so ``sourcebook tasks show NAME`` can say where the time
went.

Events are data: nothing read back from the log is ever treated as an instruction.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from core.errors import StoreError

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
"""


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
            self._db.execute("PRAGMA journal_mode=WAL")
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
