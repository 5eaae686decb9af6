"""What the evidence ids in a worker's notes call cost, and what the model needs them for.

An evidence id (``ev1:`` and 16 hex digits) is ~20 tokens each time a notes call reads or
writes it: in the passage headers, in the schema instruction's enum of citable ids, and in the
findings and ``answer_id`` the model writes. Two ways to spend fewer are replayed here, greedily,
on one model instance, on notes calls a series of runs logged (``sourcebook eval --tag T``):

- ``ids``: the call as logged (the baseline, in the same process);
- ``labels``: passages headed [E1], [E2], ... and the schema's enum of those labels;
- ``no_enum``: ids as logged, the schema instruction's enums replaced by "an evidence id shown
  above" (the grammar still allows only the ids);
- ``enum_once``: ids as logged, the schema instruction's id enum written once under ``$defs``
  (first) and referred to where it was (:func:`enums_once`); the grammar is unchanged. Not
  kept: on s38one's calls it looked a gain (24 of 24 step answers against 23, 260 -> 240 s), but
  the 1.5B wrote fewer findings (2,433 -> 2,081 tokens), and in a fresh MuSiQue run (s39one)
  most notes had none: F1 first .46 -> .22, citation recall .76 -> .65. Hence the counts of
  findings and of answers and passages the same as the first variant's;
- ``short_ids``: each id as ``ev1:`` and its first hex digits, as few as tell the call's ids
  apart (at least four, :func:`short_ids`), in the passages, the schema and the output. Not
  kept: on s39two's 24 notes calls (``notes_ids_short_ids_not_kept.json``) 22% faster, the
  same number of findings, 18 answers and 21 cited sets the same as with whole ids; run fresh
  (s39short, s39fbshort) a MuSiQue question took 74 s against 86 (mean) and a FinanceBench one
  140 s against 174 (median), but findings cited fewer passages: citation recall .64 against
  .71 and .31 against .44, and 4 FinanceBench answers asserted wrong against 2;
- ``one_id``: ids as logged, but a finding cites one passage, not up to three (schema and
  prompt line): in s34a's notes calls, 50 of 51 wrote one finding, 36 of 56 findings cited all
  three passages shown, and ids were 52 of the ~130 tokens a call wrote.

Per variant: prompt tokens, seconds, findings written, how many calls gave a step answer
(``answer`` not empty: the answer the steps that build on this one carry,
:mod:`core.research.steps`), and how many gave the same answer and cited the same passages as
the first variant named. The variants rotate order from call to call. Saves
``bench/results/notes_ids.json`` (keys and figures only).

    .venv/bin/python bench/notes_ids.py --library L --series eval-MODEL-TAG [--calls 24] \\
        [--variants ids,one_id]
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "bench"))

from prompt_lookup import recorded_calls  # noqa: E402

from core.research.schemas import notes_model  # noqa: E402
from core.settings import models_cache_dir  # noqa: E402
from core.tasks import TaskLog  # noqa: E402
from models.errors import ModelBackendError  # noqa: E402
from models.llamacpp import LlamaCppLLM  # noqa: E402
from models.llm import (  # noqa: E402
    ChatMessage,
    extract_json_text,
    json_schema_for,
    with_schema_instruction,
)
from models.starter import STARTER_DEFAULT, ensure_starter  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "notes_ids.json"
VARIANTS = ("ids", "labels", "no_enum", "one_id", "enum_once", "short_ids")
LOGGED_IDS_PER_FINDING = 3  # what the logged calls' schema allowed (s34a, s35)
FINDING_LINE = re.compile(r"^Each finding is .*$", re.M)
ONE_ID_LINE = (
    "Each finding is one short factual sentence taken from the passages, with the evidence id "
    "of the one passage that states it."
)
MAX_TOKENS = 500
_EV_ID = re.compile(r"ev\d:[0-9a-f]{16}")
ENUM_HINT = "an evidence id shown above"


SHORT_ID_HEX = 4  # hex digits a short id keeps at least (more when two ids share them)


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id as its scheme and the fewest leading hex digits (at least
    :data:`SHORT_ID_HEX`) that tell the call's ids apart: "ev1:077b"."""
    for k in range(SHORT_ID_HEX, 17):
        short = {i: i[: i.find(":") + 1 + k] for i in ids}
        if len(set(short.values())) == len(short):
            return short
    return {i: i for i in ids}


