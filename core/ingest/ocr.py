"""OCR of PDF pages that have no text layer (scans), with Tesseract.

PyMuPDF renders each image-only page to a grayscale PNG; the ``tesseract`` program reads it and
returns TSV: every word with its box and confidence, grouped into Tesseract's blocks, paragraphs
and lines *in reading order*. The boxes are mapped back into the page's (unrotated) coordinate
space, the same space the text-layer reader uses, so a citation into a scan highlights the right
words on the page image.

Why the ``tesseract`` program and not MuPDF's built-in engine (``page.get_textpage_ocr``): on
``linn.pdf`` MuPDF's engine lost a whole line and regrouped lines across the two columns (CER
38% against the reference), it offers no page-segmentation choice and no orientation detection
(a page scanned upside down came out as mirrored nonsense), and it runs under the GIL. The
program with ``--psm 1`` (automatic layout *with* orientation and script detection) reads the
same page with CER under 1%, turns pages scanned at 90/180/270 degrees upright itself (its word
boxes stay in the input image's frame), and finds text lines along a skewed baseline (``skew.pdf``
reads as well as the straight page). Pages rotated with ``/Rotate`` are rendered as displayed
and mapped back through ``page.derotation_matrix``.

Each Tesseract process runs with ``OMP_THREAD_LIMIT=1``: its OpenMP threads spin-wait, and on a
busy two-core machine a two-thread run measured 20x slower than a one-thread run. Pages are
OCRed by up to ``ocr_workers`` processes at once; rendering stays on the calling thread.

When the program or its language data is missing, :func:`ocr_engine` says so (with the command
that installs it) and the PDF reader keeps reporting the pages as having no text layer.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import shutil
import statistics
import subprocess
import time
import unicodedata
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pymupdf

from core.ingest.chunking import WordBox
from core.settings import IngestSettings

logger = logging.getLogger(__name__)

INSTALL_HINT = "install Tesseract to read it (`apt-get install tesseract-ocr`)"
_MAX_DPI = 600
_MAX_PIXELS = 36_000_000
_MIN_CONF = 0.0  # Tesseract marks non-words with -1
_MIN_SKEW = 0.5  # degrees; Tesseract reads smaller tilts well by itself
_MAX_SKEW = 15.0
_MIN_OSD_CONF = 2.0
_SKEW_SAMPLES = 150_000
_HEADING_RATIO = 1.3
_CURRENCY = frozenset({"$", "€", "£", "¥"})

OcrProgress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each OCRed page; it may raise to cancel."""


class OcrPageError(RuntimeError):
    """Tesseract failed on one page (crash, timeout, unreadable output)."""


@dataclass(frozen=True, slots=True)
class TesseractInfo:
    """What :func:`probe_tesseract` found."""

    binary: str | None
    version: str | None
    languages: frozenset[str]
    reason: str | None = None  # why OCR is unavailable; None when it is available


@dataclass(slots=True)
class OcrBlock:
    """One Tesseract paragraph in reading order: a heading or a paragraph of text.

    ``words`` are :data:`WordBox` tuples whose offsets point into ``text``; ``size`` is the
    median line height in points (a stand-in for the font size, used to rank headings).
    """

    kind: str
    page: int
    text: str
    words: list[WordBox]
    size: float
    rows: int


@dataclass(slots=True)
class OcrPage:
    """The OCR result of one page."""

    page_index: int
    blocks: list[OcrBlock] = field(default_factory=list)
    chars: int = 0
    dpi: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class _Render:
    """A rendered page and the matrix from its pixels to unrotated page coordinates."""

    page_index: int
    png: bytes
    dpi: int
    to_page: pymupdf.Matrix
    angle: float = 0.0  # degrees the page was turned before OCR (orientation + deskew)


