"""Character error rate of Sourcebook's OCR on the shared scans.

Reads ``../shared/eval/pdfs/scanned/linn.pdf`` through the real ingestion path
(``core.ingest.extract_file``: render -> Tesseract -> blocks in reading order -> document text)
and compares the document text with ``linn.txt``. ``skew.pdf`` (the same page tilted ~1.7
degrees) and ``cardinal.pdf`` (the same page four times, turned 0/90/180/270 degrees) are
measured against the same reference, page by page (each page's words in reading order).

CER = Levenshtein distance / reference length, after normalising both texts: Unicode NFKC, and
every run of whitespace (spaces, line and paragraph breaks) made a single space. The
"folded" figure additionally maps typographic dashes and quotes to ASCII and drops bullet
glyphs (the reference itself writes bullets as "0" and some hyphens as em dashes).

``--mupdf`` also measures PyMuPDF's built-in OCR (``page.get_textpage_ocr(full=True)``) on
linn.pdf, the alternative this project did not take. Prints the figures and saves
``bench/results/ocr_cer.json``. Target: CER < 5% on linn.pdf.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from core.ingest import extract_file  # noqa: E402
from core.ingest.ocr import char_error_rate, ocr_engine, probe_tesseract  # noqa: E402
from core.settings import IngestSettings  # noqa: E402

SCANNED = REPO.parent / "shared" / "eval" / "pdfs" / "scanned"
RESULTS = REPO / "bench" / "results" / "ocr_cer.json"
_FOLD = str.maketrans({"—": "-", "–": "-", "‘": "'", "’": "'", "“": '"', "”": '"'})
_BULLETS = re.compile(r"(?:(?<=\s)|^)[0•¢©*e«]\s(?=[A-Z])")


def folded(text: str) -> str:
    return _BULLETS.sub("", text.translate(_FOLD))


def _count(texts: Any) -> list[int]:
    return [len(t.split()) + 2 for t in texts]


def measure(name: str, ref: str, settings: IngestSettings) -> dict[str, Any]:
    t0 = time.perf_counter()
    doc = extract_file(SCANNED / f"{name}.pdf", settings=settings, count_tokens=_count)
    seconds = time.perf_counter() - t0
    pages: dict[int, list[str]] = {}
    for p in doc.passages:
        for w in p.words:
            pages.setdefault(w.page_index, []).append(p.text[w.start : w.end])
    per_page = [
        {
            "page": i + 1,
            "cer": round(char_error_rate(ref, " ".join(words)), 4),
            "cer_folded": round(char_error_rate(folded(ref), folded(" ".join(words))), 4),
        }
        for i, words in sorted(pages.items())
    ]
    out: dict[str, Any] = {
        "pages": doc.document.page_count,
        "seconds": round(seconds, 2),
        "seconds_per_page": round(seconds / max(doc.document.page_count, 1), 2),
        "per_page": per_page,
    }
    if doc.document.page_count == 1:
        out["cer_document_text"] = round(char_error_rate(ref, doc.text), 4)
        out["cer_document_text_folded"] = round(char_error_rate(folded(ref), folded(doc.text)), 4)
    return out


def mupdf_baseline(ref: str) -> dict[str, Any]:
    import pymupdf

    doc = pymupdf.open(SCANNED / "linn.pdf")
    page = doc[0]
    t0 = time.perf_counter()
    tp = page.get_textpage_ocr(dpi=300, full=True)
    text = page.get_text(textpage=tp)
    return {
        "cer": round(char_error_rate(ref, text), 4),
        "cer_folded": round(char_error_rate(folded(ref), folded(text)), 4),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mupdf", action="store_true", help="Also measure PyMuPDF's built-in OCR.")
    ap.add_argument("--quick", action="store_true", help="linn.pdf only.")
    args = ap.parse_args()
    if not (SCANNED / "linn.pdf").exists():
        print(f"missing {SCANNED / 'linn.pdf'}; nothing to measure")
        return 1
    settings = IngestSettings()
    engine, why = ocr_engine(settings)
    if engine is None:
        print(f"OCR unavailable: {why}")
        return 1
    ref = (SCANNED / "linn.txt").read_text(encoding="utf-8")
    info = probe_tesseract()
    results: dict[str, Any] = {
        "tesseract": info.version,
        "settings": {
            "dpi": settings.ocr_dpi,
            "psm": settings.ocr_psm,
            "languages": settings.ocr_languages,
            "workers": settings.ocr_workers,
        },
        "normalisation": "NFKC; whitespace runs -> one space; folded: also dashes/quotes to "
        "ASCII and bullet glyphs dropped",
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "files": {},
    }
    names = ["linn"] if args.quick else ["linn", "skew", "cardinal"]
    for name in names:
        r = measure(name, ref, settings)
        results["files"][name] = r
        pages = ", ".join(f"p{p['page']} {p['cer']:.2%}" for p in r["per_page"])
        extra = (
            f"  document text CER {r['cer_document_text']:.2%}"
            f" (folded {r['cer_document_text_folded']:.2%})"
            if "cer_document_text" in r
            else ""
        )
        print(f"{name:9s} {r['pages']} page(s) in {r['seconds']:.1f} s: {pages}{extra}")
    if args.mupdf:
        b = mupdf_baseline(ref)
        results["mupdf_builtin_linn"] = b
        print(f"PyMuPDF built-in OCR on linn: CER {b['cer']:.2%} in {b['seconds']:.1f} s")
    linn = results["files"]["linn"]["cer_document_text"]
    results["target_met"] = linn < 0.05
    print(f"linn.pdf CER {linn:.2%} (target < 5%): {'met' if linn < 0.05 else 'NOT met'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"saved {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
