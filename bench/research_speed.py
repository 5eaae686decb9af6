"""Where a research run's time goes, and what each speed lever buys.

Reads the runs of a ``sourcebook eval --out RESULT.json`` series from its library's task log,
where every stage and every model call is a timed span with its prompt and generated tokens.
Per question: seconds per stage, and per role (planner, researcher, writer, support, ...) the
calls, prompt tokens, generated tokens and seconds. Over the questions: the median and p90 of
the time per question, each role's share, and the series' quality and trust figures beside
them (from the result file), so a lever that is faster but worse shows as such. A role's
seconds are its calls' wall time, waiting included: a run's workers share one model and queue
on it, so the roles' seconds add up to more than the run's; the tokens are what each role cost.

Nothing is run here: a lever is measured as an eval series run with it set, on a quiet machine
(no other eval, test or build beside it), for example::

    SOURCEBOOK_RESEARCH__TOOL_LOOP=true .venv/bin/sourcebook eval QUESTIONS --corpus C \\
        --library L --tag loop --out /tmp/loop.json --shareable
    .venv/bin/python bench/research_speed.py --set musique /tmp/loop.json L --lever tool_loop_on

Saves ``bench/results/research_speed.json``: the figures of the default settings (lever
``default``) as top-level ``musique`` / ``financebench`` objects (``median_s``, ``p90_s``) and
``ask`` (``p50_s`` and ``p90_s``: the slower of its ``musique`` and ``financebench`` objects,
from the sets ``ask`` and ``ask_financebench``), and every series under ``levers[LABEL][SET]``.
Entries of earlier invocations are kept, replaced only by a new one of the same set and label.
Question ids and figures only: nothing of the benchmark's text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.tasks import TaskLog, TaskSpan  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "research_speed.json"
ASK_SETS = {"ask": "musique", "ask_financebench": "financebench"}  # set -> its dev set
SETS = ("musique", "financebench", *ASK_SETS)
QUALITY = (
    "f1_first",
    "fetched_recall",
    "citation_precision",
    "citation_recall",
    "numeric_match",
    "page_accuracy",
    "invalid_citations",
)
TRUST = ("asserted", "abstained", "confidently_wrong", "selective_accuracy", "claim_support_rate")


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation between the sorted values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def role_of(span: TaskSpan) -> str:
    """A model span is named ``ROLE/KEY``; the support check's calls are the writer's model
    under keys beginning ``support``, counted apart (they read, they do not write)."""
    role, _, key = span.name.partition("/")
    parts = key.split("/")
    if any(p.startswith("support") for p in parts):
        return "support"
    if role == "researcher" and parts[-1] == "notes":
        return "researcher notes"
    return role


def question_figures(spans: list[TaskSpan]) -> dict[str, Any]:
    stages: dict[str, float] = defaultdict(float)
    roles: dict[str, dict[str, float]] = {}
    for s in spans:
        if s.kind == "stage":
            stages[s.name] += s.seconds
        elif s.kind == "model":
            row = roles.setdefault(
                role_of(s), {"calls": 0, "prompt_tokens": 0, "generated_tokens": 0, "seconds": 0.0}
            )
            row["calls"] += 1
            row["prompt_tokens"] += s.prompt_tokens or 0
            row["generated_tokens"] += s.completion_tokens or 0
            row["seconds"] += s.seconds
    return {
        "seconds": round(sum(stages.values()), 1),
        "stages": {k: round(v, 1) for k, v in stages.items()},
        "roles": {k: {**v, "seconds": round(v["seconds"], 1)} for k, v in sorted(roles.items())},
    }


def series_figures(result: dict[str, Any], log: TaskLog, name: str) -> dict[str, Any]:
    """The speed figures of one eval series (its questions' spans) with its quality beside."""
    questions = []
    for q in result.get("questions", []):
        if q.get("replayed_from"):
            raise SystemExit(
                f"{q['qid']} was replayed from another series: its research was not timed here. "
                "Measure a series run afresh (no --replay)."
            )
        spans = log.spans(q["task"])
        if not spans:
            print(f"  {q['qid']}: no spans in this library's task log; skipped", file=sys.stderr)
            continue
        questions.append({"qid": q["qid"], **question_figures(spans)})
    times = [q["seconds"] for q in questions]
    totals: dict[str, dict[str, float]] = {}
    for q in questions:
        for role, row in q["roles"].items():
            acc = totals.setdefault(role, defaultdict(float))
            for k, v in row.items():
                acc[k] += v
    n = max(len(questions), 1)
    summary = result.get("summary", {})
    trust = summary.get("trust", {})

    def rounded(x: float | None) -> float | None:
        return None if x is None else round(x, 1)

    return {
        "questions": len(questions),
        "median_s": rounded(statistics.median(times) if times else None),
        "p50_s": rounded(statistics.median(times) if times else None),
        "p90_s": rounded(percentile(times, 0.9)),
        "mean_s": rounded(statistics.fmean(times) if times else None),
        "per_question_by_role": {
            role: {k: round(v / n, 1) for k, v in row.items()} for role, row in totals.items()
        },
        "quality": {k: summary.get(k) for k in QUALITY} | {k: trust.get(k) for k in TRUST},
        "statuses": summary.get("statuses"),
        "per_question": questions,
    }


def print_series(label: str, name: str, fig: dict[str, Any]) -> None:
    print(
        f"{name} [{label}]: {fig['questions']} questions, median {fig['median_s']} s, "
        f"p90 {fig['p90_s']} s, mean {fig['mean_s']} s"
    )
    print(f"  {'role':<18} {'calls':>6} {'prompt tok':>11} {'gen tok':>8} {'seconds':>8}  (per q)")
    for role, row in sorted(fig["per_question_by_role"].items(), key=lambda r: -r[1]["seconds"]):
        print(
            f"  {role:<18} {row['calls']:>6} {row['prompt_tokens']:>11} "
            f"{row['generated_tokens']:>8} {row['seconds']:>8}"
        )
    print("  quality: " + ", ".join(f"{k} {v}" for k, v in fig["quality"].items() if v is not None))


def merge(saved: dict[str, Any], label: str, name: str, fig: dict[str, Any]) -> dict[str, Any]:
    saved.setdefault("levers", {}).setdefault(label, {})[name] = fig
    if label != "default":
        return saved
    if name in ASK_SETS:
        # Ask's target holds on both dev sets or not at all: the top figures are the slower set's.
        ask = saved.setdefault("ask", {})
        ask[ASK_SETS[name]] = {k: fig[k] for k in ("questions", "p50_s", "p90_s")}
        parts = [ask[d] for d in ASK_SETS.values() if d in ask]
        ask["questions"] = sum(p["questions"] for p in parts)
        ask["p50_s"] = max(p["p50_s"] for p in parts)
        ask["p90_s"] = max(p["p90_s"] for p in parts)
    else:
        saved[name] = {k: fig[k] for k in ("questions", "median_s", "p90_s", "mean_s")}
    return saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--set",
        nargs=3,
        action="append",
        required=True,
        metavar=("NAME", "RESULT", "LIBRARY"),
        help=f"A series: its set ({', '.join(SETS)}), its `eval --out` file, its library home.",
    )
    ap.add_argument("--lever", default="default", help="What these series were run with.")
    ap.add_argument("--note", default="", help="How and where they were measured.")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    saved = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    for name, result_path, library in args.set:
        if name not in SETS:
            ap.error(f"unknown set {name!r}: one of {', '.join(SETS)}")
        result = json.loads(Path(result_path).read_text(encoding="utf-8"))
        dataset = result.get("summary", {}).get("dataset")
        if dataset != ASK_SETS.get(name, name):
            ap.error(f"{result_path} is a {dataset} series, not one for the set {name!r}")
        log = TaskLog(Path(library) / "tasks.sqlite")
        try:
            fig = series_figures(result, log, name)
        finally:
            log.close()
        if args.note:
            fig["note"] = args.note
        print_series(args.lever, name, fig)
        saved = merge(saved, args.lever, name, fig)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
