"""UI responsiveness: the event loop's longest stall while a large add and a research run go on.

The real app (``MainWindow`` on a temporary home, offscreen) adds a many-page PDF generated with
PyMuPDF through the library panel and, at the same moment, starts a research run from the
research panel with scripted models (``models.scripted.ScriptedLLM``: a plan, one worker that
fetches a passage, a writer that streams its answer token by token). While they run, a user is
simulated: every second a library search, and the evidence viewer opens a passage and renders its
page.

Both the add and the run use the one exclusive worker (library writes and model calls never
overlap, by design), so the run starts when the add is done; the measured window covers both, and
the searches and renders run on the shared readers alongside them.

Measure: a ``QTimer`` fires every 5 ms on the UI thread; lateness = actual interval - 5 ms.
Reports p50 / p95 / p99 / max lateness, the number of stalls over 50 ms (the target: max < 50 ms)
and what was running at the worst one. Warm-up (opening the library, loading the embedder,
adding the small research library) is not measured. Saves ``bench/results/ui_stall.json``.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/ui_stall.py [--pages 300] [--runtime torch]
        [--trace-stalls FILE]   (every thread's Python stack at each stall, to find its cause)
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pymupdf  # noqa: E402
from PySide6.QtCore import QEventLoop, Qt, QTimer  # noqa: E402

import desktop.errors  # noqa: E402
from core.service import Report, Sourcebook  # noqa: E402
from desktop.app import build_window, create_application, shutdown_operations  # noqa: E402
from models.scripted import ScriptedLLM  # noqa: E402

RESULTS = REPO / "bench" / "results"
INTERVAL_MS = 5
TARGET_MS = 50.0
FACTS = [
    "The Northport harbor handled 4,200 ships in 2019, a record for the port.",
    "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park.",
    "Dredging of the main channel in 2020 cost 12 million dollars.",
]
QUESTION = "How many ships did the Northport harbor handle in 2019?"
ANSWER = (
    "The Northport harbor handled 4,200 ships in 2019 [E1], a record for the port. "
    "This figure comes from the harbor report and is the highest count it gives for any year; "
    "the report does not break the number down by type of vessel or by month."
)


TRACE_EVERY_S = 0.025  # --trace-stalls: a dump every 25 ms for as long as a tick is late


class StallMonitor:
    """Records how late a 5 ms timer fires on the UI thread (the event loop's stalls)."""

    def __init__(self, running: Callable[[], list[str]], trace: Any = None) -> None:
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self._tick)
        self.lateness_ms: list[float] = []
        self.worst: tuple[float, float, list[str]] = (0.0, 0.0, [])
        self.stalls: list[dict[str, Any]] = []  # every tick later than the target
        self.gc_pauses: list[dict[str, Any]] = []
        self._gc_start = 0.0
        self._running = running
        self._last = 0.0
        self._last_cpu = 0.0
        self._start = 0.0
        self.timeline: list[dict[str, Any]] = []  # operations starting and ending, add stages
        self._ops: set[str] = set()
        self._trace = trace  # a file: every thread's stack when a tick is over the target late

    def _arm(self) -> None:
        # faulthandler's watchdog is a C thread that needs no GIL: when the UI thread is stalled
        # (waiting for the GIL or busy), it still dumps what every thread is doing.
        if self._trace is not None:
            faulthandler.dump_traceback_later(TRACE_EVERY_S, repeat=True, file=self._trace)

    def start(self) -> None:
        self._start = self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        gc.callbacks.append(self._gc)
        self.timer.start()
        self._arm()

    def stop(self) -> None:
        self.timer.stop()
        if self._trace is not None:
            faulthandler.cancel_dump_traceback_later()
        gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        # A collection holds the GIL: any thread's allocations can stall the UI this way.
        now = time.perf_counter()
        if phase == "start":
            self._gc_start = now
        elif (ms := (now - self._gc_start) * 1000) > 10:
            self.gc_pauses.append(
                {"at_s": round(now - self._start, 2), "ms": round(ms, 1), "gen": info["generation"]}
            )

    def mark(self, what: str) -> None:
        """Note an event (an add stage) in the timeline, to place the stalls."""
        if not self.timeline or self.timeline[-1].get("event") != what:
            at = round(time.perf_counter() - self._start, 2)
            self.timeline.append({"at_s": at, "event": what})

    def _tick(self) -> None:
        self._arm()
        now = time.perf_counter()
        late = max(0.0, (now - self._last) * 1000 - INTERVAL_MS)
        self._last = now
        cpu = time.thread_time()
        ui_cpu_ms, self._last_cpu = (cpu - self._last_cpu) * 1000, cpu
        running = self._running()
        self.lateness_ms.append(late)
        if late > TARGET_MS:
            at = now - self._start
            self.stalls.append(
                {
                    "at_s": round(at, 2),
                    "ms": round(late, 1),
                    "ui_cpu_ms": round(ui_cpu_ms, 1),  # ~ms: the UI thread was busy itself
                    "end_monotonic": round(time.monotonic(), 4),  # to match `perf sched` traces
                    "while": running,
                }
            )
        if late > self.worst[0]:
            self.worst = (late, now - self._start, running)
        if (ops := {x for x in running if x.startswith(("Adding", "Research"))}) != self._ops:
            at = round(now - self._start, 2)
            self.timeline += [{"at_s": at, "start": x} for x in sorted(ops - self._ops)]
            self.timeline += [{"at_s": at, "end": x} for x in sorted(self._ops - ops)]
            self._ops = ops


