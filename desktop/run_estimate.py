"""The estimate of a research run's time, shown before Start (``Sourcebook.research_estimate``).

:class:`EstimateLabel` reads the estimate in the background (a few quick task-log reads, on the
shared pool, so it never waits behind a run) and shows one line: "Estimated time: about 3 min,
the median of 4 earlier runs here with M and these limits", or says plainly that there is none
yet. It is read again when asked (:meth:`refresh`: the panel is shown, a run finished), since
the settings (models, limits) and the history it is drawn from change.

Threading: UI thread only; the read goes through ``Operations``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from core.service import ResearchLimits, RunEstimate, Sourcebook
from desktop.errors import guarded
from desktop.operations import Operations

logger = logging.getLogger(__name__)


def estimate_text(estimate: RunEstimate) -> str:
    if not estimate.available:
        return "No estimate yet: no earlier run on this machine with this model."
    return f"Estimated time: {estimate.headline()}."


class EstimateLabel(QLabel):
    """One line with the estimate for a run with the settings' models and limits.

    Signal ``estimated(RunEstimate)`` each time a read finishes (the shown one is ``estimate``).
    """

    estimated = Signal(object)

    def __init__(self, service: Sourcebook, ops: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("research-estimate")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._service = service
        self._ops = ops
        self._reading = False
        self.estimate: RunEstimate | None = None

    def refresh(self) -> None:
        """Read the estimate for the settings' models and limits again (one read at a time)."""
        if self._reading:
            return
        self._reading = True
        self.read(None, self._show)

    def read(
        self,
        limits: ResearchLimits | None,
        done: Callable[[RunEstimate], None],
        route: bool = False,
    ) -> None:
        """Read the estimate for ``limits`` (None: the settings') in the background; ``done``
        gets it on the UI thread (a failure is logged: an estimate is never worth a dialog)."""
        svc = self._service

        def failed(exc: BaseException) -> None:
            self._reading = False
            logger.warning("could not estimate the run's time: %s", exc)

        self._ops.run(
            lambda _ctx: svc.research_estimate(limits=limits, route=route),
            label="Estimating the run's time",
            on_success=guarded(self, done),
            on_error=guarded(self, failed),
        )

    def _show(self, estimate: RunEstimate) -> None:
        self._reading = False
        self.estimate = estimate
        self.setText(estimate_text(estimate))
        self.setToolTip(estimate.stages_text() if estimate.available else "")
        self.estimated.emit(estimate)
