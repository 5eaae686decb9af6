"""Sourcebook's knowledge graph: SQLite catalog, lancedb index, networkx view, hybrid search."""

from graph.errors import GraphError, NotFoundInGraph
from graph.schemas import (
    Collection,
    Document,
    EntityMention,
    IngestedDocument,
    Page,
    Passage,
    SearchFilters,
    SearchHit,
    Span,
    Word,
)
from graph.store import GraphStore

__all__ = [
    "Collection",
    "Document",
    "EntityMention",
    "GraphError",
    "GraphStore",
    "IngestedDocument",
    "NotFoundInGraph",
    "Page",
    "Passage",
    "SearchFilters",
    "SearchHit",
    "Span",
    "Word",
]
