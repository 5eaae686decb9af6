"""Page rendering for the evidence viewer: one PDF page to pixels with PyMuPDF.

The viewer draws the cited words' boxes (PDF points, origin top-left, PyMuPDF's convention, see
``graph.schemas.Word``) over the rendered image, so the image must be rendered from the very same
bytes the boxes came from. :func:`file_sha256` lets the caller check that the file at a
document's source path still has the content hash it had when it was added.

Threading: call from a worker thread, never the UI thread (a large page takes tens of ms).
PyMuPDF is not made for concurrent use, so renders are serialised by a module lock; a render
opens and closes its own document, so nothing is shared between calls.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import pymupdf
from pydantic import BaseModel, Field

from core.errors import CorruptFileError, EncryptedFileError, NotFoundError
from core.ingest.pdfrepair import open_pdf

logger = logging.getLogger(__name__)

MIN_ZOOM = 0.05
MAX_ZOOM = 8.0
MAX_PIXELS = 40_000_000  # a render larger than this is scaled down (memory, not quality)

_render_lock = threading.Lock()
_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int], str] = {}


class RenderedPage(BaseModel):
    """One rendered page as raw RGB pixels (PNG on request).

    ``width``/``height`` are the page's size in PDF points; the image is ``pixel_width`` x
    ``pixel_height`` (``round(width * zoom)``; ``zoom`` may be lower than asked when the render
    would exceed ``MAX_PIXELS``). ``samples`` holds rows of 3-byte RGB pixels, ``stride`` bytes
    apart. Raw pixels, not PNG, cross to the viewer: compressing and decompressing a page costs
    ~80 + 50 ms at screen zoom, time during which PyMuPDF holds the GIL and the UI would stall.
    """

    doc_id: str = ""
    page_index: int = Field(description="0-based page index (people see page_index + 1).")
    page_count: int
    zoom: float = Field(description="Pixels per PDF point of the image.")
    width: float
    height: float
    pixel_width: int
    pixel_height: int
    stride: int
    samples: bytes = Field(repr=False)

    def png(self) -> bytes:
        """The page as PNG bytes (encoded now; slow for large pages: not on the UI thread)."""
        pix = pymupdf.Pixmap(
            pymupdf.csRGB, self.pixel_width, self.pixel_height, self.samples, False
        )
        data: bytes = pix.tobytes("png")
        return data


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, cached by (path, size, mtime) so a check costs one stat."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _hash_lock:
        _hash_cache[key] = digest
    return digest


def render_pdf_page(path: Path, page_index: int, zoom: float, *, doc_id: str = "") -> RenderedPage:
    """Render page ``page_index`` (0-based) of the PDF at ``path`` at ``zoom`` pixels per point.

    Raises ``NotFoundError`` when the file or the page does not exist, ``EncryptedFileError`` or
    ``CorruptFileError`` when PyMuPDF cannot open or draw it.
    """
    if not path.is_file():
        raise NotFoundError(
            f"The original file {path} is not there any more.",
            hint="Move it back, or add it again from its new place.",
        )
    zoom = min(max(float(zoom), MIN_ZOOM), MAX_ZOOM)
    with _render_lock:
        try:
            # opened as the ingest reader opens it, so a damaged file's recovered pages are
            # numbered the same here as in the passages that cite them
            doc = open_pdf(path).doc
        except Exception as exc:  # pymupdf raises several unrelated types
            raise CorruptFileError(f"Cannot open {path.name}: {exc}", path=path) from exc
        try:
            if doc.needs_pass:
                raise EncryptedFileError(f"{path.name} is password-protected.", path=path)
            count = doc.page_count
            if not 0 <= page_index < count:
                raise NotFoundError(
                    f"{path.name} has no page {page_index + 1} (it has {count}).",
                    hint="The file may have changed since it was added; add it again.",
                )
            page = doc[page_index]
            rect = page.rect
            pixels = rect.width * rect.height * zoom * zoom
            if pixels > MAX_PIXELS:
                zoom *= (MAX_PIXELS / pixels) ** 0.5
            try:
                pix = page.get_pixmap(
                    matrix=pymupdf.Matrix(zoom, zoom), alpha=False, colorspace=pymupdf.csRGB
                )
                samples = pix.samples
            except Exception as exc:
                raise CorruptFileError(
                    f"Cannot draw page {page_index + 1} of {path.name}: {exc}", path=path
                ) from exc
            logger.debug(
                "rendered %s p%d at %.2f: %dx%d px",
                path.name,
                page_index,
                zoom,
                pix.width,
                pix.height,
            )
            return RenderedPage(
                doc_id=doc_id,
                page_index=page_index,
                page_count=count,
                zoom=zoom,
                width=rect.width,
                height=rect.height,
                pixel_width=pix.width,
                pixel_height=pix.height,
                stride=pix.stride,
                samples=samples,
            )
        finally:
            doc.close()
