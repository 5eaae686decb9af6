"""Ablation of the research stages: each post-draft stage switched off in turn, on the same
research.

A base series (``sourcebook eval ... --tag BASE``) must have run in the library. For each stage
of :data:`core.research.pipeline.STAGES` (or those named with ``--stage``), this runs
``sourcebook eval --replay BASE --off STAGE --tag abl-<BASE>-<STAGE>``: the plans and research
are reused from the log, the writing and the checks run anew, so one stage costs the writer's
time per question, not the research's. A replay with nothing off (``none``) measures the noise
of running the writer again: a stage whose effect is within that noise has not shown it earns
its place. Reruns reuse finished replays (same tags).

With ``--replay-from citations`` the drafts are reused too (``--replay-from`` of ``sourcebook
eval``): every stage's code runs again on the logged model outputs and only the checks' model
calls run anew, seconds a question; ``short_answer`` and ``body`` are then left out (switching
either off changes what the writer writes, which only a replay from the writing measures).

Prints a table and saves ``bench/results/ablation_<dataset>.json`` (figures and question ids
only: nothing of the benchmark's text). Usage:

    .venv/bin/python bench/ablation.py QUESTIONS.jsonl --library L --base TAG \\
        [--corpus C | --docs D] [--own-docs] [--stage NAME ...] [--replay-from citations]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.research.pipeline import STAGES  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
WRITING_STAGES = ("short_answer", "body")  # measured only by a replay from the writing
FIGURES = (
    "f1_first",
    "citation_precision",
    "citation_recall",
    "numeric_match",
    "invalid_citations",
    "seconds_mean",
)
TRUST = ("asserted", "confidently_wrong", "selective_accuracy", "claim_support_rate")


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    out = {k: summary.get(k) for k in FIGURES}
    out.update({k: summary.get("trust", {}).get(k) for k in TRUST})
    out["statuses"] = summary.get("statuses")
    return out


def run_series(args: argparse.Namespace, stage: str, out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "core.cli",
        "eval",
        str(args.questions),
        "--library",
        str(args.library),
        "--tag",
        f"{'abl' if args.replay_from == 'writing' else 'ablc'}-{args.base}-{stage}",
        "--replay",
        args.base,
        "--replay-from",
        args.replay_from,
        "--quiet",
        "--shareable",
        "--out",
        str(out),
    ]
    if stage != "none":
        cmd += ["--off", stage]
    for flag in ("corpus", "docs"):
        if getattr(args, flag):
            cmd += [f"--{flag}", str(getattr(args, flag))]
    if args.own_docs:
        cmd.append("--own-docs")
    for qid in args.only:
        cmd += ["--only", qid]
    print(f"-- {stage}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, cwd=ROOT, check=False)
    if done.returncode not in (0, 1):  # 1: some citation was invalid, still a result
        raise SystemExit(f"eval for stage {stage} failed with exit code {done.returncode}")
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def save(args: argparse.Namespace, dataset: str, stages: list[str], rows: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.replay_from == "writing" else f"_from_{args.replay_from}"
    path = RESULTS / f"ablation_{dataset}{suffix}.json"
    saved = {
        "how": "bench/ablation.py: every stage off in turn, replaying series "
        f"'{args.base}' from its {args.replay_from} stage; 'none' replays it with every stage on "
        "(the noise of running that stage again)",
        "base": args.base,
        "replay_from": args.replay_from,
        "stages": {s: STAGES.get(s, "every stage on") for s in stages},
        "rows": rows,
    }
    path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
    return path


def table(rows: dict[str, Any]) -> None:
    base = rows["none"]
    print(f"{'stage off':20s} " + " ".join(f"{k[:12]:>12s}" for k in (*FIGURES, *TRUST)))
    for stage, row in rows.items():
        cells = []
        for k in (*FIGURES, *TRUST):
            v = row[k]
            if stage != "none" and isinstance(v, int | float) and isinstance(base[k], int | float):
                cells.append(f"{v - base[k]:+12.2f}")
            else:
                cells.append(f"{v:12.2f}" if isinstance(v, int | float) else f"{v!s:>12s}")
        print(f"{stage:20s} " + " ".join(cells))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("questions", type=Path)
    p.add_argument("--library", type=Path, required=True)
    p.add_argument("--base", required=True, help="The --tag of the series to replay.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", type=Path)
    src.add_argument("--docs", type=Path)
    p.add_argument("--own-docs", action="store_true")
    p.add_argument("--stage", action="append", default=[], choices=list(STAGES))
    p.add_argument("--only", action="append", default=[], help="Only this question id.")
    p.add_argument("--replay-from", choices=["writing", "citations"], default="writing")
    args = p.parse_args()
    stages = ["none", *(args.stage or STAGES)]
    if args.replay_from == "citations":
        stages = [s for s in stages if s not in WRITING_STAGES]
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for stage in stages:
            data = run_series(args, stage, Path(tmp) / f"{stage}.json")
            rows[stage] = {
                **figures(data["summary"]),
                "per_question": {
                    q["qid"]: {
                        "status": q["status"],
                        "f1_first": (q.get("answer") or {}).get("first_f1"),
                        "asserted": (q.get("trust") or {}).get("asserted"),
                        "right": (q.get("trust") or {}).get("right"),
                        "seconds": q["seconds"],
                    }
                    for q in data["questions"]
                },
            }
            path = save(args, data["summary"]["dataset"], stages, rows)  # a row at a time
    table(rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
