"""Retrieval quality on FinanceBench filings (../shared/eval/financebench).

Ingests the 20 10-K/10-Q PDFs through the real pipeline into a fresh library (or reuses
``--home``), then for each of the 37 dev questions reports gold-page recall@2/@5/@10/@20 for
vector only, keyword only, hybrid, and hybrid + graph expansion. A gold unit is one evidence
page of one filing (``DOC_NAME@PAGE``, as ``sourcebook eval`` scores it); a hit counts every
page its passage spans. Also, per mode, the share of top-5 hits that come from the filing the
question is about (``right_doc@5``): a 10-K answers questions about one company and one year,
and a hit from another company's filing is wasted on the reader.

``line_items``: for the questions naming a financial metric or statement
(:mod:`core.research.line_items`), hybrid recall of the question's search beside that of the
line-item search a research worker adds, and of the two merged (rank by rank, the line-item
hit first, as a worker reads them).

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
from typing import Any

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
    from core.eval_data import UnitMap, load_questions, pages0, prepare_library
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
    line_items = _line_items(app, questions, units)
    app.close()
    result = {
        "questions": len(questions),
        "documents": len(documents),
        "ingest_s": ingest.get("seconds", 0.0),
        "reused_library": ingest["skipped"],
        "recall": table,
        "line_items": line_items,
    }
    print(
        f"{'mode':<14}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'doc@5':>8}{'p50 ms':>9}"
    )
    for name, row in table.items():
        cells = "".join(f"{row[f'recall@{k}']:>8.2f}" for k in KS)
        print(f"{name:<14}{cells}{row['right_doc@5']:>8.2f}{row['p50_ms']:>9.1f}")
    li = line_items
    print(f"\nline items, {li['questions']} metric questions (hybrid)")
    for name in ("question", "line_items", "merged"):
        print(f"{name:<14}" + "".join(f"{li[name][f'recall@{k}']:>8.2f}" for k in KS))
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "retrieval_financebench.json").write_text(json.dumps(result, indent=2))
    tmp.cleanup()
    return 0


def _line_items(app: Any, questions: list[Any], units: Any) -> dict[str, Any]:
    from core.eval_data import pages0
    from core.research.line_items import line_item_query

    picked = [(q, line_item_query(q.question)) for q in questions]
    picked = [(q, li) for q, li in picked if li]
    rows: dict[str, dict[int, list[float]]] = {
        n: {k: [] for k in KS} for n in ("question", "line_items", "merged")
    }
    for q, li in picked:
        gold = set(q.gold)
        for k in KS:
            asked = app.search(q.question, k=k, mode="hybrid", graph=False)
            items = app.search(li, k=k, mode="hybrid", graph=False)
            merged = [h for pair in zip(items, asked, strict=False) for h in pair][:k]
            for name, hits in (("question", asked), ("line_items", items), ("merged", merged)):
                found = {
                    u for h in hits for u in units.units(h.doc_id, pages0(h.page_start, h.page_end))
                }
                rows[name][k].append(len(gold & found) / len(gold))
    out: dict[str, Any] = {"questions": len(picked), "queries": [li for _, li in picked]}
    for name, recalls in rows.items():
        out[name] = {f"recall@{k}": statistics.mean(v) if v else 0.0 for k, v in recalls.items()}
    return out


if __name__ == "__main__":
    sys.exit(main())
