"""LLM benchmark: speed and structured-output validity of the starter models, in-process.

For each starter (1.5B default, 0.5B fast) at 2 threads:
- prompt processing and generation tokens/s, and time to first token (median of 3 streamed runs
  of a ~400-token prompt, each made unique so llama.cpp's prefix cache cannot help);
- JSON-schema validity over 20 planning prompts: valid at the first try, valid after the one
  retry ``complete_json`` allows, failed.

Prints a table and saves ``bench/results/llm.json``. Usage:
    .venv/bin/python bench/llm_bench.py [--models-dir DIR] [--only 0.5b|1.5b] [--plans N]

To compare llama.cpp builds (one session, nothing else running), install each build's wheel
into its own folder and run with that folder first on the path and a label; each label's
figures are merged into ``bench/results/llm_builds.json`` beside llama.cpp's own account of the
instructions it uses (``system_info``):
    PYTHONPATH=/tmp/llama-avx512 .venv/bin/python bench/llm_bench.py --label avx512 --plans 0
A build that kills the process is recorded by the one-token probe (``models.probe``) instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.errors import StructuredOutputError
from models.llamacpp import LlamaCppLLM
from models.llm import ChatMessage
from models.probe import probe
from models.starter import STARTER_DEFAULT, STARTER_FAST, ensure_starter, starter_status

RESULTS = Path(__file__).resolve().parent / "results" / "llm.json"
BUILDS = RESULTS.with_name("llm_builds.json")
THREADS = 2
N_CTX = 4096
GEN_TOKENS = 96
PLAN_MAX_TOKENS = 256


class PlannedQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(max_length=100, description="A self-contained search query.")
    tool: Literal["discover_evidence", "fetch_evidence", "find_entities", "explore"]


class BenchPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_analysis: str = Field(max_length=160, description="What the question asks, briefly.")
    answer_shape: Literal["short_answer", "comparison", "list", "report"]
    queries: list[PlannedQuery] = Field(min_length=1, max_length=3)


QUESTIONS = [
    "Do heat pumps cost less to run than gas boilers in a cold climate?",
    "What caused the 2008 financial crisis, according to the documents?",
    "Compare the side effects of ibuprofen and paracetamol.",
    "Which battery chemistries are used in grid storage, and why?",
    "How did the printing press change literacy in Europe?",
    "What evidence links sleep duration to memory consolidation?",
    "List the main arguments for and against nuclear power.",
    "How does CRISPR gene editing work, in simple terms?",
    "What are the risks of microplastics to human health?",
    "Summarise the history of the Suez Canal.",
    "Which programming languages are best for embedded systems?",
    "How effective are four-day work weeks for productivity?",
    "What do the reports say about coral reef bleaching since 2000?",
    "Compare solar and wind power on cost per megawatt-hour.",
    "How do central banks use interest rates to fight inflation?",
    "What is known about the origins of the Indo-European languages?",
    "Which factors predict student success in online courses?",
    "How do vaccines based on mRNA differ from traditional ones?",
    "What are the environmental effects of lithium mining?",
    "Explain the main causes of the fall of the Western Roman Empire.",
]

SYSTEM = (
    "You are the planner of a research assistant. Break the question into at most three "
    "self-contained search queries over the user's document library and pick a tool for each."
)

FILLER = (
    "The library holds reports, papers and web pages on energy, health, history and economics. "
    "Each passage has a title, a page range and a heading path. "
)


def bench_speed(llm: LlamaCppLLM, runs: int = 3) -> dict[str, float]:
    prompt_tps, gen_tps, ttft = [], [], []
    for run in range(runs):
        content = f"Run {run} at {time.time_ns()}. " + FILLER * 12 + "Now write a long essay."
        messages = [ChatMessage(role="user", content=content)]
        n_prompt = llm.count_message_tokens(messages)
        started = time.monotonic()
        first: float | None = None
        n_gen = 0
        for _token in llm.stream(messages, max_tokens=GEN_TOKENS, temperature=0.2):
            if first is None:
                first = time.monotonic() - started
            n_gen += 1
        total = time.monotonic() - started
        assert first is not None
        ttft.append(first)
        prompt_tps.append(n_prompt / first)
        if n_gen > 1:
            gen_tps.append((n_gen - 1) / (total - first))
    return {
        "prompt_tokens": float(n_prompt),
        "prompt_tok_s": statistics.median(prompt_tps),
        "gen_tok_s": statistics.median(gen_tps),
        "ttft_s": statistics.median(ttft),
    }


def bench_json(llm: LlamaCppLLM, n: int) -> dict[str, Any]:
    calls = 0
    original = llm._generate

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(*args, **kwargs)

    llm._generate = counting  # type: ignore[method-assign]
    first_try = after_retry = failed = 0
    times, errors = [], []
    for question in QUESTIONS[:n]:
        calls = 0
        started = time.monotonic()
        messages = [
            ChatMessage(role="system", content=SYSTEM),
            ChatMessage(role="user", content=question),
        ]
        try:
            llm.complete_json(messages, BenchPlan, max_tokens=PLAN_MAX_TOKENS)
            if calls == 1:
                first_try += 1
            else:
                after_retry += 1
        except StructuredOutputError as exc:
            failed += 1
            errors.append(exc.message[:200])
        times.append(time.monotonic() - started)
        print(f"  plan {len(times)}/{n}: {times[-1]:.1f} s, {calls} call(s)", flush=True)
    llm._generate = original  # type: ignore[method-assign]
    return {
        "prompts": n,
        "valid_first_try": first_try,
        "valid_after_retry": after_retry,
        "failed": failed,
        "valid_rate": (first_try + after_retry) / n if n else 0.0,
        "mean_s_per_plan": statistics.mean(times) if times else 0.0,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--only", choices=["0.5b", "1.5b"], default=None)
    parser.add_argument("--plans", type=int, default=20)
    parser.add_argument(
        "--label", default=None, help="Name of the llama.cpp build; saves to llm_builds.json."
    )
    args = parser.parse_args()
    if args.models_dir is None:
        from core.settings import models_cache_dir

        args.models_dir = models_cache_dir()
    specs = [STARTER_FAST, STARTER_DEFAULT]
    if args.only:
        specs = [s for s in specs if args.only in s.name]
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_start": os.getloadavg(),
        },
        "threads": THREADS,
        "n_ctx": N_CTX,
        "llama_cpp": _build_info(),
        "models": {},
    }
    for spec in specs:
        status = starter_status(spec, args.models_dir)
        if not status.installed and not status.assembled:
            print(f"skip {spec.name}: {status.problem} ({spec.install_command})")
            continue
        started = time.monotonic()
        path = ensure_starter(spec, args.models_dir)
        assemble_s = time.monotonic() - started
        probed = probe(path, force=True)
        if not probed.ok:  # the build cannot run here: say so instead of dying with it
            print(f"{spec.name}: the one-token probe failed: {probed.detail}", flush=True)
            detail = probed.detail.replace(str(path.parent) + os.sep, "")  # no machine paths
            results["models"][spec.name] = {"probe": detail, "crashed": probed.crashed}
            _save(results, args.label)
            continue
        llm = LlamaCppLLM(path, n_threads=THREADS, n_ctx=N_CTX, seed=1)
        started = time.monotonic()
        llm.load()
        load_s = time.monotonic() - started
        print(f"{spec.name}: loaded in {load_s:.1f} s; measuring speed...", flush=True)
        speed = bench_speed(llm)
        print(f"{spec.name}: {args.plans} planning prompts...", flush=True)
        validity = bench_json(llm, args.plans)
        llm.close()
        results["models"][spec.name] = {
            "cpu_variant": probed.variant,
            "variants_skipped": probed.skipped,
            "assemble_or_verify_s": assemble_s,
            "load_s": load_s,
            **speed,
            **validity,
        }
        results["machine"]["load_avg_end"] = os.getloadavg()
        _save(results, args.label)  # after each model: partial results
        print(f"{spec.name}: {json.dumps(results['models'][spec.name])}", flush=True)

    header = (
        f"{'model':38} {'prompt tok/s':>12} {'gen tok/s':>10} {'TTFT s':>7} "
        f"{'valid 1st':>9} {'after retry':>11} {'failed':>6} {'s/plan':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, r in results["models"].items():
        if "probe" in r:
            print(f"{name:38} probe failed: {r['probe']}")
            continue
        print(
            f"{name:38} {r['prompt_tok_s']:12.1f} {r['gen_tok_s']:10.1f} {r['ttft_s']:7.2f} "
            f"{r['valid_first_try']:>6}/{r['prompts']:<2} {r['valid_after_retry']:>11} "
            f"{r['failed']:>6} {r['mean_s_per_plan']:7.1f}"
        )
    print(
        f"({THREADS} threads, n_ctx {N_CTX}; load avg "
        f"{results['machine']['load_avg_start'][0]:.1f} -> "
        f"{results['machine'].get('load_avg_end', [0.0])[0]:.1f}; "
        f"saved {BUILDS if args.label else RESULTS})"
    )


def _build_info() -> dict[str, str]:
    """The llama_cpp version, and the instruction sets its build uses (a build with CPU variants
    reports the variant loaded, after the first model)."""
    import llama_cpp

    from models import cpu_backend

    info = llama_cpp.llama_print_system_info()
    return {
        "version": str(llama_cpp.__version__),
        "cpu_variants": ", ".join(cpu_backend.variant_libs()),
        "system_info": info.decode() if isinstance(info, bytes) else str(info),
    }


def _save(results: dict[str, Any], label: str | None) -> None:
    results["llama_cpp"] = _build_info()  # after a model loaded: with the variant it runs
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if label is None:
        RESULTS.write_text(json.dumps(results, indent=2))
        return
    builds = json.loads(BUILDS.read_text()) if BUILDS.exists() else {}
    builds[label] = results
    BUILDS.write_text(json.dumps(builds, indent=2))


if __name__ == "__main__":
    main()
