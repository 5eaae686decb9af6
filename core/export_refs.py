"""The sources of a report for reference managers: BibTeX and CSL-JSON.

One entry per cited document (a document version, as the report numbers them), not per passage:
title, where it came from (URL, or the local path), the pages the report cites, the year when
the document's own metadata gives one, and when the library read it (``urldate`` / ``accessed``).

Keys are stable, so a re-export updates entries in a reference manager instead of adding new
ones: the title's first word, the year if known, and six hex digits derived from the document
id (itself derived from the document's bytes), e.g. ``northport2019_1a2b3c``. Keys use only
ASCII letters, digits and ``_``, which every BibTeX dialect accepts.

What the library knows of a document arrives through a :class:`SourceInfoFn` passed in by the
service; without one (or for a document no longer in the library) an entry is still written
from the citation records, without a year, with the report's date as the access date.

Threading: pure functions of their arguments (``source_info_of`` reads one file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.research.sanitize import safe_url
from core.research.schemas import CitationRecord, Report

logger = logging.getLogger(__name__)


class SourceInfo(BaseModel):
    """What the library knows of a cited document beyond the citation records."""

    kind: str = Field("", description="pdf, web, text ... (empty when unknown).")
    year: int | None = Field(None, description="From the document's own metadata, if any.")
    accessed: date | None = Field(None, description="When the library read the document.")


#: ``doc_id -> SourceInfo`` (``None`` when the library no longer has the document).
SourceInfoFn = Callable[[str], SourceInfo | None]


class SourceRef(BaseModel):
    """One cited document, the common ground of the BibTeX and CSL-JSON writers."""

    key: str
    number: int
    doc_id: str
    title: str
    source_uri: str
    url: str | None = Field(None, description="The source when it is a safe http(s) URL.")
    pages: list[int] = Field(default_factory=list)
    year: int | None = None
    accessed: date
    kind: str = ""
    note: str


_YEAR_RE = re.compile(r"(?<!\d)(1[89]\d\d|2\d\d\d)(?!\d)")


def _plausible_year(text: str | None) -> int | None:
    m = _YEAR_RE.search(text or "")
    if m is None:
        return None
    year = int(m.group(1))
    return year if 1800 <= year <= date.today().year + 1 else None


def document_year(path: Path) -> int | None:
    """The year a PDF's metadata (creation date) or a web page's meta tags give, if any."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".pdf":
            import pymupdf

            with pymupdf.open(path) as doc:
                meta = doc.metadata or {}
            stamp = str(meta.get("creationDate") or meta.get("modDate") or "")
            return _plausible_year(stamp.removeprefix("D:")[:4])
        if suffix in (".html", ".htm"):
            from selectolax.lexbor import LexborHTMLParser

            tree = LexborHTMLParser(path.read_bytes()[:2_000_000])
            for selector in (
                'meta[name="citation_publication_date"]',
                'meta[name="citation_date"]',
                'meta[property="article:published_time"]',
                'meta[name="dc.date"]',
                'meta[name="DC.date"]',
                'meta[name="date"]',
            ):
                node = tree.css_first(selector)
                year = _plausible_year(node.attributes.get("content") if node else None)
                if year is not None:
                    return year
    except Exception:  # a damaged file has no year; the reference is written without one
        logger.info("no year from %s", path, exc_info=True)
    return None


def source_info_of(kind: str, added_at: datetime | None, path: Path | None) -> SourceInfo:
    """A :class:`SourceInfo` from a document's kind, date added and (if at hand) its bytes."""
    return SourceInfo(
        kind=kind,
        year=document_year(path) if path is not None else None,
        accessed=added_at.date() if added_at is not None else None,
    )


def _slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", ascii_title)]
    skip = {"a", "an", "the", "of", "on", "in", "and", "for", "to"}
    word = next((w for w in words if w not in skip), words[0] if words else "")
    word = word[:24]
    return word if word[:1].isalpha() else "src" + word


def citation_key(title: str, year: int | None, doc_id: str) -> str:
    """A stable key: first title word, year, and a short digest of the document id."""
    digest = hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:6]
    return f"{_slug(title)}{year or ''}_{digest}"