def labelled(
    messages: list[ChatMessage], short: bool = False
) -> tuple[list[ChatMessage], list[str]]:
    """The messages with every evidence id replaced by E1, E2, ... in order of first mention
    (or by its short form, :func:`short_ids`), and the labels."""
    ids = list(dict.fromkeys(_EV_ID.findall("\n".join(m.content for m in messages))))
    label = short_ids(ids) if short else {ev_id: f"E{n}" for n, ev_id in enumerate(ids, 1)}
    out = [
        m.model_copy(update={"content": _EV_ID.sub(lambda x: label[x.group(0)], m.content)})
        for m in messages
    ]
    return out, list(label.values())


def without_enums(node: Any) -> Any:
    """A JSON schema with each ``enum`` replaced by a string described as an id shown above."""
    if isinstance(node, dict):
        if "enum" in node:
            return {"type": "string", "description": ENUM_HINT}
        return {k: without_enums(v) for k, v in node.items()}
    if isinstance(node, list):
        return [without_enums(v) for v in node]
    return node


def enums_once(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as the model reads it with each enum it holds more than once written once,
    under ``$defs`` (before the rest), and referred to where it was."""
    counts: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, dict):
            if "enum" in node:
                counts[json.dumps(node)] = counts.get(json.dumps(node), 0) + 1
            for v in node.values():
                count(v)
        elif isinstance(node, list):
            for v in node:
                count(v)

    def refer(node: Any, key: str, ref: dict[str, str]) -> Any:
        if isinstance(node, dict):
            if json.dumps(node) == key:
                return ref
            return {k: refer(v, key, ref) for k, v in node.items()}
        if isinstance(node, list):
            return [refer(v, key, ref) for v in node]
        return node

    count(schema)
    defs: dict[str, Any] = {}
    for key in (k for k, n in counts.items() if n > 1):
        name = f"choices{len(defs) + 1}"
        schema = refer(schema, key, {"$ref": f"#/$defs/{name}"})
        defs[name] = json.loads(key)
    return {"$defs": defs, **schema} if defs else schema


def ids_per_finding(schema: dict[str, Any], n: int) -> dict[str, Any]:
    """``schema`` (a notes schema) with a finding's ``evidence_ids`` bounded to ``n`` items."""

    def bound(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: bound(v) for k, v in node.items()}
            ids = out.get("properties", {}).get("evidence_ids")
            if isinstance(ids, dict):
                out["properties"]["evidence_ids"] = {**ids, "maxItems": n}
            return out
        if isinstance(node, list):
            return [bound(v) for v in node]
        return node

    return bound(schema)


def prompt_and_grammar(
    variant: str, messages: list[ChatMessage], ids: list[str]
) -> tuple[list[ChatMessage], dict[str, Any]]:
    """What the model reads (schema instruction included) and the schema its output is held to."""
    if variant in ("labels", "short_ids"):
        messages, labels = labelled(messages, short=variant == "short_ids")
        schema = ids_per_finding(json_schema_for(notes_model(labels)), LOGGED_IDS_PER_FINDING)
        return with_schema_instruction(messages, schema), schema
    schema = ids_per_finding(json_schema_for(notes_model(ids)), LOGGED_IDS_PER_FINDING)
    if variant == "one_id":
        schema = ids_per_finding(schema, 1)
        system = FINDING_LINE.sub(ONE_ID_LINE, messages[0].content)
        messages = [messages[0].model_copy(update={"content": system}), *messages[1:]]
    shown = without_enums(schema) if variant == "no_enum" else schema
    shown = enums_once(shown) if variant == "enum_once" else shown
    return with_schema_instruction(messages, shown), schema


def run(llm: LlamaCppLLM, prompt: list[ChatMessage], schema: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = llm._run(llm._generate_here, prompt, MAX_TOKENS, 0.0, None, schema, None)
        data = json.loads(extract_json_text(response.text))
    except (ModelBackendError, ValueError):
        return {"ok": False, "seconds": round(time.perf_counter() - started, 2)}
    answer = " ".join(str(data.get("answer") or "").casefold().split())
    return {
        "ok": True,
        "seconds": round(time.perf_counter() - started, 2),
        "prompt_tokens": response.prompt_tokens,
        "written_tokens": response.completion_tokens,
        "step_answer": bool(answer),
        "findings": len(data.get("findings") or []),
        # compared with the baseline's, then dropped: nothing of the benchmark's text is saved
        "_answer": answer,
        "_cited": sorted(
            {str(i) for f in data.get("findings") or [] for i in f.get("evidence_ids") or []}
            | ({str(data["answer_id"])} if data.get("answer_id") else set())
        ),
    }


def cited_as_ids(variant: str, cited: list[str], ids: list[str], shown: list[str]) -> set[str]:
    """A variant's cited labels or short ids as the evidence ids they stand for (``shown``: the
    ids in order of first mention, which is how labels number them)."""
    if variant == "labels":
        return {
            shown[int(c[1:]) - 1] for c in cited if c[1:].isdigit() and int(c[1:]) <= len(shown)
        }
    if variant == "short_ids":
        return {next((i for i in ids if i.startswith(c)), c) for c in cited}
    return set(cited)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", type=Path, required=True, help="The eval library's home.")
    ap.add_argument("--series", required=True, help="Task-name prefix, e.g. eval-MODEL-TAG.")
    ap.add_argument("--calls", type=int, default=24, help="Logged notes calls to replay.")
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help="Comma-separated, of: " + ", ".join(VARIANTS)
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    chosen = tuple(v for v in args.variants.split(",") if v)
    if not chosen or set(chosen) - set(VARIANTS):
        raise SystemExit(f"--variants: choose from {', '.join(VARIANTS)}")

    log = TaskLog(args.library / "tasks.sqlite")
    try:
        calls = [c for c in recorded_calls(log, args.series, args.calls) if c["kind"] == "notes"]
    finally:
        log.close()
    if not calls:
        raise SystemExit(f"no logged notes calls under {args.series!r}")
    llm = LlamaCppLLM(ensure_starter(STARTER_DEFAULT, models_cache_dir()), n_threads=2, seed=0)
    rows = []
    try:
        llm.load()  # not inside the first call's time
        for i, call in enumerate(calls):
            ids = list(dict.fromkeys(_EV_ID.findall(call["messages"][-1].content)))
            k = i % len(chosen)
            order = chosen[k:] + chosen[:k]
            row: dict[str, Any] = {"key": call["key"]}
            for variant in order:
                row[variant] = run(llm, *prompt_and_grammar(variant, call["messages"], ids))
            shown = list(
                dict.fromkeys(_EV_ID.findall("\n".join(m.content for m in call["messages"])))
            )
            base = row[chosen[0]]
            for variant in chosen:
                out = row[variant]
                if out["ok"] and base["ok"]:
                    out["same_answer"] = out["_answer"] == base["_answer"]
                    out["same_cited"] = cited_as_ids(variant, out["_cited"], ids, shown) == (
                        cited_as_ids(chosen[0], base["_cited"], ids, shown)
                    )
            for variant in chosen:
                row[variant].pop("_answer", None)
                row[variant].pop("_cited", None)
            rows.append(row)
            print(
                "  ".join(
                    f"{v} {row[v]['seconds']:>5.1f} s answer {row[v].get('step_answer', '-')!s:<5}"
                    for v in chosen
                )
                + f"  {call['key']}",
                flush=True,
            )
    finally:
        llm.close()
    scored = [r for r in rows if all(r[v]["ok"] for v in chosen)]
    variants = (
        {
            v: {
                "step_answers": sum(r[v]["step_answer"] for r in scored),
                "findings": sum(r[v]["findings"] for r in scored),
                "same_answer_as_first": sum(r[v]["same_answer"] for r in scored),
                "same_cited_as_first": sum(r[v]["same_cited"] for r in scored),
                "seconds_total": round(sum(r[v]["seconds"] for r in scored), 1),
                "seconds_median": round(statistics.median(r[v]["seconds"] for r in scored), 2),
                "prompt_tokens": sum(r[v]["prompt_tokens"] for r in scored),
                "written_tokens": sum(r[v]["written_tokens"] for r in scored),
            }
            for v in chosen
        }
        if scored
        else {}
    )
    result = {
        "model": STARTER_DEFAULT.name,
        "series": args.series,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_avg_end": list(os.getloadavg()),
        "calls": len(rows),
        "scored": len(scored),
        "variants": variants,
        "rows": rows,
    }
    for v, k in variants.items():
        print(
            f"{v}: {k['step_answers']}/{len(scored)} step answers, {k['seconds_total']} s, "
            f"{k['prompt_tokens']} prompt / {k['written_tokens']} written tokens"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
