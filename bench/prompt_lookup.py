"""Prompt-lookup decoding against plain decoding, on the model calls of real research runs.

Research output copies its passages: a worker's findings, the short answer's facts, the
writer's sentences. llama.cpp's prompt-lookup decoding (``models.prompt_lookup_tokens``) drafts
the next tokens by finding the text just written in the prompt, and the model checks the draft
in one batch. Whether that pays on 2 cores, and whether the output stays the same under greedy
decoding, is measured here on calls a series of runs logged (``sourcebook eval --tag T``):

- the worker notes (JSON, their schema rebuilt from the evidence ids the prompt shows),
- the short answers (JSON, from the labels the prompt shows),
- the writer's prose (free text),

each replayed greedily on two instances of the same model in this process, one with the draft
and one without, in alternating order (the second of a pair may find the page cache warmer), no
kept states on either (each call reads its whole prompt on both). Reported per kind: seconds
with and without (median and total), the speed-up of the totals, and how many outputs are the
same token for token. Saves ``bench/results/prompt_lookup.json`` (figures and keys only).

    .venv/bin/python bench/prompt_lookup.py --library L --series eval-MODEL-TAG \\
        [--tokens 4] [--per-kind 6] [--model 1.5b|0.5b]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.research.schemas import notes_model, short_answer_model  # noqa: E402
from core.settings import models_cache_dir  # noqa: E402
from core.tasks import TaskLog  # noqa: E402
from models.llamacpp import LlamaCppLLM  # noqa: E402
from models.llm import ChatMessage  # noqa: E402
from models.starter import STARTER_DEFAULT, STARTER_FAST, ensure_starter  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "prompt_lookup.json"
_EV_ID = re.compile(r"^\[(ev\d:[0-9a-f]{16})\]", re.MULTILINE)
_LABEL = re.compile(r"^\[(E\d+)\]", re.MULTILINE)
MAX_TOKENS = {"notes": 500, "answer": 600, "write": 600}


def kind_of(key: str) -> str | None:
    last = key.split("#")[0].rsplit("/", 1)[-1]
    return {"notes": "notes", "answer": "answer", "write": "write"}.get(last)


def call_schema(kind: str, messages: list[ChatMessage]) -> Any:
    """The schema a logged notes or answer call was made with, rebuilt from the evidence ids or
    labels its prompt shows; None for another kind or a prompt that shows none."""
    text = "\n".join(m.content for m in messages)
    if kind == "notes":
        ids = list(dict.fromkeys(_EV_ID.findall(text)))
        return notes_model(ids) if ids else None
    if kind == "answer":
        labels = list(dict.fromkeys(_LABEL.findall(text)))
        return short_answer_model(labels) if labels else None
    return None


def series_calls(
    log: TaskLog,
    series: str,
    kind_of: Callable[[str], str | None],
    *,
    in_run_order: bool = False,
    limit: int | None = None,
) -> Iterator[dict[str, Any]]:
    """The model calls a series' tasks logged, each as its task, key, kind (``kind_of`` its key;
    None leaves it out), messages and schema (:func:`call_schema`): the tasks in name order, or
    in the order they ran, the first ``limit`` of them."""
    tasks = [t for t in log.list_tasks() if t.name.startswith(series + "-")]
    tasks.sort(key=(lambda t: t.created_at) if in_run_order else (lambda t: t.name))
    for info in tasks[:limit]:
        for ev in log.events(info.name):
            kind = kind_of(ev.key) if ev.kind == "messages" else None
            if kind is None:
                continue
            messages = [ChatMessage.model_validate(m) for m in ev.payload]
            yield {
                "task": info.name,
                "key": ev.key,
                "kind": kind,
                "messages": messages,
                "schema": call_schema(kind, messages),
            }


def recorded_calls(log: TaskLog, series: str, per_kind: int) -> list[dict[str, Any]]:
    """Up to ``per_kind`` logged calls of each kind, from the series' tasks in name order."""
    calls: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for call in series_calls(log, series, kind_of):
        kind = call["kind"]
        if counts.get(kind, 0) >= per_kind or (kind != "write" and call["schema"] is None):
            continue
        counts[kind] = counts.get(kind, 0) + 1
        calls.append(call)
    return calls


