"""How well the support check tells supported claims from unsupported ones, on synthetic cases.

Invented people, places and works (no benchmark text): each case has two or three passages, a
question whose answer needs them joined (two hops, as most research questions do), its right
answer and a wrong one that a distractor passage makes tempting; plus single-passage claims
about an encyclopedia-like passage, right or wrong (another place, year or person of it). Each
claim is judged the way a run judges it (``core.research.support``, the real prompt, the real
model through ``LLM.choose``), and the script reports, per way of stating an answer line, the
mean p(yes) of right and wrong claims, the share of pairs where the right one scores higher
(AUC), and accuracy at the floor.

With ``--calibrate`` it instead picks each kind's floor (answer lines, single claims) on one
seed's cases, the floor with the best balance of right answers kept and wrong ones flagged
(Youden's J), and reports how that floor does on a second seed's cases (held out); the floors
of ``core.research.support`` were read from this run.

Saves ``bench/results/support_judge.json`` (``--calibrate``: ``support_calibration.json``).
Usage (nothing else running):
    .venv/bin/python bench/support_judge.py [--model 1.5b|0.5b] [--cases N] [--calibrate]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.research import support
from core.research.prompts import fit_messages
from models.llamacpp import LlamaCppLLM
from models.starter import STARTER_DEFAULT, STARTER_FAST, ensure_starter

RESULTS = Path(__file__).resolve().parent / "results" / "support_judge.json"
CALIBRATION = RESULTS.with_name("support_calibration.json")
SYL = ["ka", "ren", "dal", "mo", "vi", "tor", "sel", "an", "bru", "lis", "ou", "nek", "fa", "ris"]


def name(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(SYL) for _ in range(parts)).capitalize()


def two_hop(rng: random.Random) -> dict[str, Any]:
    """One of a few chain shapes: (passages, question, right answer, wrong answer)."""
    a, b = name(rng), name(rng)
    kind = rng.randrange(4)
    if kind == 0:
        river, falls, falls2 = f"{name(rng)} River", f"{name(rng)} Falls", f"{name(rng)} Falls"
        passages = [
            f"The {river} rises in the hills of {a} and flows south through {a} to the sea.",
            f"{falls} is the largest waterfall of {a}, on its eastern border.",
            f"{falls2} is a waterfall in {b}, popular with visitors.",
        ]
        return {
            "passages": passages,
            "question": f"What is the largest waterfall in the country the {river} flows through?",
            "right": falls,
            "wrong": falls2,
        }
    if kind == 1:
        person, town, town2 = f"{name(rng)} {name(rng, 3)}", name(rng), name(rng)
        river, river2 = f"the {name(rng)}", f"the {name(rng)}"
        passages = [
            f"{person} was born in {town} in {rng.randint(1900, 1990)} and became a painter.",
            f"{town} is a market town on the banks of {river}.",
            f"{town2} lies on {river2}, further north.",
        ]
        return {
            "passages": passages,
            "question": f"Which river flows through the birthplace of {person}?",
            "right": river.removeprefix("the "),
            "wrong": river2.removeprefix("the "),
        }
    if kind == 2:
        firm, founder, other = f"{name(rng)} Works", f"{name(rng)} {name(rng)}", name(rng)
        school, school2 = f"the University of {a}", f"the University of {b}"
        passages = [
            f"{firm} was founded in {rng.randint(1950, 2010)} by {founder}.",
            f"{founder} studied engineering at {school} before moving abroad.",
            f"{other} {name(rng)} taught at {school2} for twenty years.",
        ]
        return {
            "passages": passages,
            "question": f"Where did the founder of {firm} study?",
            "right": school.removeprefix("the "),
            "wrong": school2.removeprefix("the "),
        }
    book, author, author2 = f"The {name(rng)} Garden", f"{name(rng)} {name(rng)}", name(rng)
    y1, y2 = rng.randint(1850, 1950), rng.randint(1850, 1950)
    passages = [
        f"{book} is a novel written by {author} and first published in {y1 + 40}.",
        f"{author} was born in {y1} in a fishing village.",
        f"{author2} {name(rng)}, another novelist, was born in {y2}.",
    ]
    return {
        "passages": passages,
        "question": f"In what year was the author of {book} born?",
        "right": str(y1),
        "wrong": str(y2) if y2 != y1 else str(y1 + 3),
    }


def one_hop(rng: random.Random) -> dict[str, Any]:
    """A passage written like an encyclopedia entry (six sentences, several people, places and
    years, as a run's passages are) and a claim about it, right or wrong in one of three ways:
    another place, another year, another person of the same passage."""
    first, last = name(rng), name(rng, 3)
    person, teacher = f"{first} {last}", f"{name(rng)} {name(rng)}"
    town, city, seat = name(rng), name(rng), name(rng)
    work = f"The {name(rng)} Suite"
    born = rng.randint(1850, 1960)
    moved = born + rng.randint(18, 30)
    died = moved + rng.randint(20, 40)
    passage = " ".join(
        [
            f"{person} ({born}-{died}) was a composer and organist.",
            f"Born in {town}, {first} studied with {teacher} in {city}.",
            f"In {moved} {last} moved to {seat}, where he led the cathedral choir.",
            f"His best-known work, {work}, was first performed in {city} in {moved + 3}.",
            f"{teacher} later taught at the conservatory of {seat}.",
            f"{last} died in {seat} in {died}.",
        ]
    )
    right, wrong = [
        (f"{person} was born in {town}.", f"{person} was born in {city}."),
        (f"{person} moved to {seat} in {moved}.", f"{person} moved to {seat} in {moved + 3}."),
        (f"{work} was written by {person}.", f"{work} was written by {teacher}."),
    ][rng.randrange(3)]
    return {"passages": [passage], "right_claim": right, "wrong_claim": wrong}


def _block(passages: list[str]) -> str:
    """The passages as a run shows them: numbered, each under a title (its first two words)."""
    return "\n\n".join(
        f"[{i}] {' '.join(p.split()[:2])}\n{p}" for i, p in enumerate(passages, start=1)
    )


def judge(llm: LlamaCppLLM, passages: list[str], claim: str) -> float:
    msgs = fit_messages(llm, "support", {"passages": _block(passages), "claim": claim}, {}, 1)
    return llm.choose(msgs, support.OPTIONS).probabilities["yes"]


def judge_answer(llm: LlamaCppLLM, passages: list[str], question: str, answer: str) -> float:
    values = {"passages": _block(passages), "question": question, "answer": answer}
    msgs = fit_messages(llm, "support_answer", values, {}, 1)
    return llm.choose(msgs, support.OPTIONS).probabilities["yes"]


def auc(right: list[float], wrong: list[float]) -> float:
    pairs = [(r > w) + 0.5 * (r == w) for r in right for w in wrong]
    return sum(pairs) / len(pairs)


def as_claim(llm: LlamaCppLLM, passages: list[str], question: str, answer: str) -> float:
    """The answer line as the run states it to the claim prompt."""
    line = f"**Answer:** {answer}."
    return judge(llm, passages, support.claim_for(line, line, question, "**Answer:**"))


FORMATS: dict[str, Callable[[LlamaCppLLM, list[str], str, str], float]] = {
    "claim_prompt": as_claim,
    "answer_prompt": judge_answer,
}


def starter_llm(model: str, n_ctx: int) -> tuple[LlamaCppLLM, str]:
    """The 1.5B (``model`` "1.5b") or 0.5B starter loaded as the judging benches load it, and
    its name."""
    from core.settings import models_cache_dir

    starter = STARTER_DEFAULT if model == "1.5b" else STARTER_FAST
    path = ensure_starter(starter, models_cache_dir())
    return LlamaCppLLM(path, n_ctx=n_ctx, n_threads=2, seed=1), starter.name


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["1.5b", "0.5b"], default="1.5b")
    p.add_argument("--cases", type=int, default=24)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--calibrate", action="store_true", help="fit floors on --seed, test on +1")
    args = p.parse_args()
    llm, model = starter_llm(args.model, 4096)
    if args.calibrate:
        return calibrate(llm, model, args.cases, args.seed)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"model": model, "cases": args.cases, "formats": {}}
    started = time.monotonic()
    chains = [two_hop(rng) for _ in range(args.cases)]
    for fmt, claim_of in FORMATS.items():
        right = [claim_of(llm, c["passages"], c["question"], c["right"]) for c in chains]
        wrong = [claim_of(llm, c["passages"], c["question"], c["wrong"]) for c in chains]
        out["formats"][fmt] = summary(right, wrong, support.ANSWER_FLOOR)
    singles = [one_hop(rng) for _ in range(args.cases)]
    right = [judge(llm, c["passages"], c["right_claim"]) for c in singles]
    wrong = [judge(llm, c["passages"], c["wrong_claim"]) for c in singles]
    out["single_claims"] = summary(right, wrong, support.SUPPORT_FLOOR)
    out["seconds"] = round(time.monotonic() - started, 1)
    llm.close()
    for k, v in [*out["formats"].items(), ("single_claims", out["single_claims"])]:
        print(f"{k:24s} " + ", ".join(f"{n} {x}" for n, x in v.items() if not n.startswith("p_")))
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS} ({out['seconds']} s)")
    return 0


def scores(llm: LlamaCppLLM, seed: int, cases: int) -> dict[str, tuple[list[float], list[float]]]:
    """p(yes) of right and wrong claims per kind, on one seed's synthetic cases."""
    rng = random.Random(seed)
    chains = [two_hop(rng) for _ in range(cases)]
    singles = [one_hop(rng) for _ in range(cases)]
    return {
        "answer_line": (
            [judge_answer(llm, c["passages"], c["question"], c["right"]) for c in chains],
            [judge_answer(llm, c["passages"], c["question"], c["wrong"]) for c in chains],
        ),
        "single_claim": (
            [judge(llm, c["passages"], c["right_claim"]) for c in singles],
            [judge(llm, c["passages"], c["wrong_claim"]) for c in singles],
        ),
    }


def best_floor(right: list[float], wrong: list[float]) -> float:
    """The floor (a midpoint between observed scores) maximising right kept + wrong flagged."""
    xs = sorted(set(right + wrong))
    cands = [(a + b) / 2 for a, b in itertools.pairwise(xs)] or xs

    def j(f: float) -> float:
        return sum(r >= f for r in right) / len(right) + sum(w < f for w in wrong) / len(wrong)

    return max(cands, key=lambda f: (j(f), -abs(f - 0.5)))


def calibrate(llm: LlamaCppLLM, model: str, cases: int, seed: int) -> int:
    started = time.monotonic()
    fit, held = scores(llm, seed, cases), scores(llm, seed + 1, cases)
    out: dict[str, Any] = {"model": model, "cases": cases, "fit_seed": seed, "kinds": {}}
    for kind, (right, wrong) in fit.items():
        floor = round(best_floor(right, wrong), 3)
        out["kinds"][kind] = {
            "floor": floor,
            "fit": summary(right, wrong, floor),
            "held_out": summary(*held[kind], floor),
        }
        h = out["kinds"][kind]["held_out"]
        print(
            f"{kind:13s} floor {floor}: held out right kept {h['right_kept']}, "
            f"wrong flagged {h['wrong_flagged']}, AUC {h['auc']}"
        )
    out["seconds"] = round(time.monotonic() - started, 1)
    llm.close()
    CALIBRATION.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {CALIBRATION} ({out['seconds']} s)")
    return 0


def summary(right: list[float], wrong: list[float], floor: float) -> dict[str, float]:
    return {
        "mean_yes_right": round(statistics.mean(right), 3),
        "mean_yes_wrong": round(statistics.mean(wrong), 3),
        "auc": round(auc(right, wrong), 3),
        "accuracy_at_floor": round(
            (sum(r >= floor for r in right) + sum(w < floor for w in wrong))
            / (len(right) + len(wrong)),
            3,
        ),
        "right_kept": round(sum(r >= floor for r in right) / len(right), 3),
        "wrong_flagged": round(sum(w < floor for w in wrong) / len(wrong), 3),
        "p_yes_right": [round(r, 3) for r in right],
        "p_yes_wrong": [round(w, 3) for w in wrong],
    }


if __name__ == "__main__":
    raise SystemExit(main())
