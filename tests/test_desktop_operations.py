"""desktop.operations: progress, results, errors and cancellation reach the UI thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QThread
from PySide6.QtWidgets import QApplication

from core.errors import CancelledError, CorruptFileError
from desktop.operations import OpContext, Operations

TIMEOUT = 5000


def _on_ui_thread() -> bool:
    app = QApplication.instance()
    assert app is not None
    return QThread.currentThread() is app.thread()


def test_progress_and_success_arrive_on_the_ui_thread(qtbot: Any, ops: Operations) -> None:
    seen: dict[str, Any] = {"progress": [], "threads": []}

    def work(ctx: OpContext) -> str:
        seen["worker_on_ui"] = _on_ui_thread()
        for i in range(3):
            ctx.progress(i)
        return "done"

    def progress(value: object) -> None:
        seen["progress"].append(value)
        seen["threads"].append(_on_ui_thread())

    def success(value: object) -> None:
        seen["result"] = value
        seen["threads"].append(_on_ui_thread())

    handle = ops.run(work, label="work", on_progress=progress, on_success=success)
    with qtbot.waitSignal(handle.finished, timeout=TIMEOUT):
        pass
    assert seen["worker_on_ui"] is False
    assert seen["progress"] == [0, 1, 2]
    assert seen["result"] == "done"
    assert seen["threads"] and all(seen["threads"])


def test_errors_go_to_on_error_or_to_operation_failed(qtbot: Any, ops: Operations) -> None:
    def fail(ctx: OpContext) -> None:
        raise CorruptFileError("broken", path="x.pdf")

    got: list[tuple[BaseException, bool]] = []
    h = ops.run(fail, label="fail", on_error=lambda exc: got.append((exc, _on_ui_thread())))
    with qtbot.waitSignal(h.finished, timeout=TIMEOUT):
        pass
    assert isinstance(got[0][0], CorruptFileError) and got[0][1]

    with qtbot.waitSignal(ops.operation_failed, timeout=TIMEOUT) as blocker:
        h2 = ops.run(fail, label="unhandled")
    handle, exc = blocker.args[0]
    assert handle is h2 and isinstance(exc, CorruptFileError)


def test_cancel_stops_the_operation_between_steps(qtbot: Any, ops: Operations) -> None:
    started = threading.Event()
    steps: list[int] = []

    def long(ctx: OpContext) -> int:
        started.set()
        for i in range(1000):
            if ctx.cancel.wait(0.01):
                raise CancelledError("stopped")
            steps.append(i)
        return len(steps)

    errors: list[BaseException] = []
    h = ops.run(long, label="long", exclusive=True, on_error=errors.append)
    assert started.wait(5)
    with qtbot.waitSignal(h.finished, timeout=TIMEOUT):
        h.cancel()
    assert isinstance(errors[0], CancelledError)
    assert len(steps) < 1000


def test_busy_count_and_exclusive_order(qtbot: Any, ops: Operations) -> None:
    counts: list[int] = []
    ops.busy_changed.connect(counts.append)
    order: list[int] = []
    active = [0]
    overlap = [False]
    lock = threading.Lock()

    def step(n: int) -> Any:
        def run(ctx: OpContext) -> int:
            with lock:
                active[0] += 1
                overlap[0] |= active[0] > 1
            threading.Event().wait(0.02)
            order.append(n)
            with lock:
                active[0] -= 1
            return n

        return run

    handles = [ops.run(step(n), label=f"w{n}", exclusive=True) for n in range(4)]
    qtbot.waitUntil(lambda: all(h.done for h in handles), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: bool(counts) and counts[-1] == 0, timeout=TIMEOUT)
    assert order == [0, 1, 2, 3]
    assert not overlap[0]
    assert max(counts) == 4
