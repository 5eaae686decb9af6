"""Retrieval quality on the MuSiQue closed corpus (../shared/eval/musique).

Ingests corpus.jsonl (1,890 Wikipedia paragraphs) through the real pipeline into a fresh
library, then for each dev question reports gold-passage recall@2/@5/@10 for four modes:
vector only, keyword only, hybrid, and hybrid + graph expansion. Each cut-off is its own
search asking for k hits (graph expansion re-ranks within what is asked for); a hit counts the
paragraph it belongs to; recall@k = gold paragraphs among those hits over the question's gold
paragraphs, averaged over questions. Also per-hop recall@5 (each
hop's gold paragraph found by the whole question) for hybrid + graph.

Reference figures on this machine kind (from the issue): dense 0.49/0.61/0.72, BM25
0.28/0.37/0.43, naive RRF 0.37/0.47/0.66. Saves ``bench/results/retrieval_quality.json``.

    .venv/bin/python bench/retrieval_quality.py [--eval DIR] [--home DIR] [--runtime onnx-int8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_EVAL = REPO.parent / "shared" / "eval" / "musique"
RESULTS = REPO / "bench" / "results"
KS = (2, 5, 10)
MODES = {
    "vector": {"mode": "vector", "graph": False},
    "keyword": {"mode": "keyword", "graph": False},
    "hybrid": {"mode": "hybrid", "graph": False},
    "hybrid+graph": {"mode": "hybrid", "graph": True},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    ap.add_argument("--home", type=Path, help="Reuse this home (ingests only if empty).")
    ap.add_argument(
        "--runtime",
        choices=["torch", "onnx", "onnx-int8"],
        help="Embedder runtime (default: the settings' default).",
    )
    args = ap.parse_args()
    if args.runtime:
        os.environ["SOURCEBOOK_MODELS__EMBEDDER_RUNTIME"] = args.runtime
    corpus, questions_file = args.eval / "corpus.jsonl", args.eval / "dev_questions.jsonl"
    if not corpus.exists():
        print(f"no MuSiQue data at {args.eval}", file=sys.stderr)
        return 2
    from core.eval_data import prepare_library
    from core.service import Sourcebook

    tmp = tempfile.TemporaryDirectory()
    app = Sourcebook(args.home or Path(tmp.name))
    ingest = prepare_library(app, "musique", corpus, None)
    ext = {d.doc_id: d.external_id for d in app.documents()}
    questions = [json.loads(line) for line in questions_file.read_text().splitlines() if line]

    table: dict[str, dict[str, float]] = {}
    per_hop: list[float] = []
    latency: dict[str, list[float]] = {m: [] for m in MODES}
    for name, opts in MODES.items():
        recalls: dict[int, list[float]] = {k: [] for k in KS}
        for q in questions:
            gold = set(q["gold_passage_ids"])
            for k in KS:
                # Ask for k hits, as a user would: graph expansion re-ranks within them.
                t = time.perf_counter()
                hits = app.search(q["question"], k=k, **opts)  # type: ignore[arg-type]
                latency[name].append(time.perf_counter() - t)
                ranked = list(dict.fromkeys(ext[h.doc_id] for h in hits if ext.get(h.doc_id)))
                recalls[k].append(len(gold & set(ranked[:k])) / len(gold))
                if name == "hybrid+graph" and k == 5:
                    per_hop.extend(
                        1.0 if h["gold_passage_id"] in ranked[:5] else 0.0
                        for h in q["decomposition"]
                    )
        table[name] = {f"recall@{k}": statistics.mean(recalls[k]) for k in KS}
        table[name]["p50_ms"] = 1000 * statistics.median(latency[name])
    app.close()
    result = {
        "runtime": app.settings.models.embedder_runtime,
        "questions": len(questions),
        "passages": len(ext),
        "ingest_s": ingest.get("seconds", 0.0),
        "reused_library": ingest["skipped"],
        "recall": table,
        "hybrid+graph_per_hop_recall@5": statistics.mean(per_hop),
    }
    print(f"{'mode':<14}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'p50 ms':>9}")
    for name, row in table.items():
        cells = "".join(f"{row[f'recall@{k}']:>8.2f}" for k in KS)
        print(f"{name:<14}{cells}{row['p50_ms']:>9.1f}")
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = f"_{args.runtime}" if args.runtime else ""
    (RESULTS / f"retrieval_quality{suffix}.json").write_text(json.dumps(result, indent=2))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
