"""What reading a few tokens at once costs the default starter here, against one at a time.

Speculative levers (prompt-lookup decoding, reading the tokens a schema forces in one batch)
save decode steps by reading several tokens in one batch; they pay only if a batch of k tokens
costs much less than k single decodes. On these 2 cores it does not by much (session 40: the
forced-token lever saved a tenth of a notes call's writing, ``notes_forced_text_not_kept.json``).

With the 1.5B starter at 2 threads, after an 800-token context: the median time (of 7) to read
k tokens in one batch, for each k, and that per token against one decode. Prints a table and
saves ``bench/results/batch_cost.json``. Run on a quiet machine:

    .venv/bin/python bench/batch_cost.py
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.settings import models_cache_dir
from models.llamacpp import LlamaCppLLM
from models.starter import STARTER_DEFAULT, ensure_starter

RESULTS = Path(__file__).resolve().parent / "results" / "batch_cost.json"
CONTEXT = 800
SIZES = (1, 2, 4, 8, 16, 32, 64)
RUNS = 7


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    llm = LlamaCppLLM(ensure_starter(STARTER_DEFAULT, models_cache_dir()), n_threads=2, seed=0)
    rows = []
    try:
        llm.load()
        llama = llm._llama
        text = "Northport harbor opened in 1871 and Port Ellery in 1903. " * 80
        context = llama.tokenize(text.encode(), add_bos=False)[:CONTEXT]
        llama.eval(context)
        run = llama.tokenize(b"ev1:3fa9c2d1e0b4a711 Kelmor is on the Dravin. " * 8, add_bos=False)
        for k in SIZES:
            times = []
            for _ in range(RUNS):
                llama.n_tokens = CONTEXT  # the batch is read again at the same place
                started = time.perf_counter()
                llama.eval(run[:k])
                times.append(time.perf_counter() - started)
            rows.append({"tokens": k, "ms": round(statistics.median(times) * 1000, 1)})
    finally:
        llm.close()
    one = rows[0]["ms"]
    for row in rows:
        row["ms_per_token"] = round(row["ms"] / row["tokens"], 1)
        row["vs_single_decodes"] = round(row["ms"] / (one * row["tokens"]), 2)
        print(
            f"{row['tokens']:>3} tokens: {row['ms']:>6.1f} ms, {row['ms_per_token']:>5.1f} ms a "
            f"token, {row['vs_single_decodes']:.2f} of {row['tokens']} single decodes"
        )
    result = {
        "model": STARTER_DEFAULT.name,
        "threads": 2,
        "context_tokens": CONTEXT,
        "runs": RUNS,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_avg_end": list(os.getloadavg()),
        "batches": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
