"""Ingest speed: Sourcebook's pipeline against the one a user would otherwise script.

Baseline (re-implemented here without LangChain, same behaviour): PyMuPDFLoader (one text per
page, ``page.get_text()``) -> RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
-> all-MiniLM-L6-v2 via sentence-transformers (batch 32, as HuggingFaceEmbeddings calls it)
-> a LanceDB table. Both run in this process on the same files, Sourcebook first so its peak RSS
is its own (the baseline's peak is reported as the process peak after it ran).

Figures: wall seconds, pages/s, passages/s, peak RSS, passages longer than MiniLM's 256 word
pieces (silently truncated), share of time spent embedding, word pieces given to the embedder
(``embedder_word_pieces``: Sourcebook's include the title/heading headers and leave out texts
embedded once already), CPU seconds of all threads and processes (``cpu_ratio``: the baseline's
over ours, steadier than wall time on a shared machine); and the time until a 500-page PDF is
keyword-searchable. Saves ``bench/results/ingest_speed.json``.

    .venv/bin/python bench/ingest_speed.py [--pdfs DIR] [--skip-baseline] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
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
DEFAULT_PDFS = REPO.parent / "shared" / "eval" / "financebench" / "pdfs"
RESULTS = REPO / "bench" / "results"


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> None:
    """Reset VmHWM (Linux >= 4.0) so the next phase's peak is its own."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


# ------------------------------------------------------------------ the baseline pipeline


def _split(text: str, separators: list[str], size: int, overlap: int) -> list[str]:
    """RecursiveCharacterTextSplitter._split_text, keep_separator=True, length=len."""
    sep = separators[-1]
    rest: list[str] = []
    for i, s in enumerate(separators):
        if s == "" or s in text:
            sep, rest = s, separators[i + 1 :]
            break
    if sep:
        parts = text.split(sep)
        splits = [parts[0]] + [sep + p for p in parts[1:]]
    else:
        splits = list(text)
    splits = [s for s in splits if s]
    chunks: list[str] = []
    good: list[str] = []
    for s in splits:
        if len(s) < size:
            good.append(s)
        else:
            if good:
                chunks.extend(_merge(good, size, overlap))
                good = []
            chunks.extend(_split(s, rest, size, overlap) if rest else [s])
    if good:
        chunks.extend(_merge(good, size, overlap))
    return chunks


def _merge(splits: list[str], size: int, overlap: int) -> list[str]:
    docs: list[str] = []
    cur: list[str] = []
    total = 0
    for d in splits:
        if total + len(d) > size and cur:
            doc = "".join(cur).strip()
            if doc:
                docs.append(doc)
            while total > overlap or (total + len(d) > size and total > 0):
                total -= len(cur[0])
                cur.pop(0)
        cur.append(d)
        total += len(d)
    doc = "".join(cur).strip()
    if doc:
        docs.append(doc)
    return docs


def run_baseline(pdfs: list[Path], workdir: Path) -> dict[str, float]:
    import lancedb
    import pymupdf
    import torch
    from sentence_transformers import SentenceTransformer

    from models.embedder import WordPieceCounter, minilm_dir

    torch.set_num_threads(2)
    t0 = time.perf_counter()
    c0 = cpu_seconds()
    model = SentenceTransformer(str(minilm_dir()), device="cpu")
    chunks: list[str] = []
    pages = 0
    for f in pdfs:
        with pymupdf.open(f) as doc:
            for page in doc:
                pages += 1
                chunks.extend(_split(page.get_text(), ["\n\n", "\n", " ", ""], 1000, 200))
    t_embed = time.perf_counter()
    vectors = model.encode(chunks, batch_size=32)
    embed_s = time.perf_counter() - t_embed
    db = lancedb.connect(str(workdir / "baseline"))
    rows = [{"text": c, "vector": v.tolist()} for c, v in zip(chunks, vectors, strict=True)]
    db.create_table("docs", data=rows)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - c0
    counts = WordPieceCounter(minilm_dir())(chunks)
    truncated = sum(1 for n in counts if n > 254)
    pieces = float(sum(min(n, 254) for n in counts))
    return {
        "wall_s": wall,
        "pages": pages,
        "passages": len(chunks),
        "pages_per_s": pages / wall,
        "passages_per_s": len(chunks) / wall,
        "embed_share": embed_s / wall,
        "truncated_passages": truncated,
        "truncated_share": truncated / max(len(chunks), 1),
        "word_pieces_embedded": pieces,
        "embedder_word_pieces": pieces,  # no headers: the same figure
        "cpu_s": cpu,
        "cores_busy": cpu / wall,
    }


# ------------------------------------------------------------------ Sourcebook


class EmbedClock:
    """Times the real embedder's ``embed`` calls (patched on the instance, so the library still
    sees the embedder's own type and runs extraction in its child process, as the app does)."""

    def __init__(self, embedder: object) -> None:
        self.seconds = 0.0
        self.texts: list[str] = []  # counted after the run, outside the timed part
        inner = embedder.embed  # type: ignore[attr-defined]

        def embed(texts):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = inner(texts)
            self.seconds += time.perf_counter() - t
            self.texts.extend(texts)
            return out

        embedder.embed = embed  # type: ignore[attr-defined]


def make_embedder(runtime: str) -> object:
    """The embedder the app builds for this runtime setting."""
    from core.settings import models_cache_dir
    from models.embedder import OnnxEmbedder, SentenceTransformerEmbedder

    if runtime == "torch":
        return SentenceTransformerEmbedder(threads=2)
    return OnnxEmbedder(models_cache_dir(), threads=2, quantized=runtime == "onnx-int8")