@functools.lru_cache(maxsize=8)
def probe_tesseract(binary: str = "tesseract") -> TesseractInfo:
    """Find the ``tesseract`` program and its languages (cached per binary name)."""
    path = shutil.which(binary)
    if path is None:
        return TesseractInfo(
            None, None, frozenset(), f"Tesseract OCR is not installed; {INSTALL_HINT}"
        )
    try:
        ver = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        langs = subprocess.run(
            [path, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return TesseractInfo(path, None, frozenset(), f"Tesseract at {path} does not run ({exc})")
    first = (ver.stdout or ver.stderr).strip().splitlines()
    version = first[0] if first else None
    found = frozenset(
        ln.strip()
        for ln in langs.stdout.splitlines()
        if ln.strip() and not ln.startswith("List of available")
    )
    if langs.returncode != 0 or not found:
        return TesseractInfo(
            path, version, found, f"Tesseract has no language data; {INSTALL_HINT}"
        )
    return TesseractInfo(path, version, found)


def ocr_engine(settings: IngestSettings) -> tuple[OcrEngine | None, str]:
    """The engine the settings ask for, or ``(None, why not)`` ending with what to do."""
    if not settings.ocr_enabled:
        return None, "OCR is off (setting `ingest.ocr_enabled`)"
    info = probe_tesseract()
    if info.reason is not None or info.binary is None:
        return None, info.reason or f"Tesseract OCR is not installed; {INSTALL_HINT}"
    wanted = [lang for lang in re.split(r"[+,\s]+", settings.ocr_languages) if lang]
    missing = [lang for lang in wanted if lang not in info.languages]
    if missing or not wanted:
        pkgs = " ".join(f"tesseract-ocr-{m}" for m in missing) or "tesseract-ocr-eng"
        return None, (
            f"Tesseract has no language data for {'+'.join(missing) or 'the set languages'}; "
            f"install it (`apt-get install {pkgs}`) or change `ingest.ocr_languages`"
        )
    psm = settings.ocr_psm or 1  # 0 is orientation detection only: no text
    if psm in (1, 12) and "osd" not in info.languages:
        psm = 3 if psm == 1 else 11  # no orientation data: layout analysis without OSD
    return (
        OcrEngine(
            binary=info.binary,
            languages="+".join(wanted),
            dpi=settings.ocr_dpi,
            psm=psm,
            workers=settings.ocr_workers,
            timeout_s=settings.ocr_page_timeout_s,
        ),
        "",
    )


class OcrEngine:
    """Runs the ``tesseract`` program on rendered pages.

    Exists so the PDF reader has one object to ask for OCR, built once per document from the
    settings. Threading contract: immutable after construction; :meth:`ocr_pages` must be called
    from the thread that owns the PyMuPDF document (it renders there) and runs the Tesseract
    processes on a private pool of ``workers`` threads that it shuts down before returning.
    """

    def __init__(
        self,
        *,
        binary: str,
        languages: str = "eng",
        dpi: int = 300,
        psm: int = 1,
        workers: int = 1,
        timeout_s: float = 180.0,
    ) -> None:
        self.binary = binary
        self.languages = languages
        self.dpi = dpi
        self.psm = psm
        self.workers = max(1, workers)
        self.timeout_s = timeout_s

    # ------------------------------------------------------------------ rendering

    def _page_dpi(self, page: pymupdf.Page) -> int:
        """The settings' dpi, raised up to the scan's own resolution (at most 600 dpi)."""
        dpi = float(self.dpi)
        try:
            infos = page.get_image_info()
        except Exception:
            infos = []
        area = abs(page.rect) or 1.0
        for info in infos:
            bbox = pymupdf.Rect(info["bbox"])
            if abs(bbox & page.rect) < 0.2 * area or bbox.is_empty:
                continue
            long_px = max(int(info.get("width", 0)), int(info.get("height", 0)))
            long_pt = max(bbox.width, bbox.height)
            if long_px and long_pt:
                dpi = max(dpi, min(_MAX_DPI, 72.0 * long_px / long_pt))
        w_in, h_in = page.rect.width / 72.0, page.rect.height / 72.0
        if w_in * h_in * dpi * dpi > _MAX_PIXELS:
            dpi = (_MAX_PIXELS / max(w_in * h_in, 1e-6)) ** 0.5
        return max(72, int(dpi))

    def _render(self, page: pymupdf.Page) -> _Render:
        """Render the page upright and straight for Tesseract.

        A straight upright page (the common case) is rendered as it is. When MuPDF's skew
        detector sees tilted lines, the page may also be sideways or upside down (the detector
        is only meaningful on upright text), so Tesseract's orientation detection runs on a
        150-dpi copy first; the page is then turned upright and the remaining skew removed.
        """
        dpi = self._page_dpi(page)
        angle = 0.0
        probe_dpi = min(dpi, 150)
        probe = page.get_pixmap(dpi=probe_dpi, colorspace=pymupdf.csGRAY, alpha=False)
        skew = _detect_skew(probe)
        if abs(skew) >= _MIN_SKEW:
            turn = self._orientation(probe.tobytes("png"), probe_dpi)
            if turn is not None:
                if turn:
                    z = probe_dpi / 72.0
                    upright = page.get_pixmap(
                        matrix=pymupdf.Matrix(z, z).prerotate(turn),
                        colorspace=pymupdf.csGRAY,
                        alpha=False,
                    )
                    skew = _detect_skew(upright)
                angle = float(turn)
                if _MIN_SKEW <= abs(skew) <= _MAX_SKEW:
                    angle -= skew
        z = dpi / 72.0
        m = pymupdf.Matrix(z, z).prerotate(angle) if angle else pymupdf.Matrix(z, z)
        pix = page.get_pixmap(matrix=m, colorspace=pymupdf.csGRAY, alpha=False)
        # pixel -> device (the pixmap may start at a negative origin) -> page -> unrotated page
        to_page = pymupdf.Matrix(1, 0, 0, 1, pix.x, pix.y) * ~m * page.derotation_matrix
        if angle:
            logger.debug("OCR page %d turned by %.2f degrees", (page.number or 0) + 1, angle)
        return _Render(
            page_index=page.number or 0,
            png=pix.tobytes("png"),
            dpi=dpi,
            to_page=to_page,
            angle=angle,
        )

    def _orientation(self, png: bytes, dpi: int) -> int | None:
        """Degrees to turn the page upright (0/90/180/270), or None if Tesseract is unsure."""
        cmd = [self.binary, "stdin", "stdout", "--psm", "0", "--dpi", str(dpi)]
        try:
            proc = subprocess.run(
                cmd,
                input=png,
                capture_output=True,
                timeout=min(self.timeout_s, 60.0),
                env=dict(os.environ, OMP_THREAD_LIMIT="1"),
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            logger.debug("orientation detection failed: %s", exc)
            return None
        out = proc.stdout.decode("utf-8", "replace")
        rotate = re.search(r"Rotate:\s*(\d+)", out)
        conf = re.search(r"Orientation confidence:\s*([\d.]+)", out)
        if proc.returncode != 0 or rotate is None or conf is None:
            return None
        if float(conf.group(1)) < _MIN_OSD_CONF:
            return None
        return int(rotate.group(1)) % 360

    # ------------------------------------------------------------------ tesseract

    def _run(self, render: _Render) -> tuple[str, float]:
        cmd = [
            self.binary, "stdin", "stdout",
            "-l", self.languages,
            "--psm", str(self.psm),
            "--dpi", str(render.dpi),
            "tsv",
        ]  # fmt: skip
        env = dict(os.environ, OMP_THREAD_LIMIT="1")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                input=render.png,
                capture_output=True,
                timeout=self.timeout_s,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise OcrPageError(f"OCR timed out after {self.timeout_s:.0f} s") from exc
        except OSError as exc:
            raise OcrPageError(f"Tesseract could not be started ({exc})") from exc
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise OcrPageError(
                f"Tesseract failed (exit {proc.returncode}: {err[-1] if err else 'no message'})"
            )
        return proc.stdout.decode("utf-8", "replace"), time.perf_counter() - t0

    def ocr_pages(
        self,
        doc: pymupdf.Document,
        indices: Sequence[int],
        *,
        progress: OcrProgress | None = None,
    ) -> dict[int, OcrPage | OcrPageError]:
        """OCR the given 0-based pages; a page that fails maps to its :class:`OcrPageError`.

        ``progress(done, total)`` runs on the calling thread after each page, in page order;
        an exception it raises (e.g. a cancellation) stops the work and propagates.
        """
        out: dict[int, OcrPage | OcrPageError] = {}
        total = len(indices)
        if not total:
            return out
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sourcebook-ocr")
        try:
            pending: list[tuple[_Render, Future[tuple[str, float]]]] = []
            it = iter(indices)
            done = 0

            def submit_next() -> bool:
                i = next(it, None)
                if i is None:
                    return False
                render = self._render(doc.load_page(i))
                pending.append((render, pool.submit(self._run, render)))
                return True

            for _ in range(self.workers + 1):  # keep every worker busy, one page ahead
                if not submit_next():
                    break
            while pending:
                render, fut = pending.pop(0)
                try:
                    tsv, seconds = fut.result()
                    page = parse_tsv(tsv, render)
                    page.seconds = seconds
                    out[render.page_index] = page
                    logger.debug(
                        "OCR page %d: %d chars at %d dpi in %.1f s",
                        render.page_index + 1, page.chars, render.dpi, seconds,
                    )  # fmt: skip
                except OcrPageError as exc:
                    logger.warning("OCR of page %d failed: %s", render.page_index + 1, exc)
                    out[render.page_index] = exc
                done += 1
                submit_next()
                if progress is not None:
                    progress(done, total)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return out


# ---------------------------------------------------------------------- TSV -> blocks


@dataclass(slots=True)
class _Line:
    words: list[tuple[float, float, float, float, str]]  # page coordinates
    height_pt: float


def _to_page(render: _Render, left: int, top: int, width: int, height: int) -> pymupdf.Rect:
    r: pymupdf.Rect = pymupdf.Rect(left, top, left + width, top + height) * render.to_page
    r.normalize()
    return r


def _detect_skew(pix: pymupdf.Pixmap) -> float:
    """The tilt of the text lines in degrees (positive: lines rise to the right); 0 if unsure.

    Projection profiles: the dark pixels (Otsu threshold) are projected onto the vertical axis
    along each candidate angle; straight text lines give the peakiest profile (the largest sum
    of squared bin counts). Coarse 0.5-degree steps over +-15 degrees, then 0.05-degree steps.
    Only meaningful on upright text. (MuPDF's ``fz_detect_skew`` crashed the process on a small
    pixmap, so it is not used.)
    """
    if pix.n != 1 or pix.width < 32 or pix.height < 32:
        return 0.0
    a = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)[:, : pix.width]
    hist = np.bincount(a.ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256, dtype=np.float64)
    w0 = np.cumsum(hist)
    w1 = a.size - w0
    m_cum = np.cumsum(hist * levels)
    m0 = m_cum / np.maximum(w0, 1.0)
    m1 = (m_cum[-1] - m_cum) / np.maximum(w1, 1.0)
    threshold = int(np.argmax(w0 * w1 * (m0 - m1) ** 2))
    ys, xs = np.nonzero(a <= threshold)
    if ys.size < 200 or ys.size > 0.5 * a.size:
        return 0.0
    if ys.size > _SKEW_SAMPLES:
        pick = np.random.default_rng(0).choice(ys.size, _SKEW_SAMPLES, replace=False)
        ys, xs = ys[pick], xs[pick]
    yf = ys.astype(np.float64)
    xf = xs.astype(np.float64) - pix.width / 2.0

    def peakiness(deg: float) -> float:
        rows = np.round(yf + xf * math.tan(math.radians(deg))).astype(np.int64)
        counts = np.bincount(rows - rows.min())
        return float(np.dot(counts, counts))

    coarse = max((float(d) for d in np.arange(-15.0, 15.001, 0.5)), key=peakiness)
    fine = max((coarse + k * 0.05 for k in range(-10, 11)), key=peakiness)
    return -round(fine, 2)


def parse_tsv(tsv: str, render: _Render) -> OcrPage:
    """Tesseract TSV -> blocks in Tesseract's reading order, with word boxes in page space."""
    rows: list[tuple[int, int, int, int, int, int, int, int, float, str]] = []
    for raw in tsv.splitlines()[1:]:
        cols = raw.split("\t", 11)
        if len(cols) < 12:
            continue
        try:
            nums = [int(c) for c in cols[:10]]
            conf = float(cols[10])
        except ValueError:
            continue
        level, _pg, block, par, line, _w, left, top, width, height = nums
        rows.append((level, block, par, line, left, top, width, height, conf, cols[11].strip()))
    # Tesseract turns a page scanned sideways upright itself but reports boxes in the image's
    # frame: there, text lines are taller than wide and a line's height is its box's width.
    line_boxes = [(r[6], r[7]) for r in rows if r[0] == 4]
    sideways = sum(h > w for w, h in line_boxes) > sum(w >= h for w, h in line_boxes)
    line_px = {(r[1], r[2], r[3]): (r[6] if sideways else r[7]) for r in rows if r[0] == 4}
    paragraphs: dict[tuple[int, int], dict[int, _Line]] = {}
    order: list[tuple[int, int]] = []
    for level, block, par, line, left, top, width, height, conf, text in rows:
        if level != 5 or not text or conf < _MIN_CONF:
            continue
        key = (block, par)
        if key not in paragraphs:
            paragraphs[key] = {}
            order.append(key)
        lines = paragraphs[key]
        if line not in lines:
            px = line_px.get((block, par, line), height)
            lines[line] = _Line([], px / (render.dpi / 72.0))
        r = _to_page(render, left, top, width, height)
        lines[line].words.append((r.x0, r.y0, r.x1, r.y1, text))
    result = OcrPage(page_index=render.page_index, dpi=render.dpi)
    heights = [ln.height_pt for key in order for ln in paragraphs[key].values() if ln.words]
    body = statistics.median(heights) if heights else 0.0
    for key in order:
        par_lines = [paragraphs[key][n] for n in sorted(paragraphs[key])]
        built = _build_block(par_lines, render.page_index, body)
        if built is not None:
            result.blocks.append(built)
            result.chars += sum(len(w[4]) for ln in par_lines for w in ln.words)
    return result


def _build_block(lines: list[_Line], page: int, body: float) -> OcrBlock | None:
    parts: list[str] = []
    words: list[WordBox] = []
    length = 0
    for ln in lines:
        if not ln.words:
            continue
        if parts:
            prev = parts[-1]
            nxt = ln.words[0][4]
            # "func-" + "tion": keep the hyphen, drop the line break (as the PDF reader does)
            glue = prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha()
            sep = "" if glue and nxt[:1].islower() else " "
            parts.append(sep)
            length += len(sep)
        for k, (x0, y0, x1, y1, t) in enumerate(ln.words):
            if k:
                parts.append(" ")
                length += 1
            words.append((page, x0, y0, x1, y1, length, length + len(t)))
            parts.append(t)
            length += len(t)
    if not words:
        return None
    text = "".join(parts)
    size = statistics.median(ln.height_pt for ln in lines if ln.words)
    kind = "paragraph"
    if (
        body > 0
        and size >= _HEADING_RATIO * body
        and len(lines) <= 3
        and len(text) <= 160
        and sum(c.isalpha() for c in text) >= 2
        and not text.endswith((",", ";", ":"))
    ):
        kind = "heading"
    return OcrBlock(kind, page, text, words, round(size * 2) / 2, len(lines))


# ---------------------------------------------------------------------- measuring


def normalise_for_cer(text: str) -> str:
    """Unicode NFKC, then every run of whitespace (spaces, line and paragraph breaks) made one
    space, ends stripped: layout whitespace is not a recognition error."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def char_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance / reference length, after :func:`normalise_for_cer` on both.

    Bit-parallel (Myers/Hyyro) edit distance on Python integers: linear in the hypothesis
    length, fast enough for whole pages.
    """
    ref, hyp = normalise_for_cer(reference), normalise_for_cer(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    if not hyp:
        return 1.0
    peq: dict[str, int] = {}
    for i, ch in enumerate(ref):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    m = len(ref)
    mask = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for ch in hyp:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score / m
