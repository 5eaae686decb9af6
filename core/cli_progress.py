"""A research run's progress on the command line's stderr: the estimate before it starts, then
each event, stage lines carrying the run's clock (elapsed, and the time likely left).

``sourcebook research`` makes one :class:`ResearchProgress` per run (see
:mod:`core.research.estimate` for what the estimate and the clock are drawn from).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from core.research.estimate import RunClock, RunEstimate
from core.research.schemas import RunEvent


class ResearchProgress:
    """Prints one run's estimate and events. Called from the run's threads one event at a
    time (``core`` emits events in order); writes only to ``out``."""

    def __init__(
        self,
        estimate: RunEstimate | None,
        *,
        out: TextIO | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        self.estimate = estimate
        self._out = out
        self.clock = RunClock(estimate) if now is None else RunClock(estimate, now=now)

    def _print(self, text: str) -> None:
        print(text, file=self._out or sys.stderr, flush=True)

    def start(self) -> None:
        """The estimate (or why there is none), before the run's first event."""
        if self.estimate is not None:
            self._print(f"… {self.estimate.summary()}")

    def event(self, ev: RunEvent) -> None:
        who = f"[{ev.worker}] " if ev.worker else ""
        line = f"… {ev.stage or ev.kind}: {who}{ev.text}".rstrip(": ")
        if ev.kind == "stage":
            self.clock.on_stage(ev.stage)
            line = f"{line}  [{self.clock.read().line()}]"
        self._print(line)
