"""ANN recall on real MiniLM vectors: the HNSW index against an exact scan, same queries.

bench/search_latency.py measures the ANN index on random unit vectors, the hardest case for a
graph index (no clusters); its top-10 overlap with an exact scan there is low (~0.3 at 100k).
This measures what a user's library gets: a copy of a real library (the FinanceBench filings
and the MuSiQue corpus, embedded by the starter MiniLM) is given the ANN index the library
builds from 10,000 passages on (here forced, the libraries are smaller), and each dev question
is searched both ways. Reports top-10 overlap, whether the exact top hit is the ANN's top hit,
and gold recall@10 of vector search both ways (FinanceBench: gold pages; MuSiQue: gold
paragraphs). The libraries are the homes the retrieval benches keep with ``--home``.

    .venv/bin/python bench/ann_recall.py --financebench HOME --musique HOME

Saves ``bench/results/ann_recall.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
EVAL = REPO.parent / "shared" / "eval"
RESULTS = REPO / "bench" / "results"


def measure(home: Path, questions_file: Path) -> dict[str, float | int]:
    from core.eval_data import UnitMap, load_questions, pages0
    from core.service import Sourcebook
    from graph import GraphStore

    dataset, questions = load_questions(questions_file)
    app = Sourcebook(home)
    documents = app.documents(include_superseded=False)
    units = UnitMap(dataset, documents, {})
    vectors = app.embedder.embed([q.question for q in questions])
    app.close()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "library"
        shutil.copytree(home / "library", root)
        store = GraphStore.open(root, vector_dim=vectors.shape[1], ann_threshold=1)
        store.maintain(retrain=True)
        index = store._index  # the bench measures the index itself
        assert index.has_ann_index()
        overlap, top1, recall_ann, recall_exact = [], [], [], []
        for q, v in zip(questions, vectors, strict=True):
            ann = index.vector_search(v, 10, None)
            exact = index.vector_search(v, 10, None, exact=True)
            overlap.append(len({p for p, _ in ann} & {p for p, _ in exact}) / 10)
            top1.append(float(bool(ann) and ann[0][0] == exact[0][0]))
            gold = set(q.gold)
            for hits, out in ((ann, recall_ann), (exact, recall_exact)):
                meta = store._catalog.passage_meta([p for p, _ in hits])
                found = {
                    u
                    for p in meta.values()
                    for u in units.units(p.doc_id, pages0(p.page_start, p.page_end))
                }
                out.append(len(gold & found) / len(gold))
        passages = index.count("embedded")
        store.close()
    return {
        "passages": passages,
        "questions": len(questions),
        "overlap@10": statistics.mean(overlap),
        "top1_same": statistics.mean(top1),
        "gold_recall@10_ann": statistics.mean(recall_ann),
        "gold_recall@10_exact": statistics.mean(recall_exact),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--financebench", type=Path, help="Home of an ingested FinanceBench library.")
    ap.add_argument("--musique", type=Path, help="Home of an ingested MuSiQue library.")
    args = ap.parse_args()
    out: dict[str, object] = {}
    for name, home in (("financebench", args.financebench), ("musique", args.musique)):
        questions = EVAL / name / "dev_questions.jsonl"
        if home is None or not questions.exists():
            continue
        out[name] = measure(home, questions)
        print(name, json.dumps(out[name]), flush=True)
    if not out:
        print("nothing measured: pass --financebench and/or --musique homes", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ann_recall.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
