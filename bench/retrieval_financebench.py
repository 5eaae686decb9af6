"""Retrieval quality on FinanceBench filings (../shared/eval/financebench).

Ingests the 20 10-K/10-Q PDFs through the real pipeline into a fresh library (or reuses
``--home``), then for each of the 37 dev questions reports gold-page recall@2/@5/@10/@20 for
vector only, keyword only, hybrid, and hybrid + graph expansion. A gold unit is one evidence
page of one filing (``DOC_NAME@PAGE``, as ``sourcebook eval`` scores it); a hit counts every
page its passage spans. Also, per mode, the share of top-5 hits that come from the filing the
question is about (``right_doc@5``): a 10-K answers questions about one company and one year,
and a hit from another company's filing is wasted on the reader.

No LLM runs here; this is the search a research worker starts from. Saves
``bench/results/retrieval_financebench.json``.

    .venv/bin/python bench/retrieval_financebench.py [--eval DIR] [--home DIR]
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
DEFAULT_EVAL = REPO.parent / "shared" / "eval" / "financebench"
RESULTS = REPO / "bench" / "results"
KS = (2, 5, 10, 20)
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
    args = ap.parse_args()
    questions_file, pdfs = args.eval / "dev_questions.jsonl", args.eval / "pdfs"
    if not pdfs.is_dir():
        print(f"no FinanceBench data at {args.eval}", file=sys.stderr)
        return 2
    from core.eval import UnitMap, load_questions, pages0, prepare_library
    from core.service import Sourcebook

    tmp = tempfile.TemporaryDirectory()
    app = Sourcebook(args.home or Path(tmp.name))
    ingest = prepare_library(app, "financebench", None, pdfs)
    documents = app.documents(include_superseded=False)
    units = UnitMap("financebench", documents, {})
    dataset, questions = load_questions(questions_file)
    assert dataset == "financebench", questions_file

    table: dict[str, dict[str, float]] = {}
    for name, opts in MODES.items():
        recalls: dict[int, list[float]] = {k: [] for k in KS}
        right_doc: list[float] = []
        latency: list[float] = []
        for q in questions:
            gold = set(q.gold)
            gold_docs = {u.rsplit("@", 1)[0] for u in gold}
            for k in KS:
                # Ask for k hits, as a user would: graph expansion re-ranks within them.
                t = time.perf_counter()
                hits = app.search(q.question, k=k, **opts)  # type: ignore[arg-type]
                latency.append(time.perf_counter() - t)
                found = {
                    u for h in hits for u in units.units(h.doc_id, pages0(h.page_start, h.page_end))
                }
                recalls[k].append(len(gold & found) / len(gold))
                if k == 5:
                    docs = [units.key.get(h.doc_id, "") for h in hits]
                    right_doc.append(sum(d in gold_docs for d in docs) / max(len(docs), 1))
        table[name] = {f"recall@{k}": statistics.mean(recalls[k]) for k in KS}
        table[name]["right_doc@5"] = statistics.mean(right_doc)
        table[name]["p50_ms"] = 1000 * statistics.median(latency)
    app.close()
    result = {
        "questions": len(questions),
        "documents": len(documents),
        "ingest_s": ingest.get("seconds", 0.0),
        "reused_library": ingest["skipped"],
        "recall": table,
    }
    print(
        f"{'mode':<14}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'doc@5':>8}{'p50 ms':>9}"
    )
    for name, row in table.items():
        cells = "".join(f"{row[f'recall@{k}']:>8.2f}" for k in KS)
        print(f"{name:<14}{cells}{row['right_doc@5']:>8.2f}{row['p50_ms']:>9.1f}")
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "retrieval_financebench.json").write_text(json.dumps(result, indent=2))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
