"""llama.cpp context settings measured against each other: prompt reading and writing speed.

A research run's time is mostly the model reading prompts (about 100 tokens/s here, against
about 28 written): a setting that reads faster pays on every call. Each setting is a loaded
copy of the 1.5B starter at 2 threads in this one process, taken in turn each round so that a
noisy moment falls on all of them: a prompt of each length read from empty (tokens/s), then
96 tokens written greedily after it (tokens/s). Medians of the rounds. Prints a table and saves
``bench/results/llama_settings.json``. Run on a quiet machine:

    .venv/bin/python bench/llama_settings.py
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.settings import models_cache_dir
from models.llamacpp import LlamaCppLLM
from models.starter import STARTER_DEFAULT, ensure_starter

RESULTS = Path(__file__).resolve().parent / "results" / "llama_settings.json"
LENGTHS = (800, 1600)
WRITTEN = 96
ROUNDS = 3
#: label -> LlamaCppLLM keyword arguments
SETTINGS: dict[str, dict[str, Any]] = {
    "plain": {"flash_attention": False},
    "flash_attention": {"flash_attention": True},
}


def _text() -> str:
    """Prose with figures and names, long enough for the longest prompt."""
    line = (
        "In 1871 the Northport harbour board under Tomas Varga opened a quay of 1,240 metres "
        "on the Dravin River; Tarsk Mills, upstream at Kelmor, shipped 52,870 tonnes of grain "
        "through it in its first year and 61,300 in its second. "
    )
    return line * 60


def _round(llama: Any, tokens: list[int]) -> tuple[float, float]:
    llama.reset()
    started = time.perf_counter()
    llama.eval(tokens)
    read = len(tokens) / (time.perf_counter() - started)
    started = time.perf_counter()
    for n, _ in enumerate(llama.generate(tokens, temp=0.0, reset=True), 1):
        if n >= WRITTEN:
            break
    return read, WRITTEN / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    path = ensure_starter(STARTER_DEFAULT, models_cache_dir())
    llms = {k: LlamaCppLLM(path, n_threads=2, seed=0, **kw) for k, kw in SETTINGS.items()}
    figures: dict[str, dict[int, list[tuple[float, float]]]] = {k: {} for k in llms}
    try:
        for llm in llms.values():
            llm.load()
        tokens = llms["plain"]._llama.tokenize(_text().encode(), add_bos=False)
        for _ in range(ROUNDS):
            for length in LENGTHS:
                for label, llm in llms.items():
                    got = llm._run(_round, llm._llama, tokens[:length])
                    figures[label].setdefault(length, []).append(got)
    finally:
        for llm in llms.values():
            llm.close()
    rows = []
    for label, by_length in figures.items():
        for length, runs in by_length.items():
            row = {
                "setting": label,
                "prompt_tokens": length,
                "read_tokens_per_s": round(statistics.median(r for r, _ in runs), 1),
                "write_tokens_per_s": round(statistics.median(w for _, w in runs), 1),
            }
            rows.append(row)
            print(
                f"{label:>16} {length:>5} prompt tokens: read {row['read_tokens_per_s']:>6.1f} "
                f"tokens/s, write {row['write_tokens_per_s']:>5.1f} tokens/s"
            )
    result = {
        "model": STARTER_DEFAULT.name,
        "threads": 2,
        "written_tokens": WRITTEN,
        "rounds": ROUNDS,
        "settings": SETTINGS,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_avg_end": list(os.getloadavg()),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
