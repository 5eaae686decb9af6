"""The one way the desktop app runs work off the UI thread.

Every long call into ``core`` (adding documents, searching, a research run, exporting) goes
through :class:`Operations`: a callable goes in, progress, result and error come back as Qt
signals delivered on the UI thread. No other module in ``desktop/`` starts a thread.

Two pools:

* ``exclusive=True`` work (library writes, model calls: anything that must not overlap) runs on
  a one-thread pool, in submission order, like Anki's collection executor;
* everything else (reads such as search, evidence lookups, page rendering, export) runs on a
  small shared pool;
* ``beside=True`` work (an Ask: model calls that only read the library) runs on a one-thread
  lane of its own, so it need not wait minutes behind a research run, which is started with
  ``allow_beside=True``. Beside work waits while any other exclusive work runs (a library write,
  a settings save that closes the models) and such work waits for it: only a run that allows it
  shares its time. The model is shared safely: it serves one call at a time on its own worker
  thread, so an Ask's calls queue between the run's (``models.llamacpp``).

Cancellation is cooperative: each operation gets an :class:`OpContext` whose ``cancel`` event is
set by :meth:`OpHandle.cancel`; ``core`` checks it between steps.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

logger = logging.getLogger(__name__)

T = TypeVar("T")


class OpContext:
    """Handed to the operation's callable (on a worker thread).

    ``cancel`` is the event to pass to ``core`` calls; ``progress(obj)`` reports a pydantic
    model (or any value) to the UI thread; ``cancelled`` is a shortcut for ``cancel.is_set()``.
    """

    def __init__(self, handle: OpHandle[Any]) -> None:
        self._handle = handle
        self.cancel = handle.cancel_event

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def progress(self, value: object) -> None:
        self._handle._emit_progress.emit(value)


class OpHandle(QObject, Generic[T]):
    """One submitted operation. Lives on the UI thread; its slots run there.

    Signals: ``progressed(object)``, ``succeeded(object)``, ``failed(object)`` (the exception),
    ``finished()`` (always last, after success, failure or cancellation).
    """

    progressed = Signal(object)
    succeeded = Signal(object)
    failed = Signal(object)
    finished = Signal()

    # Emitted from the worker thread; queued to the slots below on the UI thread.
    _emit_progress = Signal(object)
    _emit_result = Signal(object)
    _emit_error = Signal(object)

    def __init__(self, label: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.label = label
        self.cancel_event = threading.Event()
        self.done = False
        self._emit_progress.connect(self._on_progress)
        self._emit_result.connect(self._on_result)
        self._emit_error.connect(self._on_error)

    def cancel(self) -> None:
        """Ask the operation to stop at its next step (it still reports ``finished``)."""
        self.cancel_event.set()

    @Slot(object)
    def _on_progress(self, value: object) -> None:
        if not self.done:
            self.progressed.emit(value)

    @Slot(object)
    def _on_result(self, value: object) -> None:
        self.done = True
        self.succeeded.emit(value)
        self.finished.emit()

    @Slot(object)
    def _on_error(self, exc: object) -> None:
        self.done = True
        self.failed.emit(exc)
        self.finished.emit()


class _Gate:
    """Which exclusive and beside work may overlap (module docstring); worker threads only."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._beside = 0  # beside operations running
        self._blocking = 0  # exclusive operations running or waiting that allow none beside

    @contextlib.contextmanager
    def exclusive(self, allow_beside: bool) -> Iterator[None]:
        if allow_beside:
            yield
            return
        with self._cond:
            self._blocking += 1
            self._cond.wait_for(lambda: self._beside == 0)
        try:
            yield
        finally:
            with self._cond:
                self._blocking -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def beside(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: self._blocking == 0)
            self._beside += 1
        try:
            yield
        finally:
            with self._cond:
                self._beside -= 1
                self._cond.notify_all()


class _Runnable(QRunnable):
    def __init__(
        self,
        fn: Callable[[OpContext], Any],
        handle: OpHandle[Any],
        gate: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        super().__init__()
        self._fn = fn
        self._handle = handle
        self._gate = gate or contextlib.nullcontext
        self.setAutoDelete(True)

    def run(self) -> None:  # worker thread
        handle = self._handle
        try:
            with self._gate():
                result = self._fn(OpContext(handle))
        except BaseException as exc:  # every failure reaches the UI
            if not isinstance(exc, Exception):
                logger.error("operation %r raised %r", handle.label, exc)
            handle._emit_error.emit(exc)
        else:
            handle._emit_result.emit(result)


class Operations(QObject):
    """Runs callables in the background and reports through signals (see the module docstring).

    ``library_did_change(LibraryChanges)`` is emitted by whoever changed the library (after a
    successful add or remove) so that views refresh from one place; ``busy_changed(int)`` gives
    the number of running operations for a status bar.
    """

    library_did_change = Signal(object)
    busy_changed = Signal(int)
    operation_failed = Signal(object)  # (OpHandle, exception): the main window shows it

    def __init__(self, parent: QObject | None = None, *, readers: int = 2) -> None:
        super().__init__(parent)
        self._exclusive = QThreadPool(self)
        self._exclusive.setMaxThreadCount(1)
        self._shared = QThreadPool(self)
        self._shared.setMaxThreadCount(max(1, readers))
        self._beside = QThreadPool(self)
        self._beside.setMaxThreadCount(1)
        self._gate = _Gate()
        self._running: list[OpHandle[Any]] = []

    def run(
        self,
        fn: Callable[[OpContext], T],
        *,
        label: str,
        on_success: Callable[[T], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_progress: Callable[[Any], None] | None = None,
        exclusive: bool = False,
        allow_beside: bool = False,
        beside: bool = False,
    ) -> OpHandle[T]:
        """Start ``fn(ctx)`` on a worker thread and return its handle.

        Callbacks run on the UI thread. Without ``on_error`` a failure goes to
        ``operation_failed`` (the main window turns it into an error dialog). ``beside`` and
        ``allow_beside``: see the module docstring.
        """
        handle: OpHandle[T] = OpHandle(label, self)
        if on_progress is not None:
            handle.progressed.connect(on_progress)
        if on_success is not None:
            handle.succeeded.connect(on_success)
        if on_error is not None:
            handle.failed.connect(on_error)
        else:
            handle.failed.connect(lambda exc, h=handle: self.operation_failed.emit((h, exc)))
        handle.finished.connect(lambda h=handle: self._finished(h))
        self._running.append(handle)
        self.busy_changed.emit(len(self._running))
        if beside:
            self._beside.start(_Runnable(fn, handle, self._gate.beside))
        elif exclusive:
            gate = functools.partial(self._gate.exclusive, allow_beside)
            self._exclusive.start(_Runnable(fn, handle, gate))
        else:
            self._shared.start(_Runnable(fn, handle))
        return handle

    @property
    def running(self) -> list[OpHandle[Any]]:
        return list(self._running)

    def cancel_all(self) -> None:
        for h in self._running:
            h.cancel()

    def wait(self, msecs: int = -1) -> bool:
        """Block until every pool is idle (for shutdown and tests)."""
        a = self._exclusive.waitForDone(msecs)
        b = self._shared.waitForDone(msecs)
        c = self._beside.waitForDone(msecs)
        return a and b and c

    def _finished(self, handle: OpHandle[Any]) -> None:
        if handle in self._running:
            self._running.remove(handle)
        self.busy_changed.emit(len(self._running))
        handle.deleteLater()