def source_refs(report: Report, source_info: SourceInfoFn | None = None) -> list[SourceRef]:
    """One :class:`SourceRef` per cited document, in citation-number order."""
    by_doc: dict[str, list[CitationRecord]] = {}
    for c in sorted(report.citations, key=lambda c: c.number):
        by_doc.setdefault(c.doc_id or c.source_uri, []).append(c)
    refs: list[SourceRef] = []
    for doc_id, recs in by_doc.items():
        first = recs[0]
        found = source_info(first.doc_id) if source_info is not None and first.doc_id else None
        info = found or SourceInfo()
        pages = sorted({p for r in recs for p in r.pages})
        accessed = info.accessed or report.created_at.date()
        note = f"Cited in the Sourcebook report \u201c{report.question}\u201d as [{first.number}]"
        if first.superseded:
            note += "; a newer version of this document exists"
        if found is None and source_info is not None:
            note += "; no longer in the library"
        url = first.source_uri if safe_url(first.source_uri) else None
        refs.append(
            SourceRef(
                key=citation_key(first.title, info.year, doc_id),
                number=first.number,
                doc_id=doc_id,
                title=first.title,
                source_uri=first.source_uri,
                url=url,
                pages=pages,
                year=info.year,
                accessed=accessed,
                kind=info.kind or ("web" if "://" in first.source_uri else ""),
                note=note,
            )
        )
    return refs


def _page_ranges(pages: list[int], dash: str) -> str:
    """``3, 5--7`` (runs of pages joined by ``dash``)."""
    runs: list[list[int]] = []
    for p in sorted(set(pages)):
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}{dash}{b}" for a, b in runs)


# BibTeX: {, } and \ must be balanced or escaped in a braced value; the rest are LaTeX specials.
_BIB_ESCAPES = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "^": r"\^{}",
    "~": r"\~{}",
}


def bibtex_escape(text: str) -> str:
    """``text`` safe inside a braced BibTeX value (LaTeX specials escaped; one line)."""
    flat = " ".join(text.split())
    return "".join(_BIB_ESCAPES.get(ch, ch) for ch in flat)


def _bib_url(url: str) -> str:
    # the url field is read verbatim by the url/hyperref packages; only braces and backslashes
    # would break the .bib syntax, and % and # would break LaTeX, so those are percent-encoded
    return "".join({"{": "%7B", "}": "%7D", "\\": "%5C", "#": "%23"}.get(c, c) for c in url)


def to_bibtex(refs: list[SourceRef]) -> str:
    """A .bib file: one ``@misc`` entry per source (UTF-8; biber and bibtex8 read it)."""
    chunks = ["% Sources of a Sourcebook report; keys are stable across exports.\n"]
    for ref in refs:
        fields: list[tuple[str, str]] = [("title", "{" + bibtex_escape(ref.title) + "}")]
        if ref.year is not None:
            fields.append(("year", str(ref.year)))
        if ref.url is not None:
            fields += [("url", _bib_url(ref.url)), ("urldate", ref.accessed.isoformat())]
            fields.append(("howpublished", r"\url{" + _bib_url(ref.url) + "}"))
        else:
            fields.append(("howpublished", bibtex_escape(ref.source_uri)))
        if ref.pages:
            fields.append(("pages", _page_ranges(ref.pages, "--")))
        accessed = f"Accessed {ref.accessed.isoformat()}"
        fields.append(("note", bibtex_escape(f"{ref.note}. {accessed}")))
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
        chunks.append(f"@misc{{{ref.key},\n{body}\n}}\n")
    return "\n".join(chunks)


def _date_parts(d: date) -> dict[str, Any]:
    return {"date-parts": [[d.year, d.month, d.day]]}


def to_csl_json(refs: list[SourceRef]) -> str:
    """A CSL-JSON array (what Zotero, Mendeley and pandoc's citeproc import)."""
    items: list[dict[str, Any]] = []
    for ref in refs:
        item: dict[str, Any] = {
            "id": ref.key,
            "type": "webpage" if ref.url is not None or ref.kind == "web" else "document",
            "title": ref.title,
            "accessed": _date_parts(ref.accessed),
            "note": ref.note,
        }
        if ref.url is not None:
            item["URL"] = ref.url
        else:
            item["source"] = ref.source_uri
        if ref.year is not None:
            item["issued"] = {"date-parts": [[ref.year]]}
        if ref.pages:
            item["page"] = _page_ranges(ref.pages, "-")
        items.append(item)
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"
