"""Damaged and cut-short PDFs: opening them the same way for reading and rendering, and saying
which pages could be read.

MuPDF repairs a file whose cross-reference table is broken (the usual state of an interrupted
download) by scanning it for objects; it gives up when the file ends inside an object, so
:func:`open_pdf` then tries again without that last, incomplete object. What survives depends
on where the writer put things:

- when the page tree is near the start (simple writers), MuPDF keeps every page: pages whose
  objects were past the cut load as empty pages without a page object, and the page cut in the
  middle loads with what its content stream still holds;
- when the catalog and the page tree sat at the end of the file, often inside compressed object
  streams (most PDF 1.5+ writers), the repaired document has no pages at all although many page
  objects survived. :func:`open_pdf` then builds a new page tree over the page objects it finds,
  in object order, with a linearized file's first page (``/O``) first, as linearization puts it
  first in the file. The page numbers are then those of the recovered pages, not necessarily
  the original ones, and the reader says so.

How many pages the original had is known when the page tree survived (its ``/Count``), or, with
the tree lost, from the linearization dictionary (``/N``) or a surviving page-tree root's
``/Count``; otherwise it is unknown and the reader does not guess.

The ingest reader and the page renderer both open files through :func:`open_pdf`, so a page
index stored at ingest names the same page when the viewer draws it. In a repaired file a page
counts as lost when its page object or all of its content streams are gone, or when its text is
mostly control or replacement characters (the fonts' character maps were past the cut);
:func:`repair_problem` and :func:`unreadable_message` put the outcome into words.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pymupdf

logger = logging.getLogger(__name__)

_TAIL = 1024  # readers look for "%%EOF" in the last kilobyte (PDF 1.7, Annex H)
_LINEARIZED = re.compile(rb"/Linearized\b(.{0,400}?)>>", re.S)
_DAMAGE = re.compile(
    r"premature end|length incorrect|syntax error|zlib|read error|missing|cannot find|"
    r"cannot load|broken|truncated",
    re.IGNORECASE,
)
# the standard security handler's dictionary: an encrypted file's key is derived from it
_STANDARD_SECURITY = re.compile(rb"/Filter\s*/Standard\b")


@dataclass(slots=True)
class OpenedPdf:
    """A PyMuPDF document plus what opening it had to do (the caller closes ``doc``)."""

    doc: pymupdf.Document
    repaired: bool = False
    truncated: bool = False
    """The bytes do not end with ``%%EOF``: the file was cut short."""
    rebuilt: bool = False
    """The page tree was lost; ``doc``'s pages are the page objects found, in file order."""
    expected_pages: int | None = None
    """How many pages the original file had, when that can be known."""


def cut_short(source: bytes | Path) -> bool:
    """Whether the file stops before its end-of-file marker (an interrupted download or copy)."""
    return b"%%EOF" not in _tail(source)


