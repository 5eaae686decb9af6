"""The records the knowledge graph stores and returns.

These are the contract between ingestion (``core.ingest`` builds them) and the store (``graph``
keeps and searches them). ``core`` re-exports them; the desktop sees them through the service.

Ids are derived from content, never random (see :mod:`graph.ids`):
- a document version: ``doc_`` + 16 hex of the file bytes' sha256;
- a passage (chunk): ``ev1:`` + 16 hex of sha256(document sha256, ordinal, passage text);
- a span: ``<passage id>#<start>-<end>``, character offsets into the passage text.

Pages: ``page_index`` is PyMuPDF's 0-based index; people see ``page_index + 1``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DocumentKind = Literal["pdf", "text", "markdown", "html", "jsonl", "web"]
DocumentStatus = Literal["indexing", "ready"]
SearchSignal = Literal["vector", "keyword", "graph"]


class Word(BaseModel):
    """One word on a page, with its position in the passage text.

    ``start``/``end`` are character offsets into the passage text; ``rect`` is
    ``(x0, y0, x1, y1)`` in PDF points on page ``page_index`` (origin top-left, PyMuPDF's
    convention). Text documents have no words.
    """

    model_config = ConfigDict(frozen=True)

    page_index: int
    start: int
    end: int
    rect: tuple[float, float, float, float]


class Span(BaseModel):
    """A sentence-level character range inside a passage."""

    model_config = ConfigDict(frozen=True)

    span_id: str
    passage_id: str
    start: int
    end: int


class Passage(BaseModel):
    """A chunk of a document: the unit that is embedded, searched and cited."""

    passage_id: str
    doc_id: str
    ordinal: int = Field(description="0-based position in the document's reading order.")
    text: str
    heading_path: list[str] = Field(default_factory=list)
    page_start: int | None = Field(None, description="0-based first page (None: no pages).")
    page_end: int | None = Field(None, description="0-based last page, inclusive.")
    char_start: int = Field(description="Offset of the passage in the document text.")
    char_end: int
    token_count: int = Field(0, description="Embedder word pieces (never above its limit).")
    words: list[Word] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list)
    packed_words: bytes | None = Field(
        None,
        exclude=True,
        repr=False,
        description="The word boxes already packed (graph.wordpack), set instead of `words` "
        "on a passage that came from an extraction process; the catalog stores them as they are.",
    )


class Page(BaseModel):
    page_index: int
    width: float = 0.0
    height: float = 0.0
    char_count: int = 0
    has_text_layer: bool = True


class EntityMention(BaseModel):
    """An entity named inside a span (``start``/``end`` are passage-text offsets)."""

    model_config = ConfigDict(frozen=True)

    entity_id: str
    name: str
    type: str = Field(description="person, org, place, acronym, date, quantity, title, other")
    passage_id: str
    span_id: str
    start: int
    end: int


class Document(BaseModel):
    """One version of one document."""

    doc_id: str
    source_key: str = Field(description="What identifies 'the same document' across versions.")
    source_uri: str = Field(description="Path or URL the bytes came from.")
    title: str
    kind: DocumentKind
    content_sha256: str
    external_id: str | None = None
    version: int = 1
    status: DocumentStatus = "indexing"
    superseded_by: str | None = None
    page_count: int = 0
    passage_count: int = 0
    problems: list[str] = Field(default_factory=list)
    added_at: datetime
    byte_size: int = 0


class IngestedDocument(BaseModel):
    """Everything ingestion produced for one document version, ready to store."""

    document: Document
    text: str = Field(description="The document's full text; passage offsets point into it.")
    pages: list[Page] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list)
    mentions: list[EntityMention] = Field(default_factory=list)


class SearchFilters(BaseModel):
    doc_ids: list[str] | None = None
    collections: list[str] | None = None
    include_superseded: bool = False


class SearchHit(BaseModel):
    evidence_id: str
    doc_id: str
    title: str
    page_start: int | None
    page_end: int | None
    heading_path: list[str] = Field(default_factory=list)
    snippet: str
    score: float
    signals: list[SearchSignal]
    superseded: bool = False


class Collection(BaseModel):
    name: str
    doc_ids: list[str] = Field(default_factory=list)
