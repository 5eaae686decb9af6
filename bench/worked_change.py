"""How well the change check tells a question that asks for the change of a figure between
periods from one that asks for something else.

An answer worked out as a relative change, ``(a - b) / b * 100``, is flagged when the model,
reading the question (``asks_change.jinja``, ``core.research.support.change_flag``), does not
take it to ask for a change. Invented names and line items only (no benchmark text): questions
of a few shapes that ask for a change (how much an item grew or fell between two years, whether
it did) and of a few that ask for something else (a ratio of two items, a margin, a share, one
figure, a judgement). Each is asked the way a run asks it, the real prompt and the real model
through ``LLM.choose``; the script reports mean p(change) for both, the share of pairs where the
change question scores higher (AUC), how many of each the floor (``support.CHANGE_FLOOR``)
flags, per shape and overall, and the time per question.

Saves ``bench/results/worked_change.json``.
Usage (nothing else running):
    .venv/bin/python bench/worked_change.py [--model 1.5b|0.5b] [--cases N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support_judge import auc, name, starter_llm
from core.research import support
from core.research.prompts import fit_messages
from models.llamacpp import LlamaCppLLM

RESULTS = Path(__file__).resolve().parent / "results" / "worked_change.json"
LINE = "**Answer:** 12.5%, worked out as (9 - 8) / 8 * 100 = 12.5% [ev1:0000000000000001]."

ITEMS = (
    "net revenue",
    "operating income",
    "free cash flow",
    "total assets",
    "capital expenditure",
    "gross profit",
    "inventory",
    "long-term debt",
)


def _company(rng: random.Random) -> str:
    return f"{name(rng)} {rng.choice(['Corp', 'Holdings', 'Mills', 'Group'])}"


def _year(rng: random.Random) -> int:
    return rng.randint(2015, 2023)


Shape = Callable[[random.Random, str, str, int], str]  # rng, company, line item, year

CHANGE: dict[str, Shape] = {
    "grew_by": lambda r, c, i, y: f"By what percentage did {c}'s {i} grow from FY{y - 1} to FY{y}?",
    "year_over_year": lambda r, c, i, y: (
        f"What was the year-over-year change in {c}'s {i} in FY{y}?"
    ),
    "fell_by": lambda r, c, i, y: (
        f"How much did {c}'s {i} decline between FY{y - 2} and FY{y}, in percent?"
    ),
    "growth_rate": lambda r, c, i, y: (
        f"What is the FY{y - 1} to FY{y} growth rate of {c}'s {i}? Round to one decimal place."
    ),
    "whether": lambda r, c, i, y: f"Did {c}'s {i} increase or decrease from FY{y - 1} to FY{y}?",
}
OTHER: dict[str, Shape] = {
    "ratio": lambda r, c, i, y: (
        f"What was {c}'s current ratio at the end of FY{y}, current assets divided by current "
        "liabilities?"
    ),
    "margin": lambda r, c, i, y: f"What was {c}'s gross margin in FY{y}?",
    "share": lambda r, c, i, y: f"What is {c}'s FY{y} {i} as a percentage of revenue?",
    "one_figure": lambda r, c, i, y: f"What was {c}'s {i} in FY{y}? Answer in USD millions.",
    "turnover": lambda r, c, i, y: (
        f"What is {c}'s FY{y} inventory turnover ratio, cost of goods sold over average inventory?"
    ),
    "judgement": lambda r, c, i, y: f"Is {c} a capital-intensive business, judged by FY{y} data?",
}


def ask(llm: LlamaCppLLM, question: str) -> float:
    msgs = fit_messages(llm, "asks_change", {"question": question}, {}, 1)
    _flag, p = support.change_flag(LINE, lambda _k, m: llm.choose(m, support.CHANGE_OPTIONS), msgs)
    return p


def summary(change: list[float], other: list[float]) -> dict[str, Any]:
    floor = support.CHANGE_FLOOR
    out: dict[str, Any] = {}
    if change:
        out["mean_p_change_change"] = round(statistics.fmean(change), 3)
        out["min_p_change_change"] = round(min(change), 3)
        out["change_flagged"] = f"{sum(p < floor for p in change)} of {len(change)}"
    if other:
        out["mean_p_change_other"] = round(statistics.fmean(other), 3)
        out["max_p_change_other"] = round(max(other), 3)
        out["other_flagged"] = f"{sum(p < floor for p in other)} of {len(other)}"
    if change and other:
        out["auc"] = round(auc(change, other), 3)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["1.5b", "0.5b"], default="1.5b")
    p.add_argument("--cases", type=int, default=4, help="questions per shape")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    llm, model = starter_llm(args.model, 2048)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"model": model, "floor": support.CHANGE_FLOOR, "shapes": {}}
    scores: dict[str, list[float]] = {"change": [], "other": []}
    started = time.monotonic()
    for group, shapes in (("change", CHANGE), ("other", OTHER)):
        for shape, make in shapes.items():
            ps = [
                ask(llm, make(rng, _company(rng), rng.choice(ITEMS), _year(rng)))
                for _ in range(args.cases)
            ]
            out["shapes"][f"{group}/{shape}"] = summary(
                ps if group == "change" else [], ps if group == "other" else []
            )
            scores[group] += ps
    seconds = time.monotonic() - started
    out["all"] = summary(scores["change"], scores["other"])
    out["seconds_per_question"] = round(seconds / sum(len(v) for v in scores.values()), 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
