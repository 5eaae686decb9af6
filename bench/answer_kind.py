"""How well the answer-kind check tells an answer of the kind asked from one of another kind.

Invented names (no benchmark text), and for one shape well-known cities: each case is a two-hop
question of one of a few shapes ("Who founded the company that makes X?", "How many people live
in the capital of Y?"), an answer of the kind it asks for (a person, a number) and one of
another kind, the kind a small model tends to give instead: the thing the question's first hop
names (the company), a figure from the passages where a name is asked for, a name where a
figure is, the place a first hop found where an amount of that place is asked for (the bridge;
``bridge_known``: a real city, which the model reads as the amount more often). Each answer is
judged the way a run judges it (``core.research.support.kind_flag``, the real prompt, the real model
through ``LLM.choose``); the script reports mean p(yes) for both, the share of pairs where the
right kind scores higher (AUC), how many of each the floor (``support.KIND_FLOOR``) flags, per
shape and overall, and the time per judgement.

Saves ``bench/results/answer_kind.json``.
Usage (nothing else running):
    .venv/bin/python bench/answer_kind.py [--model 1.5b|0.5b] [--cases N] [--seed S]
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

RESULTS = Path(__file__).resolve().parent / "results" / "answer_kind.json"
MARK = "**Answer:**"

Case = tuple[str, str, str]  # question, an answer of the kind asked, one of another kind


def _who(rng: random.Random) -> Case:
    org = rng.choice(["company", "society", "club", "publisher"])
    made = {"company": "makes", "society": "awards", "club": "runs", "publisher": "prints"}[org]
    thing = f"the {name(rng)} {rng.choice(['Prize', 'Review', 'Cup', 'Series'])}"
    return (
        f"Who founded the {org} that {made} {thing}?",
        f"{name(rng)} {name(rng, 3)}",
        f"the {name(rng)} {org.capitalize()}",
    )


def _where(rng: random.Random) -> Case:
    return (
        f"In which city was the author of The {name(rng)} Tower born?",
        name(rng, 3),
        str(rng.randint(1850, 1990)),
    )


def _when(rng: random.Random) -> Case:
    return (
        f"When was the bridge over the river that flows past {name(rng)} opened?",
        f"{rng.randint(1, 28)} May {rng.randint(1850, 1990)}",
        f"the {name(rng)} River",
    )


def _count(rng: random.Random) -> Case:
    return (
        f"How many people live in the capital of the province where {name(rng)} lies?",
        f"about {rng.randint(10, 900)},000",
        name(rng, 3),
    )


def _what(rng: random.Random) -> Case:
    thing, right = rng.choice(
        [
            ("language is spoken", f"{name(rng)}ian"),
            ("dish is eaten", f"{name(rng)} stew"),
            ("instrument did the founder play", "the cello"),
        ]
    )
    return (
        f"What {thing} in the region where the {name(rng)} Quartet was formed?",
        right,
        rng.choice([f"{rng.randint(2, 60)}.{rng.randint(0, 9)}%", f"{name(rng)} {name(rng, 3)}"]),
    )


def _figure(rng: random.Random) -> Case:
    return (
        f"What was the FY{rng.randint(2015, 2023)} operating margin of {name(rng)} Corp?",
        f"{rng.randint(2, 40)}.{rng.randint(0, 9)}%",
        f"{name(rng)} Holdings",
    )


def _bridge(rng: random.Random) -> Case:
    """An amount asked of the place a first hop finds, answered with that place (the bridge)."""
    amount, right = rng.choice(
        [
            ("usual yearly rainfall", f"{rng.randint(12, 80)} inches"),
            ("average January temperature", f"{rng.randint(-8, 12)} °C"),
            ("population", f"{rng.randint(2, 900)},{rng.randint(100, 999)}"),
        ]
    )
    return (
        f"What is the {amount} in the town where the {name(rng)} Quartet was formed?",
        right,
        name(rng, 3),
    )


_KNOWN = ["Oslo", "Lyon", "Denver", "Osaka", "Porto", "Leeds", "Boston", "Munich", "Quito"]


def _bridge_known(rng: random.Random) -> Case:
    """:func:`_bridge` with a well-known city as the bridge: what a model knows of a real
    place pulls it towards reading the place as the amount."""
    q, right, _ = _bridge(rng)
    return q.replace("town", "city"), right, rng.choice(_KNOWN)


SHAPES: dict[str, Callable[[random.Random], Case]] = {
    "who": _who,
    "where": _where,
    "when": _when,
    "how_many": _count,
    "which_thing": _what,
    "figure": _figure,
    "bridge": _bridge,
    "bridge_known": _bridge_known,
}


def judge(llm: LlamaCppLLM, question: str, answer: str) -> float:
    def messages(shown: str) -> Any:
        return fit_messages(llm, "answer_kind", {"question": question, "answer": shown}, {}, 1)

    line = f"{MARK} {answer} [ev1:0000000000000001]."
    _flag, p = support.kind_flag(
        line, MARK, lambda _k, msgs: llm.choose(msgs, support.KIND_OPTIONS), messages
    )
    return p


def summary(right: list[float], wrong: list[float]) -> dict[str, Any]:
    floor = support.KIND_FLOOR
    return {
        "n": len(right),
        "mean_p_yes_right_kind": round(statistics.fmean(right), 3),
        "mean_p_yes_other_kind": round(statistics.fmean(wrong), 3),
        "auc": round(auc(right, wrong), 3),
        "right_kind_flagged": sum(p < floor for p in right),
        "other_kind_flagged": sum(p < floor for p in wrong),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["1.5b", "0.5b"], default="1.5b")
    p.add_argument("--cases", type=int, default=6, help="cases per question shape")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()
    llm, model = starter_llm(args.model, 2048)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"model": model, "floor": support.KIND_FLOOR, "shapes": {}}
    all_right: list[float] = []
    all_wrong: list[float] = []
    started = time.monotonic()
    for shape, make in SHAPES.items():
        cases = [make(rng) for _ in range(args.cases)]
        right = [judge(llm, q, a) for q, a, _ in cases]
        wrong = [judge(llm, q, b) for q, _, b in cases]
        out["shapes"][shape] = summary(right, wrong)
        all_right += right
        all_wrong += wrong
    seconds = time.monotonic() - started
    out["all"] = summary(all_right, all_wrong)
    out["seconds_per_judgement"] = round(seconds / (2 * len(all_right)), 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
