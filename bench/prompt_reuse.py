"""How much of each prompt a research run reads, and how much it continues from a kept state.

The 1.5B reads prompts at about 100 tokens a second on these 2 cores and writes at about 25,
and a run's prompts are long, so the tokens read set most of a run's time. The model keeps its
last context and, with ``models.prompt_cache_mb``, the states of earlier calls: a prompt that
begins as an earlier one did is read only from where they part. The task log records each
call's whole prompt, not what was read of it; this replays a series' logged model calls
(``sourcebook eval --tag T``) in the order each run made them, on one instance of the model with
the product's prompt cache, and counts the tokens llama.cpp evaluated for each prompt:

- the plan, the workers' notes, the short answer and the writer's prose (generated greedily,
  their schemas rebuilt from the ids and labels the prompts show),
- the support, answer-kind and change checks (one read each, no token generated).

Reported per kind of call: calls, prompt tokens, tokens read and the share continued from a
kept state, the tokens of passages shown whole that an earlier call of the same question had
shown already (a notes or writer prompt's; what showing each passage once a question could save
at most), seconds; and per question the same in all. The prompts are the run's, so the tokens
read are too; the seconds are not quite (the writer's prose is not cut where a run would cut
it). Saves ``bench/results/prompt_reuse.json`` (figures and keys only).

    .venv/bin/python bench/prompt_reuse.py --library L --series eval-MODEL-TAG [--limit N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.prompt_lookup import series_calls  # noqa: E402
from core.research import support  # noqa: E402
from core.research.schemas import LeanPlan  # noqa: E402
from core.settings import ModelSettings, models_cache_dir  # noqa: E402
from core.tasks import TaskLog  # noqa: E402
from models.errors import StructuredOutputError  # noqa: E402
from models.llamacpp import LlamaCppLLM  # noqa: E402
from models.llm import json_prompt  # noqa: E402
from models.starter import STARTER_DEFAULT, ensure_starter  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "prompt_reuse.json"
# a passage as a notes or writer prompt shows it: its id or label and title line, then its text
_BLOCK = re.compile(
    r"^\[(?:ev\d:[0-9a-f]{16}|E\d+)\][^\n]*\n(.*?)(?=^\[(?:ev\d:|E\d+\])|</data>)", re.M | re.S
)
MAX_TOKENS = {"plan": 600, "notes": 500, "answer": 600, "write": 600}
CHOICES = {
    "support": support.OPTIONS,
    "kind": support.KIND_OPTIONS,
    "change": support.CHANGE_OPTIONS,
}


def kind_of(key: str) -> str | None:
    """The kind of a logged call from its key: "plan", "r1/q2/notes", "support/<hash>", ..."""
    step = key.split("#")[0]
    last = step.rsplit("/", 1)[-1]
    if last in MAX_TOKENS:
        return last
    first = step.split("/", 1)[0]
    return first if first in CHOICES else None


def logged_calls(log: TaskLog, series: str, limit: int | None) -> list[dict[str, Any]]:
    """The series' model calls, task by task in the order they ran, each in its run's order."""
    calls = list(series_calls(log, series, kind_of, in_run_order=True, limit=limit))
    for call in calls:
        if call["kind"] == "plan":
            call["schema"] = LeanPlan
    return calls


def run_call(llm: LlamaCppLLM, call: dict[str, Any]) -> int:
    """Make the call; its prompt's tokens (a schema call's with the instruction it adds)."""
    kind, messages, schema = call["kind"], call["messages"], call["schema"]
    if kind in CHOICES:
        llm.choose(messages, CHOICES[kind])
    elif schema is not None:
        # invalid twice, as in some runs: what it read still counts
        with contextlib.suppress(StructuredOutputError):
            llm.complete_json(messages, schema, max_tokens=MAX_TOKENS[kind])
        messages = json_prompt(messages, schema)
    else:
        llm.chat(messages, max_tokens=MAX_TOKENS[kind], temperature=0.0)
    return llm.count_message_tokens(messages)


def passages_shown(call: dict[str, Any]) -> list[str]:
    """The passages a notes or writer prompt shows whole, each as its text (whitespace folded)."""
    if call["kind"] not in ("notes", "write"):
        return []
    return [" ".join(b.split()) for b in _BLOCK.findall(call["messages"][-1].content)]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = sum(r["prompt_tokens"] for r in rows)
    read = sum(r["read_tokens"] for r in rows)
    return {
        "calls": len(rows),
        "prompt_tokens": prompt,
        "read_tokens": read,
        "passage_tokens_again": sum(r["passage_tokens_again"] for r in rows),
        "continued_share": round(1 - read / prompt, 3) if prompt else None,
        "seconds": round(sum(r["seconds"] for r in rows), 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", type=Path, required=True, help="The eval library's home.")
    ap.add_argument("--series", required=True, help="Task-name prefix, e.g. eval-MODEL-TAG.")
    ap.add_argument("--limit", type=int, default=None, help="Only the first N questions run.")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    if not (args.library / "tasks.sqlite").is_file():
        raise SystemExit(f"no task log at {args.library / 'tasks.sqlite'}: give an eval library")
    log = TaskLog(args.library / "tasks.sqlite")
    try:
        calls = logged_calls(log, args.series, args.limit)
    finally:
        log.close()
    if not calls:
        raise SystemExit(f"no logged model calls under {args.series!r}")
    settings = ModelSettings()
    llm = LlamaCppLLM(
        ensure_starter(STARTER_DEFAULT, models_cache_dir()),
        n_threads=settings.threads,
        n_ctx=settings.context_size,
        seed=0,
        prompt_cache_bytes=settings.prompt_cache_mb << 20,
    )
    evaluated: list[int] = []

    def hook() -> None:
        llama = llm._load()
        plain_eval = llama.eval

        def counting_eval(tokens: Any) -> None:
            evaluated.append(len(tokens))
            plain_eval(tokens)

        llama.eval = counting_eval

    rows = []
    try:
        llm._run(hook)
        shown: dict[str, set[str]] = {}  # per question: passages an earlier call showed
        for call in calls:
            seen = shown.setdefault(call["task"], set())
            again = sum(llm.count_tokens(p) for p in passages_shown(call) if p in seen)
            seen.update(passages_shown(call))
            evaluated.clear()
            started = time.perf_counter()
            prompt = run_call(llm, call)
            seconds = time.perf_counter() - started
            # a prompt is evaluated in one batch; each written token in a batch of its own
            read = (
                sum(n for n in evaluated if n > 1)
                if call["kind"] not in CHOICES
                else sum(evaluated)
            )
            row = {
                "question": call["task"].rsplit("-", 1)[-1],
                "key": call["key"].split("#")[0],
                "kind": call["kind"],
                "prompt_tokens": prompt,
                "read_tokens": read,
                "passage_tokens_again": again,
                "seconds": round(seconds, 2),
            }
            rows.append(row)
            print(
                f"{row['kind']:<7} prompt {prompt:>5}  read {read:>5}  {seconds:>6.1f} s  "
                f"{row['question']} {row['key']}",
                flush=True,
            )
    finally:
        llm.close()
    kinds = {
        k: summary([r for r in rows if r["kind"] == k]) for k in sorted({r["kind"] for r in rows})
    }
    questions = {
        q: summary([r for r in rows if r["question"] == q])
        for q in dict.fromkeys(r["question"] for r in rows)
    }
    result = {
        "series": args.series,
        "prompt_cache_mb": settings.prompt_cache_mb,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_avg_end": list(os.getloadavg()),
        "all": summary(rows),
        "per_question_read_tokens_median": statistics.median(
            q["read_tokens"] for q in questions.values()
        ),
        "kinds": kinds,
        "questions": questions,
        "calls": rows,
    }
    for kind, k in kinds.items():
        print(f"{kind}: {k}")
    print(f"all: {result['all']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