def run_sourcebook(pdfs: list[Path], home: Path, runtime: str) -> dict[str, float]:
    from core.service import Sourcebook

    t0 = time.perf_counter()
    c0 = cpu_seconds()
    embedder = make_embedder(runtime)
    clock = EmbedClock(embedder)
    app = Sourcebook(home, embedder=embedder)  # type: ignore[arg-type]
    changes = app.add(pdfs)
    wall = time.perf_counter() - t0
    docs = app.documents()
    pages = sum(d.page_count for d in docs)
    passages = sum(d.passage_count for d in docs)
    lib = app.library
    counts = [p.token_count for d in docs for p in lib.store.get_document_passages(d.doc_id)]
    given = embedder.count_tokens(clock.texts)  # type: ignore[attr-defined]
    app.close()  # ends the extraction process, so its CPU time counts below
    cpu = cpu_seconds() - c0
    return {
        "wall_s": wall,
        "pages": pages,
        "passages": passages,
        "pages_per_s": pages / wall,
        "passages_per_s": passages / wall,
        "embed_share": clock.seconds / wall,
        "truncated_passages": sum(1 for n in counts if n > 254),
        "failed": len(changes.failed),
        "word_pieces_embedded": float(sum(counts)),
        "embedder_word_pieces": float(sum(min(n, 254) for n in given)),
        "cpu_s": cpu,
        "cores_busy": cpu / wall,
    }


def cpu_seconds() -> float:
    """CPU time of this process and its ended children so far (user + system, every thread;
    the PDF extraction process counts once it has ended)."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def children_peak_rss_mb() -> float:
    """The largest peak RSS of any ended child (the extraction process)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def time_to_keyword_search(workdir: Path, runtime: str) -> dict[str, float]:
    """Seconds from `add` until a 500-page PDF answers a keyword search."""
    import threading

    import pymupdf

    from core.service import Sourcebook

    pdf = workdir / "big500.pdf"
    doc = pymupdf.open()
    for i in range(500):
        page = doc.new_page()
        body = (
            f"Section {i}. The quarterly review of programme {i} found that spending rose "
            f"by {i % 17} percent while staffing fell. Marker token zebra{i}. " * 6
        )
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), body, fontsize=10)
    doc.save(pdf)
    app = Sourcebook(workdir / "home500", embedder=make_embedder(runtime))  # type: ignore[arg-type]
    app.embedder.embed(["warm up"])
    found = threading.Event()
    t0 = time.perf_counter()
    adder = threading.Thread(target=lambda: app.add([pdf]))
    adder.start()
    latency = float("nan")
    while adder.is_alive() or not found.is_set():
        hits = app.search("zebra499", mode="keyword", k=1)
        if hits:
            latency = time.perf_counter() - t0
            found.set()
            break
        time.sleep(0.05)
    total_add = float("nan")
    adder.join()
    total_add = time.perf_counter() - t0
    app.close()
    return {"keyword_searchable_s": latency, "fully_indexed_s": total_add}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="Runs of each pipeline (median).")
    ap.add_argument(
        "--runtime",
        default="onnx-int8",
        choices=["torch", "onnx", "onnx-int8"],
        help="Sourcebook's embedder runtime (setting models.embedder_runtime; default: the "
        "app's default).",
    )
    args = ap.parse_args()
    if not args.pdfs.exists():
        print(f"no PDFs at {args.pdfs}; pass --pdfs DIR", file=sys.stderr)
        return 2
    from core.eval_metrics import portable_path

    pdfs = sorted(args.pdfs.glob("*.pdf"))
    # relative to the project or ../shared: a committed result names no one's machine
    results: dict[str, object] = {"pdfs": len(pdfs), "dir": portable_path(str(args.pdfs.resolve()))}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs = []
        for r in range(args.repeat):
            reset_peak_rss()
            run = run_sourcebook(pdfs, work / f"sb{r}", args.runtime)
            run["peak_rss_mb"] = peak_rss_mb()
            # Its own process: an upper bound for the two together is the sum of the peaks.
            run["extractor_peak_rss_mb"] = children_peak_rss_mb()
            runs.append(run)
            print(f"sourcebook run {r + 1}: {run['wall_s']:.1f} s", flush=True)
        ours = {k: statistics.median(float(x[k]) for x in runs) for k in runs[0]}
        results["sourcebook"] = ours
        results["runtime"] = args.runtime
        results["time_to_keyword"] = time_to_keyword_search(work, args.runtime)
        if not args.skip_baseline:
            base_runs = []
            for r in range(args.repeat):
                reset_peak_rss()
                run = run_baseline(pdfs, work / f"base{r}")
                run["peak_rss_mb"] = peak_rss_mb()
                base_runs.append(run)
                print(f"baseline run {r + 1}: {run['wall_s']:.1f} s", flush=True)
            base = {k: statistics.median(float(x[k]) for x in base_runs) for k in base_runs[0]}
            results["baseline"] = base
            results["speedup"] = base["wall_s"] / ours["wall_s"]
            results["cpu_ratio"] = base["cpu_s"] / ours["cpu_s"]
    print(json.dumps(results, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = (
        "ingest_speed.json" if args.runtime == "onnx-int8" else f"ingest_speed_{args.runtime}.json"
    )
    (RESULTS / name).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