def _tail(source: bytes | Path) -> bytes:
    if isinstance(source, bytes):
        return source[-_TAIL:]
    with source.open("rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - _TAIL))
        return f.read()


def _linearization(data: bytes) -> tuple[int | None, int | None]:
    """(page count ``/N``, first page object ``/O``) of a linearized file, else Nones."""
    m = _LINEARIZED.search(data[:_TAIL])
    if m is None:
        return None, None
    n = re.search(rb"/N\s+(\d+)", m.group(1))
    o = re.search(rb"/O\s+(\d+)", m.group(1))
    return (int(n.group(1)) if n else None), (int(o.group(1)) if o else None)


def _type(doc: pymupdf.Document, xref: int) -> str:
    try:
        kind, value = doc.xref_get_key(xref, "Type")
    except Exception:  # an object MuPDF cannot parse is no page either
        return ""
    return str(value) if kind == "name" else ""


def _root_count(doc: pymupdf.Document, xref: int) -> int | None:
    """The ``/Count`` of a page-tree node that has no parent, else None."""
    try:
        if doc.xref_get_key(xref, "Parent")[0] != "null":
            return None
        kind, value = doc.xref_get_key(xref, "Count")
    except Exception:
        return None
    return int(value) if kind == "int" else None


def _rebuild_page_tree(doc: pymupdf.Document, data: bytes) -> OpenedPdf | None:
    """A new document whose page tree lists the page objects found in ``doc``, or None."""
    n_pages, first = _linearization(data)
    pages: list[int] = []
    counts: list[int] = []
    for xref in range(1, doc.xref_length()):
        kind = _type(doc, xref)
        if kind == "/Page":
            pages.append(xref)
        elif kind == "/Pages":
            # only a root counts all pages; an inner node of the tree counts its own
            root_count = _root_count(doc, xref)
            if root_count is not None:
                counts.append(root_count)
    if not pages:
        return None
    if first in pages:
        pages.remove(first)
        pages.insert(0, first)
    try:
        root = doc.get_new_xref()
        kids = " ".join(f"{x} 0 R" for x in pages)
        doc.update_object(root, f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
        for xref in pages:
            doc.xref_set_key(xref, "Parent", f"{root} 0 R")
        catalog = doc.get_new_xref()
        doc.update_object(catalog, f"<< /Type /Catalog /Pages {root} 0 R >>")
        doc.xref_set_key(-1, "Root", f"{catalog} 0 R")
        rebuilt = pymupdf.open(stream=doc.tobytes(), filetype="pdf")
    except Exception as exc:  # the surviving objects may be too broken to write out
        logger.info("could not rebuild the page tree: %s", exc)
        return None
    expected = n_pages if n_pages is not None else max(counts, default=None)
    if expected is not None and expected < rebuilt.page_count:
        expected = None  # a stale or partial count: the honest answer is "unknown"
    return OpenedPdf(rebuilt, repaired=True, rebuilt=True, expected_pages=expected)


def open_pdf(source: bytes | Path) -> OpenedPdf:
    """Open a PDF from bytes or a path, repairing it as described in the module docstring.

    Raises what PyMuPDF raises when the file cannot be opened at all (callers convert it).
    """
    truncated = cut_short(source)
    try:
        if isinstance(source, bytes):
            doc = pymupdf.open(stream=source, filetype="pdf")
        else:
            doc = pymupdf.open(source, filetype="pdf")
    except Exception:
        if not truncated:
            raise
        # MuPDF's repair gives up on a file that ends inside an object; without that last,
        # incomplete object it can rebuild the rest
        data = source if isinstance(source, bytes) else source.read_bytes()
        end = data.rfind(b"endobj")
        if end < 0:
            raise
        doc = pymupdf.open(stream=data[: end + len(b"endobj")] + b"\n", filetype="pdf")
    repaired = bool(doc.is_repaired)
    if not repaired or doc.needs_pass or doc.page_count > 0:
        expected = doc.page_count if repaired else None
        return OpenedPdf(doc, repaired, truncated, expected_pages=expected)
    data = source if isinstance(source, bytes) else source.read_bytes()
    out = _rebuild_page_tree(doc, data)
    if out is None:
        return OpenedPdf(doc, repaired, truncated)
    doc.close()
    out.truncated = truncated
    return out


def page_lost(doc: pymupdf.Document, page: pymupdf.Page) -> bool:
    """True when the page's object, or every content stream it names, did not survive."""
    if _type(doc, page.xref) != "/Page":
        return True  # MuPDF stands in an empty page for a page object it could not find
    try:
        contents = page.get_contents()
        return bool(contents) and all(doc.xref_object(x) == "null" for x in contents)
    except Exception:
        return True


def content_damaged() -> bool:
    """Whether MuPDF warned about broken content since the last call (and forget the warnings).

    Call it once before reading a page (to forget older warnings) and once after. Only warnings
    that mean damaged data count: whole files warn about other things too ("ActualText with no
    position"), and in a repaired file MuPDF warns about the page tree for every page it looks
    up, whether or not that page's content is whole.
    """
    text = pymupdf.TOOLS.mupdf_warnings(reset=1)
    return any(_DAMAGE.search(line) and "page tree" not in line for line in text.splitlines())


def key_lost(data: bytes, opened: OpenedPdf) -> bool:
    """Whether a repaired file is encrypted but MuPDF no longer knows it: the trailer that
    points to the encryption dictionary and holds the file id (both needed for the key) was
    in the part that is missing, so its content cannot be decrypted."""
    doc = opened.doc
    return opened.repaired and not doc.is_encrypted and _STANDARD_SECURITY.search(data) is not None


def bad_char(c: str) -> bool:
    """A character no text has: a C0 control code or U+FFFD, what MuPDF gives for a glyph whose
    character map was lost."""
    return c == "\ufffd" or (c < " " and c not in "\t\n\r")


def page_ranges(nums: list[int]) -> str:
    """Sorted page numbers as ranges: ``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    parts: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _numbers(pages: list[int]) -> str:
    return ("pages " if len(pages) > 1 else "page ") + page_ranges(pages)


def _cause(opened: OpenedPdf) -> str:
    return "the file looks truncated" if opened.truncated else "the file looks damaged"


def repair_problem(opened: OpenedPdf, *, pages: int, lost: list[int], partial: list[int]) -> str:
    """The problem line for a repaired file of which some pages were read.

    ``pages`` is the number of pages in the (repaired) document; ``lost`` and ``partial`` are
    1-based page numbers of pages that could not be read, or only in part.
    """
    readable = pages - len(lost)
    expected = opened.expected_pages
    if expected is None:
        head = f"repaired: {readable} {'page' if readable == 1 else 'pages'} readable"
    elif readable == expected:
        head = f"repaired: all {expected} pages readable"
    else:
        head = f"repaired: {readable} of {expected} pages readable"
    parts = [f"{head} ({_cause(opened)})"]
    if opened.rebuilt:
        known = "" if expected is not None else "the page count is unknown and "
        parts.append(
            f"the page tree was lost: {known}pages are numbered in the order they were found, "
            "which may not be the original page numbers"
        )
    if lost:
        parts.append(f"{_numbers(lost)} could not be read")
    if partial:
        parts.append(f"{_numbers(partial)} may be incomplete")
    if not lost and not partial and not opened.rebuilt:
        parts.append("some text may be missing")
    return "; ".join(parts)


def unreadable_message(
    name: str, pages: int, *, truncated: bool, repaired: bool, encrypted: bool = False
) -> tuple[str, str | None]:
    """(message, hint) when no page of a file could be read; ``pages`` as in the document,
    ``encrypted`` as :func:`key_lost` says."""
    if truncated:
        what = f"{name} is cut short (it stops before the end-of-file marker)"
        hint: str | None = "The copy is incomplete: download or copy the file again."
    elif repaired:
        what, hint = f"{name} is damaged", None
    else:
        what, hint = f"{name} cannot be read", None
    if pages == 0:
        if repaired:
            why = "no page could be recovered: the page tree and the page objects are missing"
        else:
            why = "it has no pages"
    elif encrypted:
        why = (
            "no page could be recovered: the file is encrypted, and what is needed to decrypt "
            "it was in the missing part"
        )
    else:
        found = "the page found has" if pages == 1 else f"the {pages} pages found have"
        why = f"no page could be recovered: {found} no content left that can be decoded"
    return f"{what}: {why}.", hint
