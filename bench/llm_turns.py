"""Research workers taking turns on one model: kept model states against none, same process.

A run's researcher workers share the one in-process model; each call queues on it, so a
worker's next step usually comes after another worker's. llama.cpp reuses its context only for
the prompt that shares a beginning with the one it just read, so without kept states a worker
re-reads its whole conversation each step. With ``models.prompt_cache_mb`` > 0 the model keeps
its state after each call (``models.llamacpp.LlamaCppLLM``) and a worker's step continues from
its own last one.

The schedule: ``--workers`` conversations (a ~700-token system and first message each, like a
researcher's), ``--turns`` turns each, round-robin; every turn adds the model's short answer and
a ~250-token tool result. The same schedule runs on two instances of the starter model, without
and with kept states, one after the other in this process. Reported: per-call seconds of the
turns after the first (the first reads everything in both), median and total, and the peak
resident memory. Saves ``bench/results/llm_turns.json``.

    .venv/bin/python bench/llm_turns.py [--model 1.5b|0.5b] [--workers 3] [--turns 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.llamacpp import LlamaCppLLM
from models.llm import ChatMessage
from models.starter import STARTER_DEFAULT, STARTER_FAST, ensure_starter

RESULTS = Path(__file__).resolve().parent / "results" / "llm_turns.json"
REPO = Path(__file__).resolve().parents[1]
KEPT_MB = 1024


def _texts() -> list[str]:
    """Real prose to fill the prompts: the project's README and prompt templates, in slices."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for p in sorted((REPO / "resources" / "prompts").glob("*.jinja")):
        text += "\n" + p.read_text(encoding="utf-8")
    return [text[i : i + 1000] for i in range(0, len(text) - 1000, 1000)]


def schedule(llm: LlamaCppLLM, workers: int, turns: int) -> list[dict[str, Any]]:
    texts = _texts()
    convs = [
        [
            ChatMessage(role="system", content=f"You are researcher {w + 1}.\n" + texts[w * 3]),
            ChatMessage(role="user", content=texts[w * 3 + 1] + texts[w * 3 + 2]),
        ]
        for w in range(workers)
    ]
    calls = []
    for turn in range(turns):
        for w, msgs in enumerate(convs):
            t = time.perf_counter()
            r = llm.chat(msgs, max_tokens=24, temperature=0.0)
            calls.append(
                {
                    "worker": w,
                    "turn": turn,
                    "prompt_tokens": r.prompt_tokens,
                    "seconds": time.perf_counter() - t,
                }
            )
            sec = calls[-1]["seconds"]
            print(f"  worker {w} turn {turn}: {r.prompt_tokens} tokens, {sec:.1f} s")
            tool = texts[(workers * 3 + turn * workers + w) % len(texts)]
            msgs += [
                ChatMessage(role="assistant", content=r.text),
                ChatMessage(role="user", content="Tool result:\n" + tool),
            ]
    return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", choices=["1.5b", "0.5b"], default="1.5b")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--models-dir", type=Path, default=None)
    args = ap.parse_args()
    from core.settings import models_cache_dir

    spec = STARTER_DEFAULT if args.model == "1.5b" else STARTER_FAST
    path = ensure_starter(spec, args.models_dir or models_cache_dir())
    results: dict[str, Any] = {
        "model": spec.name,
        "workers": args.workers,
        "turns": args.turns,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    for label, kept in (("no kept states", 0), (f"kept states ({KEPT_MB} MB)", KEPT_MB << 20)):
        print(label)
        llm = LlamaCppLLM(path, n_ctx=8192, n_threads=2, seed=7, prompt_cache_bytes=kept)
        try:
            calls = schedule(llm, args.workers, args.turns)
        finally:
            llm.close()
        later = [c["seconds"] for c in calls if c["turn"] > 0]
        results[label] = {
            "calls": calls,
            "later_turns_median_s": statistics.median(later),
            "later_turns_total_s": sum(later),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        }
    results["load_avg_end"] = os.getloadavg()
    print(f"\n{'':<26}{'median s':>10}{'total s':>10}{'peak RSS MB':>13}")
    for label in list(results)[4:6]:
        r = results[label]
        print(
            f"{label:<26}{r['later_turns_median_s']:>10.1f}{r['later_turns_total_s']:>10.1f}"
            f"{r['peak_rss_mb']:>13}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"saved {RESULTS}")


if __name__ == "__main__":
    main()