def run_until(pred: Callable[[], bool], timeout_s: float) -> bool:
    """Run a real event loop until ``pred()`` holds (checked every 20 ms) or the timeout."""
    loop = QEventLoop()
    poll = QTimer()
    poll.setInterval(20)
    deadline = time.monotonic() + timeout_s

    def check() -> None:
        if pred() or time.monotonic() > deadline:
            loop.quit()

    poll.timeout.connect(check)
    poll.start()
    loop.exec()
    poll.stop()
    return pred()


def make_pdf(path: Path, pages: int, sentences_per_page: int = 24) -> None:
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=612, height=792)
        text = " ".join(
            f"Sentence {k} on page {n + 1} reviews port traffic, dredging budgets and the rail "
            f"link, with {1000 + 37 * k + n} containers counted in week {k % 52 + 1}."
            for k in range(sentences_per_page)
        )
        page.insert_textbox(pymupdf.Rect(60, 60, 552, 740), text, fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()


def make_harbor(path: Path) -> None:
    doc = pymupdf.open()
    for fact in FACTS:
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 72), "Northport Harbor Report", fontsize=16, fontname="hebo")
        page.insert_textbox(pymupdf.Rect(72, 100, 540, 400), fact, fontsize=11, fontname="helv")
    doc.set_metadata({"title": "Northport Harbor Report"})
    doc.save(path)
    doc.close()


