"""Sourcebook's core: the library, ingestion, research runs and the service facade."""

import sys

# PyMuPDF 2 imports its layout analyser (``pymupdf.layout``, an ONNX model: ~0.2 s and ~50 MB
# in every process that reads a PDF) whenever it is installed; only ``Page.get_layout`` uses
# it, and Sourcebook does not. A ``None`` entry makes that optional import fail, as pymupdf
# allows. Set here, before any module of ``core`` imports pymupdf.
sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
