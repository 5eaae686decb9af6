"""Evidence: a passage, or a span inside one, with what a viewer needs to show it (pages, word
boxes, the document it comes from): what an evidence id names
(:meth:`core.library.Library.evidence`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from graph.schemas import Document, Passage, Word


class Evidence(BaseModel):
    """A passage or a span inside one, with what a viewer needs to show it."""

    evidence_id: str
    passage_id: str
    doc_id: str
    title: str
    source_uri: str
    kind: str
    text: str = Field(description="The cited text: the span's, or the whole passage's.")
    passage_text: str
    start: int = 0
    end: int = 0
    pages: list[int] = Field(default_factory=list, description="1-based pages.")
    heading_path: list[str] = Field(default_factory=list)
    boxes: list[Word] = Field(default_factory=list, description="Word boxes of the cited text.")
    superseded: bool = False


def evidence_of(evidence_id: str, p: Passage, doc: Document, start: int, end: int) -> Evidence:
    """The cited range ``start:end`` of passage ``p`` of ``doc`` as :class:`Evidence`: its word
    boxes, and its pages from them (from the passage's page range when it has no words)."""
    words = [w for w in p.words if w.start < end and w.end > start]
    pages = sorted({w.page_index + 1 for w in words})
    if not pages and p.page_start is not None:
        last = p.page_end if p.page_end is not None else p.page_start
        pages = list(range(p.page_start + 1, last + 2))
    return Evidence(
        evidence_id=evidence_id,
        passage_id=p.passage_id,
        doc_id=doc.doc_id,
        title=doc.title,
        source_uri=doc.source_uri,
        kind=doc.kind,
        text=p.text[start:end],
        passage_text=p.text,
        start=start,
        end=end,
        pages=pages,
        heading_path=p.heading_path,
        boxes=words,
        superseded=doc.superseded_by is not None,
    )