def run_call(llm: LlamaCppLLM, call: dict[str, Any]) -> tuple[float, str]:
    started = time.perf_counter()
    if call["schema"] is not None:
        out = llm.complete_json(
            call["messages"], call["schema"], max_tokens=MAX_TOKENS[call["kind"]]
        ).model_dump_json()
    else:
        out = llm.chat(call["messages"], max_tokens=MAX_TOKENS["write"], temperature=0.0).text
    return time.perf_counter() - started, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", type=Path, required=True, help="The eval library's home.")
    ap.add_argument("--series", required=True, help="Task-name prefix, e.g. eval-MODEL-TAG.")
    ap.add_argument("--tokens", type=int, default=4, help="Draft length (num_pred_tokens).")
    ap.add_argument("--per-kind", type=int, default=6)
    ap.add_argument("--model", choices=["1.5b", "0.5b"], default="1.5b")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    log = TaskLog(args.library / "tasks.sqlite")
    try:
        calls = recorded_calls(log, args.series, args.per_kind)
    finally:
        log.close()
    if not calls:
        raise SystemExit(f"no logged notes, answer or write calls under {args.series!r}")
    spec = STARTER_DEFAULT if args.model == "1.5b" else STARTER_FAST
    path = ensure_starter(spec, models_cache_dir())
    plain = LlamaCppLLM(path, n_threads=2, seed=0)
    draft = LlamaCppLLM(path, n_threads=2, seed=0, prompt_lookup_tokens=args.tokens)
    rows = []
    try:
        for i, call in enumerate(calls):
            order = [("plain", plain), ("draft", draft)]
            if i % 2:
                order.reverse()
            got = {name: run_call(llm, call) for name, llm in order}
            row = {
                "key": call["key"],
                "kind": call["kind"],
                "plain_s": round(got["plain"][0], 2),
                "draft_s": round(got["draft"][0], 2),
                "same_output": got["plain"][1] == got["draft"][1],
                "output_chars": len(got["plain"][1]),
            }
            rows.append(row)
            print(
                f"{row['kind']:<6} plain {row['plain_s']:>6.1f} s  draft {row['draft_s']:>6.1f} s  "
                f"same {row['same_output']}  {call['key']}",
                flush=True,
            )
        # a draft makes llama.cpp keep logits for every position of the context, not a batch's
        logits_mb = {
            name: llm._llama.scores.nbytes >> 20
            for name, llm in (("plain", plain), ("draft", draft))
        }
    finally:
        plain.close()
        draft.close()
    kinds: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in rows}):
        rs = [r for r in rows if r["kind"] == kind]
        plain_total = sum(r["plain_s"] for r in rs)
        draft_total = sum(r["draft_s"] for r in rs)
        kinds[kind] = {
            "calls": len(rs),
            "plain_median_s": round(statistics.median(r["plain_s"] for r in rs), 2),
            "draft_median_s": round(statistics.median(r["draft_s"] for r in rs), 2),
            "plain_total_s": round(plain_total, 1),
            "draft_total_s": round(draft_total, 1),
            "speedup": round(plain_total / draft_total, 3) if draft_total else None,
            "same_output": sum(r["same_output"] for r in rs),
        }
    result = {
        "model": spec.name if hasattr(spec, "name") else args.model,
        "draft_tokens": args.tokens,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_avg_end": list(os.getloadavg()),
        "logits_buffer_mb": logits_mb,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,
        "kinds": kinds,
        "calls": rows,
    }
    for kind, k in kinds.items():
        print(
            f"{kind}: {k['calls']} calls, plain {k['plain_total_s']} s, "
            f"draft {k['draft_total_s']} s, speed-up {k['speedup']}, "
            f"same output {k['same_output']}/{k['calls']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