def script(planner: ScriptedLLM, researcher: ScriptedLLM, writer: ScriptedLLM, ev: str) -> None:
    planner.enqueue(
        [
            {
                "task_analysis": "Find the 2019 ship count.",
                "answer_shape": "brief_answer",
                "components": [],
                "constraints": [],
                "queries": [{"id": "q1", "query": QUESTION, "purpose": "", "depends_on": []}],
            }
        ]
    )
    researcher.enqueue(
        [
            {"thought": "read it", "action": "fetch_evidence", "query": "", "evidence_id": ev},
            {"thought": "done", "action": "finish", "query": ""},
            {
                "findings": [{"claim": "4,200 ships in 2019.", "evidence_ids": [ev]}],
                "gaps": [],
                "sufficient": True,
            },
        ]
    )
    # the short cited answer (research.short_answer, on by default), then the report body
    writer.enqueue(
        [
            {
                "steps": [],
                "calculation": "",
                "answer": "4,200 ships",
                "labels": ["E1"],
                "answered": True,
            },
            ANSWER,
        ]
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(
    pages: int, runtime: str, token_delay: float, work: Path, trace: Any = None
) -> dict[str, Any]:
    errors: list[BaseException] = []
    desktop.errors.error_hook = lambda _parent, exc: errors.append(exc)
    planner, researcher = ScriptedLLM(name="planner"), ScriptedLLM(name="researcher")
    writer = ScriptedLLM(name="writer", token_delay_s=token_delay)
    llms = {"planner": planner, "researcher": researcher, "writer": writer, "default": planner}
    service = Sourcebook(work / "home", llms=llms)
    settings = service.settings.model_copy(deep=True)
    settings.ui.first_run_done = True
    settings.models.embedder_runtime = runtime  # type: ignore[assignment]
    service.save_settings(settings)
    app = create_application()
    window = build_window(service)
    window.resize(1400, 860)
    window.show()

    # Warm-up (not measured): open the library, load the embedder, add the research library.
    harbor = work / "harbor.pdf"
    make_harbor(harbor)
    t0 = time.perf_counter()
    handle = window.library_panel.add_paths([harbor])
    assert handle is not None
    if not run_until(lambda: handle.done, 600):
        raise SystemExit("warm-up add did not finish")
    run_until(lambda: not window.ops.running, 120)  # the refresh after the add, then idle
    warmup_s = time.perf_counter() - t0
    doc = next(d for d in service.documents() if d.title == "Northport Harbor Report")
    ev = next(
        p.passage_id
        for p in service.library.store.get_document_passages(doc.doc_id)
        if "4,200" in p.text
    )
    script(planner, researcher, writer, ev)
    big = work / "big.pdf"
    make_pdf(big, pages)

    # Measured: the large add and the research run, with a user searching and viewing.
    reports: list[Report] = []
    window.research_panel.report_ready.connect(reports.append)
    monitor = StallMonitor(lambda: [h.label for h in window.ops.running], trace)
    user = QTimer()
    user.setInterval(1000)
    clicks = [0]

    def act_like_a_user() -> None:
        clicks[0] += 1
        panel = window.library_panel
        panel.search_box.setText(
            ["ships 2019", "dredging budget", "containers week"][clicks[0] % 3]
        )
        panel.run_search()
        window.show_evidence(ev)

    user.timeout.connect(act_like_a_user)
    monitor.start()
    user.start()
    started = time.perf_counter()
    add = window.library_panel.add_paths([big])
    assert add is not None
    add.progressed.connect(lambda p: monitor.mark(f"add: {getattr(p, 'stage', p)}"))
    add.finished.connect(lambda: monitor.mark("add: finished"))
    window.research_panel.report_ready.connect(lambda _r: monitor.mark("report ready"))
    window.research_panel.question.setPlainText(QUESTION)
    window.research_panel.start()
    finished = run_until(lambda: add.done and bool(reports), 1800)
    elapsed = time.perf_counter() - started
    user.stop()
    monitor.stop()
    add_ok = any(d.source_uri == str(big) for d in service.documents())
    window.close()
    shutdown_operations(window.ops)
    desktop.errors.error_hook = None
    del app
    late = monitor.lateness_ms
    _worst, at_s, running = monitor.worst
    return {
        "pages": pages,
        "embedder_runtime": runtime,
        "writer_token_delay_s": token_delay,
        "warmup_s": round(warmup_s, 2),
        "measured_s": round(elapsed, 2),
        "finished": finished,
        "big_pdf_added": add_ok,
        "report_status": reports[0].status if reports else None,
        "user_actions": clicks[0],
        "ticks": len(late),
        "lateness_ms": {
            "p50": round(pct(late, 0.50), 2),
            "p95": round(pct(late, 0.95), 2),
            "p99": round(pct(late, 0.99), 2),
            "max": round(max(late, default=0.0), 2),
            "mean": round(statistics.fmean(late), 2) if late else 0.0,
        },
        "stalls_over_50ms": sum(1 for x in late if x > TARGET_MS),
        "stalls": monitor.stalls[:100],
        "timeline": monitor.timeline,
        "gc_pauses_over_10ms": monitor.gc_pauses[:20],
        "gc_frozen_objects": gc.get_freeze_count(),
        "worst_at_s": round(at_s, 2),
        "worst_while": running,
        "target_max_ms": TARGET_MS,
        "meets_target": max(late, default=0.0) < TARGET_MS,
        "errors": [f"{type(e).__name__}: {e}" for e in errors],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=300, help="Pages of the large PDF.")
    ap.add_argument(
        "--runtime", choices=["torch", "onnx", "onnx-int8"], default="onnx-int8", help="Embedder."
    )
    ap.add_argument("--token-delay", type=float, default=0.02, help="Writer seconds per token.")
    ap.add_argument(
        "--trace-stalls",
        type=Path,
        help="Write every thread's Python stack to this file whenever the UI is stalled.",
    )
    args = ap.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        trace = stack.enter_context(args.trace_stalls.open("w")) if args.trace_stalls else None
        result = run(args.pages, args.runtime, args.token_delay, Path(tmp), trace)
    result["machine_cores"] = os.cpu_count()
    result["load_average_before"] = load_before  # other work on the machine skews stalls
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(result, indent=2))
    lat = result["lateness_ms"]
    print(
        f"\n{result['pages']}-page add + research run, {result['measured_s']} s: event-loop "
        f"lateness p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms, "
        f"max {lat['max']} ms ({result['stalls_over_50ms']} stalls > 50 ms; target max < 50 ms)"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    dest = RESULTS / "ui_stall.json"
    dest.write_text(json.dumps(result, indent=2))
    print(f"saved {dest}")


if __name__ == "__main__":
    main()
